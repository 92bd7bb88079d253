"""The images the container backends run commands in: the kit's default, one an experiment or a task
names, or one a task's ``Containerfile`` builds -- each built locally, named by the hash of what it is
made of, and built again only when that changes.

- **The default** (:data:`~kit.sandbox.container.DEFAULT_IMAGE`, ``localhost/orchbench-python:X.Y``
  for the kit's Python X.Y): :func:`build_default` makes it either ``--from host`` -- the host's
  Debian packages and the kit's own pytest (:mod:`kit.sandbox.rootfs`) imported as a tar, no registry
  needed -- or ``--from containerfile`` -- the kit's ``Containerfile`` (``python:X.Y-slim`` plus git and
  pytest), where a registry is reachable (macOS, Windows). Its label ``orchbench.inputs`` holds the
  hash of its inputs: an image with the same hash is kept.
- **A task's Containerfile** (``Containerfile`` in the task folder, its build context the task's
  ``container/`` folder or nothing -- never the repo or the hidden tests): :func:`task_image` builds it
  once as ``localhost/orchbench-task-<id>:<hash>``, the hash covering the Containerfile, its context
  and the ids of the images it starts ``FROM``.

:func:`resolve` turns an image's name into a sandbox spec holding its id (``podman@sha256:...``), so
every command of an experiment runs in exactly the image it started with, and run.json records it.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from kit.sandbox.base import SANDBOX_UID, SandboxUnavailable
from kit.sandbox.container import ContainerSandbox
from kit.sandbox.engine import DEFAULT_IMAGE, diagnose

CONTAINERFILE = Path(__file__).with_name("Containerfile")
INPUTS_LABEL = "orchbench.inputs"
BUILD_TIMEOUT_S = 1800
_build_lock = threading.Lock()


@dataclass(frozen=True)
class Image:
    name: str  # as the experiment, the task or the kit names it
    id: str  # the engine's id of it (sha256:...): what the commands run

    def spec(self, backend: str) -> str:
        return f"{backend}@{self.id}"


def _engine(box: ContainerSandbox, *args: str, timeout: float = 120, **kw) -> subprocess.CompletedProcess:  # noqa: ANN003
    return subprocess.run(
        [box.client, *box.global_args(), *args],
        capture_output=True, env=box.client_env(), timeout=timeout, check=False, **kw,
    )  # fmt: skip


def image_id(box: ContainerSandbox, name: str) -> str | None:
    """The id (``sha256:...``) of the local image ``name``; None when there is none; SandboxUnavailable
    (saying what to do) when the engine itself fails."""
    try:
        res = _engine(
            box, "image", "inspect", "--format", "{{.Id}}", name, text=True, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxUnavailable(diagnose(box.binary, str(exc))) from exc
    found = res.stdout.strip().splitlines()
    if res.returncode != 0 and not re.search(r"image not known|no such (image|object)", res.stderr, re.I):
        raise SandboxUnavailable(diagnose(box.binary, res.stderr))
    if res.returncode != 0 or not found:
        return None
    return found[0] if found[0].startswith("sha256:") else f"sha256:{found[0]}"


def _label(box: ContainerSandbox, name: str) -> str:
    res = _engine(box, "image", "inspect", "--format", "{{json .Config.Labels}}", name, text=True)
    try:
        return (json.loads(res.stdout or "null") or {}).get(INPUTS_LABEL, "")
    except ValueError:
        return ""


def resolve(box: ContainerSandbox, name: str | None = None) -> Image:
    """The local image ``name`` (default: the kit's), or SandboxUnavailable saying how to get it."""
    name = name or DEFAULT_IMAGE
    found = image_id(box, name)
    if found is None:
        how = (
            f"build it: `python -m kit sandbox build-image --sandbox {box.name}` (from this machine's "
            "files, no registry) or with `--from containerfile` where a registry is reachable"
            if name == DEFAULT_IMAGE
            else f"pull or build it first (`{box.binary} pull {name}`), or leave `sandbox_image` unset"
        )
        raise SandboxUnavailable(f"the {box.name} image {name!r} is not on this machine: {how}")
    return Image(name, found)


# --------------------------------------------------------------------------- the default image


def _digest(data: object) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def _kit_inputs() -> dict[str, str]:
    return {
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "pytest": metadata.version("pytest"),
        "uid": str(SANDBOX_UID),
    }


def build_default(box: ContainerSandbox, source: str = "host", force: bool = False) -> tuple[Image, bool]:
    """Build the kit's default image for ``box`` (``source``: ``host`` or ``containerfile``); (the image,
    whether it was built -- False: one with the same inputs was there already)."""
    from kit.sandbox import rootfs

    if source == "host":
        inputs = {"source": "host", **rootfs.inputs(), **_kit_inputs()}
    elif source == "containerfile":
        inputs = {
            "source": "containerfile",
            "file": CONTAINERFILE.read_text(encoding="utf-8"),
            **_kit_inputs(),
        }
    else:
        raise ValueError(f"unknown image source {source!r}: host or containerfile")
    key = _digest(inputs)
    if not force and image_id(box, DEFAULT_IMAGE) and _label(box, DEFAULT_IMAGE) == key:
        return resolve(box), False
    with _build_lock:
        if source == "host":
            _import_rootfs(box, key)
        else:
            kit = _kit_inputs()
            build = [
                "build",
                "-t",
                DEFAULT_IMAGE,
                "--label",
                f"{INPUTS_LABEL}={key}",
                "-f",
                str(CONTAINERFILE),
            ]
            build += [
                arg for k in ("python", "pytest", "uid") for arg in ("--build-arg", f"{k.upper()}={kit[k]}")
            ]
            _checked(
                box, [*build, *_build_ulimits(box), str(CONTAINERFILE.parent)], "the kit's Containerfile"
            )
    return resolve(box), True


def _import_rootfs(box: ContainerSandbox, key: str) -> None:
    """``<engine> import`` of the root file system streamed from :func:`rootfs.write_rootfs`."""
    from kit.sandbox import rootfs

    argv = [box.client, *box.global_args(), "import", "--change", f"LABEL {INPUTS_LABEL}={key}"]
    argv += ["--change", 'CMD ["/bin/sh"]', "-", DEFAULT_IMAGE]
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=box.client_env()
    )
    try:
        rootfs.write_rootfs(proc.stdin)
    except BrokenPipeError:
        pass
    finally:
        proc.stdin.close()  # type: ignore[union-attr]
        out = proc.stdout.read().decode("utf-8", "replace")  # type: ignore[union-attr]
        proc.wait()
    if proc.returncode != 0:
        raise SandboxUnavailable(f"`{box.binary} import` of the kit's image failed: {out.strip()[-1000:]}")


