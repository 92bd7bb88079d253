"""What pdca counts as it goes, and the ``counters`` it records in run.json (docs/strategies.md,
``## pdca``; docs/records.md, ``## run.json``)."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from kit.strategies.pdca.settings import PdcaSettings
from kit.strategies.pdca.status import State


@dataclass
class Tally:
    phase: str = "PLAN"  # the phase the loop is in (Journal.enter sets it)
    role_calls: Counter[str] = field(default_factory=Counter)  # role sessions, re-asks included
    phase_calls: dict[str, Counter[str]] = field(default_factory=dict)  # phase -> role -> sessions
    handoffs: Counter[str] = field(default_factory=Counter)  # orchestrator hand-offs, per role briefed
    format_retries: Counter[str] = field(default_factory=Counter)
    gate_rejections: Counter[str] = field(default_factory=Counter)
    do_rejections: Counter[int] = field(default_factory=Counter)  # per plan revision
    attempts: dict[int, int] = field(default_factory=dict)  # revision -> attempts (DO entries)
    escalations: int = 0
    safety_net: int = 0  # brief safety-net appends
    reruns: int = 0  # CHECK re-runs

    def session(self, role: str) -> None:
        """One more session (or orchestrator turn) of ``role``, in the current phase."""
        self.role_calls[role] += 1
        self.phase_calls.setdefault(self.phase, Counter())[role] += 1


def outcome(passed: bool, reason: str) -> str:
    """The one outcome vocabulary (docs/strategies.md, ``## Outcomes and stop reasons``): EXIT is
    ``done``; the run budget ``budget``; pdca's own role-call cap ``capped``; the expert's stop (or
    no decision) ``incomplete``."""
    if passed:
        return "done"
    if reason.startswith("cap:budget"):
        return "budget"
    return "capped" if reason.startswith("cap:") else "incomplete"


def counters(
    tally: Tally,
    st: State,
    settings: PdcaSettings,
    *,
    passed: bool,
    reason: str,
    status_updates: dict[str, int],
    denials: int,
    status_file: str,
) -> dict[str, Any]:
    """The run's counters, in the order run.json has always listed them (newer ones beside their kin)."""
    return {
        "outcome": outcome(passed, reason),
        "stop_reason": "pass" if passed else reason,
        "cycles": st.N,
        "cycles_closed": st.N if passed else st.N - 1,
        "plan_revisions": st.r,
        "attempts": sum(tally.attempts.values()),
        "attempts_per_revision": {f"r{r}": n for r, n in sorted(tally.attempts.items())},
        "escalations": tally.escalations,
        "gate_rejections": sum(tally.gate_rejections.values()),
        "gate_rejections_by_gate": dict(tally.gate_rejections),
        "format_retries": dict(tally.format_retries),
        "role_calls": dict(tally.role_calls),
        "role_calls_by_phase": {phase: dict(calls) for phase, calls in tally.phase_calls.items()},
        "handoffs": sum(tally.handoffs.values()),
        "handoffs_by_role": dict(tally.handoffs),
        "check_scout_sessions": tally.phase_calls.get("CHECK", Counter())["scout"],
        "status_updates": status_updates,
        "brief_safety_net_appends": tally.safety_net,
        "check_reruns": tally.reruns,
        "defect_history": [d.model_dump() for d in st.defects.values()],
        "unmet": [] if passed else st.unmet(),
        "permission_denials": denials,
        "status_file": status_file,
        "params": asdict(settings),
    }
