"""What every sandbox backend shares: the :class:`Sandbox` interface, the error a backend raises when
it cannot start here, and the environment a command gets (built from an allow-list, never from the
kit's own os.environ, so no provider key passes)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from kit import trees
from kit.errors import KitError
from kit.sandbox.processes import DEFAULT_LIMITS, ProcessLimits, Result
from kit.sandbox.throwaway import Writable
from kit.secrets import is_secret_env

OPT_OUT = "set `sandbox: none` in the experiment to opt out (unsandboxed)"


class SandboxUnavailable(KitError):
    """The chosen sandbox cannot start on this machine."""


class Sandbox(Protocol):
    """``run`` one command in ``cwd``. ``writable``: True -- ``cwd`` is the command's to change;
    False -- read-only; ``"throwaway"`` -- the command may write there, and what it wrote is
    discarded when it ends, ``cwd`` itself unchanged (:mod:`kit.sandbox.throwaway`). ``neutral``: the
    agent's view, naming nothing of the experiment (:mod:`kit.sandbox.view`)."""

    name: str

    def run(
        self,
        argv: str | list[str],
        cwd: Path,
        *,
        writable: Writable,
        timeout_s: float,
        limits: ProcessLimits = DEFAULT_LIMITS,
        env: dict[str, str] | None = None,
        ro_binds: Sequence[Path] = (),
        pass_fds: Sequence[int] = (),
        max_output_chars: int = 10_000,
        pins: Sequence[Path] = (),
        neutral: bool = False,
    ) -> Result: ...


# --------------------------------------------------------------------------- environment

#: Variables copied from the kit's environment when set (nothing else is: keys never pass).
ENV_ALLOW = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM")
SYSTEM_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
#: HOME inside both backends: a private, writable, empty folder (under the private /tmp in bwrap).
SANDBOX_HOME = "/tmp/home"
#: The unprivileged host user and group every bwrap command runs as when the kit runs as root (no
#: host account uses them; ORCHBENCH_SANDBOX_UID overrides both). Root-only files are unreadable to it.
SANDBOX_UID = SANDBOX_GID = int(os.environ.get("ORCHBENCH_SANDBOX_UID") or 64055)


def drops_to_sandbox_user() -> bool:
    """Whether bwrap commands run as :data:`SANDBOX_UID` (the kit runs as root; otherwise they run as
    the kit's own unprivileged user)."""
    return os.geteuid() == 0


def hand_over(path: Path) -> None:
    """Make ``path`` and everything below it belong to the sandbox user, so a sandboxed command can
    write there. No link is followed, even one swapped in while the walk runs, at any depth
    (:func:`kit.trees.visit` goes from folder descriptor to folder descriptor). A no-op unless
    commands run as :data:`SANDBOX_UID`."""
    if not drops_to_sandbox_user():
        return
    os.lchown(path, SANDBOX_UID, SANDBOX_GID)

    def give(dir_fd: int, name: str, _st: os.stat_result) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.chown(name, SANDBOX_UID, SANDBOX_GID, dir_fd=dir_fd, follow_symlinks=False)

    trees.visit(Path(path), give)


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
