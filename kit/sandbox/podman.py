"""The ``podman`` backend: a container per command (:mod:`kit.sandbox.container`), run by podman, under
a seccomp profile of the kit's.

The profile is podman's own default with the calls the kit's bwrap filter denies
(:data:`kit.sandbox.seccomp.DENIED`) taken out of its allow rules and denied (EPERM). Why: a container
without a user namespace shares the host's user keyrings, and every run's commands are the same
sandbox user -- podman's default profile allows ``keyctl`` (``add_key`` and ``request_key`` fall to
its default ENOSYS), so one run could leave data in a keyring another run reads. BPF objects,
performance counters and userfaultfd are denied for the same reason as under bwrap. Podman's profile
also allows ``unshare``, ``clone`` with ``CLONE_NEW*`` flags and the mount calls: code in the
container -- the code under test during scoring, in-process -- could make a user namespace of its
own and mount over a read-only folder of hidden test data (``docs/sandbox.md``); here those are
denied, ``clone`` is allowed only without a ``CLONE_NEW*`` flag and ``clone3`` (whose flags no filter
can read) fails with ENOSYS, on which the C library falls back to ``clone``. (Docker's default
profile denies all of these already: :mod:`kit.sandbox.docker`.)
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import functools
import json
import os
import subprocess
import tempfile
from pathlib import Path

from kit.sandbox import seccomp, throwaway
from kit.sandbox.base import SandboxUnavailable
from kit.sandbox.container import ContainerSandbox, _checked_path
from kit.sandbox.processes import ProcessLimits
from kit.sandbox.throwaway import Layer

DENIED = (*seccomp.DENIED, "umount")  # (umount: the old call, on the machines that have it)
_REPLACED = frozenset({*DENIED, "clone", "clone3"})
_S390 = ["s390", "s390x"]  # where clone's flags are its second argument


def _clone_allowed(index: int) -> dict:
    """``clone`` allowed when its flags (argument ``index``) hold no CLONE_NEW* bit (as Docker's)."""
    mask = {"index": index, "value": seccomp.CLONE_NEW, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}
    return {"names": ["clone"], "action": "SCMP_ACT_ALLOW", "args": [mask]}


def tightened(profile: dict) -> dict:
    """``profile`` (an OCI seccomp profile as podman and Docker write them) with :data:`DENIED` denied,
    ``clone`` allowed only without CLONE_NEW* flags and ``clone3`` failing with ENOSYS."""
    out = dict(profile)
    rules = []
    for rule in profile.get("syscalls", []):
        names = [n for n in rule.get("names", []) if n not in _REPLACED]
        if names:
            rules.append({**rule, "names": names})
    rules.append({"names": list(DENIED), "action": "SCMP_ACT_ERRNO", "errnoRet": errno.EPERM})
    rules.append({**_clone_allowed(0), "excludes": {"arches": _S390}})
    rules.append({**_clone_allowed(1), "includes": {"arches": _S390}})
    rules.append({"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": errno.ENOSYS})
    out["syscalls"] = rules
    return out


@functools.cache
def podman_profile(client: str) -> Path:
    """The tightened profile for ``client`` (podman), written once per kit process (removed at exit)."""
    try:
        where = subprocess.run(
            [client, "info", "--format", "{{.Host.Security.SECCOMPProfilePath}}"],
            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        ).stdout.strip()  # fmt: skip
        base = json.loads(Path(where).read_text(encoding="utf-8"))
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        raise SandboxUnavailable(
            f"podman's default seccomp profile could not be read ({exc}): install containers-common "
            "(`apt-get install -y podman` brings it), or use `sandbox: docker`"
        ) from exc
    fd, name = tempfile.mkstemp(prefix="orchbench-seccomp-", suffix=".json")
    atexit.register(lambda: os.path.exists(name) and os.unlink(name))
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(tightened(base), fh)
    os.chmod(name, 0o644)
    return Path(name)


class PodmanSandbox(ContainerSandbox):
    """podman (rootful here; rootless maps the kit's user into the container with ``keep-id``). The
    OCI runtime is podman's default unless ``ORCHBENCH_PODMAN_RUNTIME`` names one (``runc`` where
    ``crun`` cannot run, as on a host with hybrid cgroups)."""

    name = "podman"
    binary = "podman"

    def global_args(self) -> list[str]:
        runtime = os.environ.get("ORCHBENCH_PODMAN_RUNTIME", "")
        return ["--runtime", runtime] if runtime else []

    def run_args(self, timeout_s: float) -> list[str]:
        # conmon kills the container past the kit's timeout even if the kit itself died meanwhile
        args = [f"--timeout={int(timeout_s) + 60}", f"--security-opt=seccomp={podman_profile(self.client)}"]
        args.append(
            "--security-opt=mask=/proc/key-users"
        )  # each uid's count of keys (podman masks /proc/keys)
        args.append("--read-only-tmpfs=false")  # no writable /run and /var/tmp: the kit's /tmp is the scratch
        return args + (["--userns=keep-id"] if os.geteuid() != 0 else [])

    # throwaway writes: an overlay volume over the folder, no copy (kit.sandbox.throwaway)
    copies_throwaway = False

    def throwaway_layer(self, cwd: Path, limits: ProcessLimits) -> contextlib.AbstractContextManager:
        """As root, a tmpfs of ``scratch_mb`` for the overlay's upper layer (rootless: None, podman's
        own folder, removed with the container)."""
        return throwaway.layer(limits.scratch_mb, cwd)

    def throwaway_mounts(
        self, cwd: Path, limits: ProcessLimits, layer: Layer | None, dest: Path | None = None
    ) -> list[str]:
        path = _checked_path(cwd)
        own = f",upperdir={_checked_path(layer.upper)},workdir={_checked_path(layer.work)}" if layer else ""
        return ["--volume", f"{path}:{_checked_path(dest or cwd)}:O{own}"]
