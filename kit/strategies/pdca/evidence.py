"""CHECK's fresh evidence: every active criterion's proving command run again on the scout's behalf
(read + exec only, each distinct command once), and what the scout and the auditor are shown of the
plan. See docs/strategies.md, ``## pdca`` and ``## Where the kit chooses``."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from kit.strategies.context import RunContext
from kit.strategies.pdca.plan import Plan, resolve
from kit.strategies.pdca.reports import Rerun
from kit.strategies.pdca.settings import RERUN_PERMISSIONS
from kit.strategies.pdca.status import State
from kit.tasks.workspace import diff


def rerun(ctx: RunContext, st: State, log: Callable[[str, str], None]) -> tuple[list[Rerun], int]:
    """The re-runs that prove some criterion, and how many commands ran. A criterion whose
    ``how_verified`` is a reading (or not a command the shell finds: exit 127) is proved by the
    commands the executor verifiably ran for the units covering it."""
    plan = st.plan
    assert plan is not None
    box = ctx.toolbox("scout", RERUN_PERMISSIONS)
    done: dict[str, Rerun] = {}

    def run_once(command: str, cid: str) -> Rerun:
        if command not in done:
            before = fingerprint(ctx)
            res = box.execute("run", {"command": command})
            done[command] = Rerun(command, [], res.exit_code, res.output[-1500:], fingerprint(ctx) != before)
            log("CHECK re-run", f"`{command}` -> exit {done[command].exit_code}")
        if cid not in done[command].criteria:
            done[command].criteria.append(cid)
        return done[command]

    for c in plan.active_criteria():
        method = c.how_verified.strip()
        own = None if method.lower().startswith("read") else run_once(method, c.id)
        if own is not None and own.exit_code != 127:
            continue
        if own is not None:  # not a runnable command: the executor's proving commands stand in
            own.criteria.remove(c.id)
        covering = {c.id} | {i.id for i in plan.inherited(c.id)}
        for u in st.active():
            if covering & {resolve(x, plan) for x in u.criteria} and u.id in st.runs:
                for command in st.runs[u.id].commands:
                    run_once(command, c.id)
    return [r for r in done.values() if r.criteria], len(done)


def fingerprint(ctx: RunContext) -> str:
    """A hash of the clone's diff (the scored change): a re-run that moves it changed the clone."""
    return hashlib.sha256(diff(ctx.workspace).encode()).hexdigest()


def criteria_to_judge(plan: Plan) -> list[dict[str, Any]]:
    """The active criteria, each with the superseded criteria it inherits."""
    return [
        {
            **c.model_dump(exclude={"superseded_by"}),
            "inherits": [i.model_dump() for i in plan.inherited(c.id)],
        }
        for c in plan.active_criteria()
    ]


def changed_files(st: State) -> list[str]:
    """The files the active units' executor reports say they changed (no DO-time evidence)."""
    return sorted({p for u in st.active() if u.id in st.runs for p in st.runs[u.id].report.changed})
