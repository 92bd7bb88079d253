"""What the kit says about a container engine, and how it finds the containers a dead kit left:
an install hint per engine, :func:`diagnose` (the engine's own message turned into one error that says
what to do), and the label and name every command's container carries (:meth:`ContainerSandbox.sweep
<kit.sandbox.container.ContainerSandbox.sweep>`)."""

from __future__ import annotations

import os
import re
import socket
import sys

#: The image every command runs in unless an experiment or a task names another (built here by
#: ``python -m kit sandbox build-image``: the kit's Python version, pytest, git and a shell userland).
DEFAULT_IMAGE = f"localhost/orchbench-python:{sys.version_info.major}.{sys.version_info.minor}"

HOST_LABEL = "orchbench.kit-host"


def _host() -> str:
    """This machine's name, as a container label: a sweep leaves other machines' containers alone."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname())[:63] or "host"


def _alive(container: str) -> bool:
    """Whether the kit process that named ``container`` (``orchbench-<pid>-...``) still runs."""
    try:
        os.kill(int(container.split("-")[1]), 0)
    except (IndexError, ValueError, ProcessLookupError):
        return False
    except PermissionError:
        pass
    return True


def install_hint(binary: str) -> str:
    if binary == "docker":
        return (
            "install Docker (macOS, Windows: Docker Desktop; Linux: `apt-get install -y docker.io` and a "
            "running `dockerd`)"
        )
    return "install podman (Debian, Ubuntu: `apt-get install -y podman runc`; macOS: `brew install podman`, then `podman machine init && podman machine start`)"


#: (what the engine says, what to do) for the ways a container engine fails to start a command.
FAILURES = (
    (
        "cgroups in hybrid mode not supported",
        "podman's OCI runtime crun cannot run on this host's hybrid (v1 + v2) cgroups: install runc "
        "(`apt-get install -y runc`) and set ORCHBENCH_PODMAN_RUNTIME=runc in the kit's environment (or "
        '`runtime = "runc"` under [engine] in /etc/containers/containers.conf)',
    ),
    (
        "Cannot connect to the Docker daemon",
        "start Docker (Docker Desktop on macOS and Windows; `dockerd` on Linux)",
    ),
    (
        "permission denied while trying to connect",
        "let this user use Docker (the docker group) or run as root",
    ),
    (
        "error setting rlimit",
        "the runtime could not set the command's limits: run the kit as root or use runc",
    ),
    ("image not known", "build the image: `python -m kit sandbox build-image`"),
    ("No such image", "build the image: `python -m kit sandbox build-image --sandbox docker`"),
    (
        "executable file not found",
        "the runtime or the image's shell is missing: install runc, or use an image with /bin/sh",
    ),
    (
        "OCI runtime",
        "the OCI runtime failed: install runc (`apt-get install -y runc`), set ORCHBENCH_PODMAN_RUNTIME=runc",
    ),
)


def diagnose(binary: str, output: str) -> str:
    """One message saying why ``binary`` could not run a command here, and what to do."""
    fix = next((todo for said, todo in FAILURES if said.lower() in output.lower()), None)
    fix = fix or f"check that `{binary} run --rm {DEFAULT_IMAGE} true` works, or use another sandbox"
    return f"{binary} could not start a container here ({output.strip()[-400:]}): {fix}"
