"""harness's git bookkeeping after a session: the agent's commits counted, its leftovers committed
by the kit; and the kit's own test run (a ``gate`` event that decides nothing). See
docs/strategies.md, ``## harness``.

The clone's ``.git`` is the agent's: every git command of the bookkeeping runs in the run's sandbox,
as the agent's commands do (whatever its config, hooks or filters run, they run there, never in the
kit), with hooks and fsmonitor off. A rigged or broken ``.git`` makes the bookkeeping note a failure
and count nothing; it does not end the run.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from kit.sandbox.commands import run_command
from kit.strategies.context import RunContext
from kit.tasks.git import git_env

#: Set on every bookkeeping git command (``-c`` beats the repository's config).
_SAFE = ["-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "commit.gpgsign=false"]
_SAFE += ["-c", "submodule.recurse=false", "-c", "core.pager=cat", "--no-pager"]


class GitFailed(Exception):
    """A bookkeeping git command failed in the sandbox (the agent broke or rigged its ``.git``)."""


def git(ctx: RunContext, *args: str) -> str:
    """``git ARGS`` in the clone, in the run's sandbox; its standard output. GitFailed when it fails."""
    command = "exec git " + " ".join(shlex.quote(a) for a in [*_SAFE, *args]) + " 2>/dev/null"
    root = ctx.workspace.root
    res = run_command(command, root, 60, sandbox=ctx.sandbox, env=git_env(), max_output_chars=100_000)
    if res.timed_out or res.exit_code != 0:
        raise GitFailed(f"git {' '.join(args)} failed in the sandbox (exit {res.exit_code})")
    return res.output


def head(ctx: RunContext) -> str:
    """The clone's HEAD commit, or '' when git cannot say (the agent broke its ``.git``)."""
    try:
        return git(ctx, "rev-parse", "HEAD").strip()
    except GitFailed:
        return ""


def settle_commits(ctx: RunContext, root: Path, head_before: str, role: str, session: int) -> tuple[int, int]:
    """(commits the agent made since ``head_before``, 1 if the kit committed leftovers else 0)."""
    what = "initializer" if session == 0 else f"coder session {session}"
    try:
        count = git(ctx, "rev-list", "--count", f"{head_before}..HEAD").strip() if head_before else ""
        agent_commits = int(count) if count.isdigit() else 0
        ctx.recorder.event(
            "note", role, "agent-commits", f"{what}: {agent_commits} commit(s)", ok=agent_commits > 0
        )
        if not git(ctx, "status", "--porcelain").strip():
            return agent_commits, 0
        git(ctx, "add", "-A")
        git(
            ctx,
            "commit",
            "-q",
            "--no-verify",
            "-m",
            f"harness: kit commit after {what} (uncommitted changes)",
        )
    except GitFailed as exc:
        ctx.recorder.event("note", role, "git", f"{what}: bookkeeping skipped: {exc}"[:300], ok=False)
        return 0, 0
    ctx.recorder.event("note", role, "kit-commit", f"{what} left uncommitted changes; the kit committed them")
    return agent_commits, 1


def verify(ctx: RunContext, root: Path, session: int) -> bool:
    res = run_command(
        ctx.task.test_command, root, ctx.limits.command_timeout_s, sandbox=ctx.sandbox, env=ctx.command_env()
    )
    ok = not res.timed_out and res.exit_code == 0
    tail = res.output.strip().splitlines()[-1:] or [""]
    ctx.recorder.event(
        "gate", "kit", "tests", f"after session {session}: exit {res.exit_code}: {tail[0]}"[:300], ok=ok
    )
    return ok
