"""CHECK's fresh evidence: every active criterion's proving command run again by an executor session
the orchestrator briefs (read + exec only: its commands write a throwaway layer over the clone that
is discarded after each, so a test suite that writes files runs as it would, and the clone is never
changed; each distinct command once), and what the scout and the auditor are shown of the plan. See
docs/strategies.md, ``## pdca`` and ``## Where the kit chooses``."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from kit.strategies.context import RunContext
from kit.strategies.pdca.plan import Plan, resolve
from kit.strategies.pdca.reports import Rerun
from kit.strategies.pdca.roles import Roles
from kit.strategies.pdca.status import State
from kit.tasks.workspace import diff

Log = Callable[[str, str], None]


def rerun(roles: Roles, st: State, log: Callable[[str, str], None]) -> tuple[list[Rerun], int]:
    """The re-runs that prove some criterion, and how many commands were asked for. The executor's
    CHECK session runs them (``Roles.rerun``, briefed by the orchestrator). A criterion whose ``how_verified`` is a reading (or not a command the
    shell finds: exit 127, then in a second session) is proved by the commands the executor verifiably
    ran for the units covering it."""
    plan = st.plan
    assert plan is not None
    done: dict[str, Rerun] = {}
    wanted: dict[str, list[str]] = {}  # command -> the criteria it proves, not yet run

    def want(command: str, cid: str) -> None:
        target = done[command].criteria if command in done else wanted.setdefault(command, [])
        if cid not in target:
            target.append(cid)

    def stand_ins(cid: str) -> list[str]:
        covering = {cid} | {i.id for i in plan.inherited(cid)}
        return [
            command
            for u in st.active()
            if covering & {resolve(x, plan) for x in u.criteria} and u.id in st.runs
            for command in st.runs[u.id].commands
        ]

    for c in plan.active_criteria():
        method = c.how_verified.strip()
        for command in stand_ins(c.id) if not method or method.lower().startswith("read") else [method]:
            want(command, c.id)
    for _ in range(2):  # the proving commands, then the stand-ins for those the shell did not find
        if not wanted:
            break
        _session(roles, wanted, done, log)
        wanted = {}
        for r in [r for r in done.values() if r.ran and r.exit_code == 127 and r.criteria]:
            for cid in list(r.criteria):
                r.criteria.remove(cid)
                for command in stand_ins(cid):
                    want(command, cid)
    return [r for r in done.values() if r.criteria], len(done)


def _session(roles: Roles, wanted: dict[str, list[str]], done: dict[str, Rerun], log: Log) -> None:
    """One executor CHECK session over ``wanted``; a session that moves the scored diff fails all its
    re-runs (changed_clone)."""
    before = fingerprint(roles.ctx)
    uses = roles.rerun(wanted)
    changed = fingerprint(roles.ctx) != before
    for (command, criteria), use in zip(wanted.items(), uses, strict=True):
        if use is None:
            done[command] = Rerun(command, criteria, None, "", changed, ran=False)
        else:
            done[command] = Rerun(command, criteria, use.exit_code, use.output[-1500:], changed)
        log("CHECK re-run", f"`{command}` -> {done[command].status}")


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