def _build_ulimits(box: ContainerSandbox) -> list[str]:
    # runc (where crun cannot run) fails a RUN step that inherits the engine's own limits
    return ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096"] if box.name == "podman" else []


def _checked(box: ContainerSandbox, args: list[str], what: str) -> None:
    res = _engine(box, *args, timeout=BUILD_TIMEOUT_S, text=True, stdin=subprocess.DEVNULL)
    if res.returncode != 0:
        tail = (res.stdout + res.stderr).strip()[-1500:]
        raise SandboxUnavailable(
            f"building {what} with {box.binary} failed:\n{tail}\n  -> fix {what} and run again"
        )


# --------------------------------------------------------------------------- a task's Containerfile


def _no_links(containerfile: Path, context: Path) -> None:
    """Refuse a task's Containerfile or build context that is, or holds, a symbolic link: the task
    folder is untrusted input, and a link would make a host file or folder part of the image every
    command of a run -- the agent's included -- runs in (``container -> /root``)."""
    links = [p for p in (containerfile, context) if p.is_symlink()]
    if not links and context.is_dir():
        links = [p for p in context.rglob("*") if p.is_symlink()][:3]
    if links:
        raise SandboxUnavailable(
            f"a task's {containerfile.name} or its container/ folder holds a symbolic link "
            f"({', '.join(str(p) for p in links)}): refused -- a task's image is built from real files only"
        )


def task_image(box: ContainerSandbox, task_id: str, containerfile: Path) -> Image:
    """The image of a task's ``containerfile`` (its context: the ``container/`` folder beside it),
    built on first use and kept under a name holding the hash of everything it is made of."""
    context = containerfile.parent / "container"
    _no_links(containerfile, context)
    text = containerfile.read_text(encoding="utf-8")
    parts: dict[str, object] = {"file": text}
    if context.is_dir():
        for path in sorted(p for p in context.rglob("*") if p.is_file()):
            parts[f"ctx/{path.relative_to(context).as_posix()}"] = hashlib.sha256(
                path.read_bytes()
            ).hexdigest()
    for base in re.findall(r"(?im)^\s*FROM\s+(?:--\S+\s+)*(\S+)", text):
        parts[f"from/{base}"] = image_id(box, base) or base  # a rebuilt base: a new task image
    name = f"localhost/orchbench-task-{task_id.lower()}:{_digest(parts)[:16]}"
    with _build_lock, tempfile.TemporaryDirectory(prefix="orchbench-build-") as empty:
        if image_id(box, name) is None:
            build_context = context if context.is_dir() else empty
            args = ["build", "-t", name, "-f", str(containerfile), *_build_ulimits(box), str(build_context)]
            _checked(box, args, f"task {task_id}'s {containerfile.name}")
    return resolve(box, name)
