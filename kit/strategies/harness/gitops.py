"""harness's git bookkeeping after a session: the agent's commits counted, its leftovers committed
by the kit; and the kit's own test run (a ``gate`` event that decides nothing). See
docs/strategies.md, ``## harness``."""

from __future__ import annotations

from pathlib import Path

from kit.sandbox.commands import run_command
from kit.strategies.context import RunContext
from kit.tasks.git import run_git


def git(root: Path, *args: str) -> str:
    return run_git(root, *args, timeout=60)


def settle_commits(ctx: RunContext, root: Path, head_before: str, role: str, session: int) -> tuple[int, int]:
    """(commits the agent made since ``head_before``, 1 if the kit committed leftovers else 0)."""
    agent_commits = int(git(root, "rev-list", "--count", f"{head_before}..HEAD").strip() or 0)
    what = "initializer" if session == 0 else f"coder session {session}"
    ctx.recorder.event(
        "note", role, "agent-commits", f"{what}: {agent_commits} commit(s)", ok=agent_commits > 0
    )
    if not git(root, "status", "--porcelain").strip():
        return agent_commits, 0
    git(root, "add", "-A")
    git(root, "commit", "-q", "--no-verify", "-m", f"harness: kit commit after {what} (uncommitted changes)")
    ctx.recorder.event("note", role, "kit-commit", f"{what} left uncommitted changes; the kit committed them")
    return agent_commits, 1


def verify(ctx: RunContext, root: Path, session: int) -> bool:
    res = run_command(ctx.task.test_command, root, ctx.limits.command_timeout_s, sandbox=ctx.sandbox)
    ok = not res.timed_out and res.exit_code == 0
    tail = res.output.strip().splitlines()[-1:] or [""]
    ctx.recorder.event(
        "gate", "kit", "tests", f"after session {session}: exit {res.exit_code}: {tail[0]}"[:300], ok=ok
    )
    return ok
