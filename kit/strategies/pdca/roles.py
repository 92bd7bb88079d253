"""The pdca role sessions: one fresh agent per role call, the orchestrator's hand-off brief before each
(the orchestrator is ONE conversation for the whole run: each hand-off is its next turn) -- CHECK's
re-run session and the scout reading its raw output included -- and the re-ask of a missing or
malformed report (a format retry, never a rejection). See docs/strategies.md, ``## pdca``."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from kit.agent.loop import Agent, ToolUse
from kit.strategies.context import RunContext
from kit.strategies.pdca.plan import Plan, PlanDraft, Unit, resolve
from kit.strategies.pdca.reports import (
    CheckFacts,
    Defect,
    ExecutorReport,
    Rerun,
    ScoutReport,
    check_evidence,
    same_command,
)
from kit.strategies.pdca.settings import RERUN_PERMISSIONS, ROLES, PdcaSettings
from kit.strategies.pdca.status import UnitRun, status_guard
from kit.strategies.pdca.tally import Tally

Log = Callable[[str, str], None]
Problem = Callable[[Any], "str | None"]  # what is wrong with a report, None when it is usable


class Stop(Exception):
    """The run ends here (a cap, or the expert): ``reason`` is the run's ``stop_reason``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Roles:
    """Asks the roles; counts their sessions, re-asks and safety-net appends in the run's tally."""

    def __init__(self, ctx: RunContext, settings: PdcaSettings, tally: Tally, goal: str, log: Log) -> None:
        self.ctx, self.p, self.goal, self.log = ctx, settings, goal, log
        self.tally = tally
        self.calls = tally.role_calls
        self.orchestrator: Agent | None = None  # one conversation for the whole run, made on first use

    def text(self, name: str, **values: object) -> str:
        """A user-message template of kit/prompts/pdca/ (``prompt_overrides: {"pdca/<name>": ...}``)."""
        filled = self.ctx.prompts.get(name, **values)
        return filled[:-1] if filled.endswith("\n") else filled

    def count(self, role: str) -> None:
        """One more session (or orchestrator turn) of ``role``; the role-call cap ends the run."""
        if sum(self.calls.values()) >= self.p.max_role_calls:
            raise Stop(f"cap:max_role_calls ({self.p.max_role_calls})")
        self.tally.session(role)

    def agent(
        self, role: str, schema: type[BaseModel] | None, permissions: frozenset[str] | None = None
    ) -> Agent:
        tier, own = ROLES[role]
        agent = self.ctx.agent(
            role,
            tier=tier,  # type: ignore[arg-type]
            permissions=own if permissions is None else permissions,
            system_prompt=self.ctx.prompts.get(role, max_attempts=self.p.max_attempts),
            max_steps=self.p.steps(role),
            result_schema=schema,
            conversation=role if role == "orchestrator" else f"{role}-{self.calls[role]}",
            guard=status_guard if role == "executor" else None,
        )
        agent.config.max_output_tokens = self.p.max_output_tokens.get(role)
        return agent

    def ask(
        self,
        role: str,
        message: str,
        schema: type[BaseModel] | None = None,
        *,
        permissions: frozenset[str] | None = None,
        steps: int | None = None,
    ) -> Any:
        """One fresh session of ``role``; the run's caps end the run (:class:`Stop`)."""
        self.count(role)
        return _spent(self.agent(role, schema, permissions).run(message, max_steps=steps))

    def report(
        self, role: str, brief: str, schema: type[BaseModel], problem: Problem, keep_partial: bool = False
    ) -> Any:
        """Ask ``role`` for a report; a missing or malformed one is asked again (a format retry)."""
        message, last = brief, None
        for attempt in range(self.p.report_retries + 1):
            res = self.ask(role, message, schema)
            wrong = (
                f"no readable {schema.__name__} ({res.outcome})"
                if res.result is None
                else problem(res.result)
            )
            if wrong is None:
                return res.result
            last = res.result if keep_partial and res.result is not None else last
            self.log(f"{role} report unusable", wrong)
            if attempt < self.p.report_retries:
                self.tally.format_retries[role] += 1
                message = self.text("reask", brief=brief, problem=wrong)
        return last

    def brief(self, role: str, purpose: str, material: Any) -> str:
        """The orchestrator's hand-off: the next turn of its one conversation (the goal comes with the
        first); the safety net (off by default) appends what the brief missed."""
        data = material if isinstance(material, str) else json.dumps(material, indent=1, default=str)
        self.count("orchestrator")
        self.tally.handoffs[role] += 1
        turn = "handoff_first" if self.orchestrator is None else "handoff"
        if self.orchestrator is None:
            self.orchestrator = self.agent("orchestrator", None)
            self.orchestrator.config.compact_turns = True  # old hand-offs may be shortened, never the first
        message = self.text(turn, goal=self.goal, role=role, purpose=purpose, material=data)
        text = (_spent(self.orchestrator.run(message)).final or "").strip()
        if self.p.brief_safety_net:
            missed = [a for a in _anchors(material) if a not in text]
            if missed:
                self.tally.safety_net += 1
                self.log("brief safety net", f"{role} brief missed {', '.join(missed[:5])}")
                text = self.text("safety_net", brief=text, goal=self.goal, material=data)
        return text

    def rerun(self, wanted: dict[str, list[str]]) -> list[ToolUse | None]:
        """CHECK's fresh evidence: the orchestrator briefs one executor session (its tier, read + exec:
        its commands write a throwaway layer, never the clone) with the proving commands and the
        criteria they prove; what counts is its tool log, not its report. Each command's last exact
        run, None for a command it did not run (a command the brief miscopied is not run)."""
        commands = list(wanted)
        material = {"commands": [{"command": c, "for_criteria": ids} for c, ids in wanted.items()]}
        res = self.ask(
            "executor",
            self.brief("executor", self.text("check_rerun"), material),
            ExecutorReport,
            permissions=RERUN_PERMISSIONS,
            steps=len(commands) + 2,
        )
        runs = [
            u
            for u in res.tool_log
            if u.tool == "run" and not u.denied and isinstance(u.args.get("command"), str)
        ]
        extra = [
            u.args["command"] for u in runs if not any(same_command(u.args["command"], c) for c in commands)
        ]
        if extra:
            self.log("CHECK session ran other commands", "; ".join(f"`{c}`" for c in extra)[:300])
        out = []
        for command in commands:
            seen = [u for u in runs if same_command(u.args["command"], command)]
            out.append(seen[-1] if seen else None)
        return out

    # -- the roles' hand-offs -------------------------------------------------------------------
    def scout(self, purpose: str, material: Any = None) -> ScoutReport:
        brief = self.brief("scout", purpose, material or {"purpose": purpose})
        report = self.report("scout", brief, ScoutReport, lambda r: None if r.facts else "no facts")
        self.log("scout report", f"{len(report.facts) if report else 0} facts")
        return report or ScoutReport()

    def check_scout(self, material: dict[str, Any], reruns: list[Rerun], ids: list[str]) -> CheckFacts:
        """CHECK's reading: the orchestrator briefs the scout (statuses and pointers); the kit appends
        the re-runs' raw output, which no other role sees. Per criterion: command, exit status,
        numbers, pointers -- no verdict. A report that leaves a criterion out is asked again."""
        brief = self.text(
            "scout_evidence",
            brief=self.brief("scout", "read the CHECK re-runs' output and the changed code", material),
            evidence="\n\n".join(r.evidence() for r in reruns) or "(no command was re-run)",
        )

        def uncovered(r: CheckFacts) -> str | None:
            missing = r.missing(ids)
            return f"no facts for criteria {', '.join(missing)}" if missing else None

        report = self.report("scout", brief, CheckFacts, uncovered, keep_partial=True)
        self.log("scout report", f"facts on {len(report.criteria) if report else 0} criteria")
        return report or CheckFacts()

    def analyst(self, facts: ScoutReport | None, previous: Plan | None, fix_these: list[str]) -> PlanDraft:
        material = {
            "scout_facts": facts.model_dump()["facts"] if facts else [],
            "previous_plan": previous.model_dump() if previous else None,
            "fix_these": fix_these,
        }
        purpose = "write the plan" if previous is None else "revise the plan"
        res = self.ask("analyst", self.brief("analyst", purpose, material), PlanDraft)
        self.log("analyst answered", f"{res.outcome}")
        return res.result or PlanDraft()

    def executor(self, unit: Unit, plan: Plan, defects: list[Defect]) -> tuple[ExecutorReport, UnitRun]:
        """One unit implemented; the report's evidence checked against the session's tool log."""
        ids = {resolve(c, plan) for c in unit.criteria}
        material = {
            "unit": unit.model_dump(include={"id", "expected_result", "criteria"}),
            "criteria": [
                c.model_dump(exclude={"superseded_by"}) for c in plan.active_criteria() if c.id in ids
            ],
            "constraints": plan.constraints,
            "defects_to_fix": [d.model_dump() for d in defects if d.unit in (None, unit.id)],
        }
        res = self.ask(
            "executor", self.brief("executor", f"implement unit {unit.id}", material), ExecutorReport
        )
        report = res.result or ExecutorReport(unit=unit.id, unfinished=[f"no report ({res.outcome})"])
        evidence, refused, commands = check_evidence(report, res.tool_log)
        for command in refused:
            self.log(f"unit {unit.id} evidence refused", f"`{command}` was never run")
        return report, UnitRun(report=report, evidence=evidence, commands=commands)


def _spent(res: Any) -> Any:
    """An agent result; the run budget refusing a call ends the run (``cap:budget``)."""
    if res.outcome == "budget":
        raise Stop(f"cap:budget ({(res.final.splitlines() or [''])[0]})")
    return res


_ANCHOR_KEYS = {
    "id",
    "unit",
    "key",
    "command",
    "pointer",
    "how_verified",
    "criteria",
    "changed_files",
    "for_criteria",
}


def _anchors(material: Any, key: str = "") -> list[str]:
    """The exact strings a brief must carry: ids, keys, commands, pointers, paths."""
    if isinstance(material, dict):
        return [a for k, v in material.items() for a in _anchors(v, k)]
    if isinstance(material, list):
        return [a for v in material for a in _anchors(v, key)]
    return [material] if key in _ANCHOR_KEYS and isinstance(material, str) and material.strip() else []
