"""The ``none`` backend: the plain process (a new process group, the timeout, the rlimits and the
allow-listed environment), for machines where bwrap cannot start. Unsandboxed: the command sees the
whole file system, the network and the kit's processes; the report flags such runs.

``writable=False`` cannot be enforced here (the command may write anywhere it could unsandboxed);
``writable="throwaway"`` runs the command in a copy of its folder, removed when it ends
(:mod:`kit.sandbox.throwaway`), so what it writes there never reaches the folder."""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from kit.sandbox import throwaway
from kit.sandbox.base import SANDBOX_HOME, sandbox_env
from kit.sandbox.processes import DEFAULT_LIMITS, ProcessLimits, Result, _as_argv, run_process
from kit.sandbox.throwaway import THROWAWAY, Writable


class NoSandbox:
    """Unsandboxed: a process group, the timeout, the rlimits and the allow-listed env -- nothing else."""

    name = "none"

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
        pins: Sequence[Path] = (),  # (nothing is bound here: unsandboxed)
        neutral: bool = False,  # (nothing can be hidden here: unsandboxed)
    ) -> Result:
        env = dict(env if env is not None else sandbox_env())
        if env.get("HOME") == SANDBOX_HOME:
            env["HOME"] = _private_home()
        if throwaway.check(writable, pins) == THROWAWAY:
            throwaway.refuse_binds_inside(cwd, ro_binds, self.name)
            folder = Path(cwd).resolve()
            size = throwaway.tree_bytes(folder) // 2**20 + limits.scratch_mb
            with throwaway.layer(size, folder, always=True) as layer:
                assert layer is not None
                throwaway.copy_into(folder, layer.upper)
                env = throwaway.moved_env(env, folder, layer.upper)
                return self.run(
                    argv, layer.upper, writable=True, timeout_s=timeout_s, limits=limits, env=env,
                    pass_fds=pass_fds, max_output_chars=max_output_chars,
                )  # fmt: skip
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
