"""ESCALATE's material: which expert decisions are available, what the expert is shown, and where its
decision is written down. See docs/strategies.md, ``## pdca``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from kit.strategies.context import RunContext
from kit.strategies.pdca.reports import Defect, ExpertDecision
from kit.strategies.pdca.roles import Problem
from kit.strategies.pdca.settings import PdcaSettings
from kit.strategies.pdca.status import State


def allowed_decisions(st: State, settings: PdcaSettings) -> list[str]:
    """replan and stop always; continue only under an accepted plan with attempts left."""
    return ["replan", "stop"] + (["continue"] if st.plan is not None and st.n < settings.max_attempts else [])


def expert_material(
    st: State, settings: PdcaSettings, reason: str, allowed: list[str], open_problems: list[str]
) -> dict[str, Any]:
    return {
        "reason": reason,
        "counters": {"r": st.r, "n": st.n, "max_attempts": settings.max_attempts},
        "allowed_decisions": allowed,
        "plan": st.plan.model_dump() if st.plan else None,
        "defect_history": [d.model_dump() for d in st.defects.values()],
        "unmet": st.unmet(),
        "open_problems": open_problems,
    }


def only(allowed: list[str]) -> Problem:
    """A decision not available now is a malformed report (asked again)."""

    def available(d: BaseModel) -> str | None:
        choice = d.decision  # type: ignore[attr-defined]
        return (
            None
            if choice in allowed
            else f"decision {choice!r} is not available now; choose one of {allowed}"
        )

    return available


def record(ctx: RunContext, st: State, decision: ExpertDecision, why: str, defects: list[Defect]) -> None:
    """The escalation event, the decision on the defects it concerns, and the decisions log."""
    ctx.recorder.event("escalation", "expert", decision.decision, why[:300], ok=decision.decision != "stop")
    for d in defects:
        if d.key in st.defects:
            st.defects[d.key].escalation = f"{decision.decision} @ {st.where}"
    st.decisions.append(f"{st.where}: expert -> {decision.decision}: {why}")
