"""Running commands for agents and for scoring through :mod:`kit.sandbox.backends` (a timeout that kills
everything, bounded output, rlimits), with an environment that never carries a secret
(:func:`kit.secrets.is_secret_env`)."""

from __future__ import annotations

from pathlib import Path

from kit.sandbox.backends import DEFAULT_LIMITS, ProcessLimits, Result, get_sandbox, sandbox_env


def scrubbed_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for any command the kit starts: built from an allow-list (``sandbox_env``),
    never from the kit's own os.environ, so no provider key passes whatever its name."""
    return sandbox_env(extra)


#: Same fields as before the sandbox existed; kept as a name for callers.
CommandResult = Result


def run_command(
    command: str | list[str],
    cwd: Path,
    timeout_s: float,
    *,
    env: dict[str, str] | None = None,
    max_output_chars: int = 10_000,
    sandbox: str = "none",
    writable: bool = True,
    limits: ProcessLimits = DEFAULT_LIMITS,
    neutral: bool = False,
) -> Result:
    """Run ``command`` (a shell string or an argv list) through the sandbox called ``sandbox``.

    Commands an agent can influence pass the run's sandbox (``ctx.sandbox``); ``none`` -- the default,
    for the kit's own trusted commands such as a task's setup -- is a process group with the timeout,
    the rlimits and the allow-listed environment. Either way the timeout kills everything and the
    output keeps head and tail. ``neutral``: the agent's view (:mod:`kit.sandbox.view`), for output
    an agent reads.
    """
    return get_sandbox(sandbox).run(
        command,
        Path(cwd),
        writable=writable,
        timeout_s=timeout_s,
        limits=limits,
        env=env,
        max_output_chars=max_output_chars,
        neutral=neutral,
    )
