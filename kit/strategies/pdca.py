"""pdca -- Plan-Do-Check-Act with roles, tiers, gates and counters (STRATEGIES.md §3).

The state machine is this code; the models only fill in the roles. Every hand-off goes through the
orchestrator's LLM turn, which writes the next role's brief from the previous role's structured
output (the kit appends that output verbatim under "Reference", so a weak orchestrator cannot lose
facts). Roles (default tier; permissions): orchestrator (cheap; none), scout (cheap; read), analyst
(medium; none), executor (cheap; read+write+exec -- the only role that changes files or runs
commands), auditor (medium; none), expert (strong; read). A profile may reassign tiers.

    PLAN  scout gathers facts -> analyst writes the plan -> gate PLAN->DO (every field present, the
          supersede mapping complete, every criterion covered); a rejected plan goes back to the
          analyst with the problems. r grows only when the plan's content really changes.
    DO    the executor implements the ready units one at a time and reports; its evidence is checked
          against the tool log (a command it did not run is not evidence). Gate DO->CHECK: every
          active unit done with evidence; otherwise back to PLAN with the blockers (the analyst adds
          a prerequisite unit or a replacement).
    CHECK scout gathers evidence per criterion (read only), auditor judges from the briefs. Gate
          CHECK->ACT: every criterion met on evidence and no critical/major defect. Otherwise
          implementation defects -> DO (n += 1), plan defects -> PLAN (r += 1, n = 1).
    ESCALATE  after the max_attempts-th rejection on a revision, or when a defect key comes back
          after a fix, or when the DO gate fails twice on a revision: the expert says replan
          (r += 1, n = 1) or stop. There is never an attempt max_attempts + 1 on one revision.
    ACT   result and status file finalised -> EXIT (outcome pass). STOP -> outcome incomplete.

Choices where the spec is silent (written down as asked):
* N starts at 1 and could only grow in ACT; a run has one goal, so ACT always exits and N stays 1.
* A CHECK->PLAN whose new plan is unchanged is not a revision: the next DO is attempt n+1 of the same
  revision (so a cosmetic "replan" cannot dodge the attempt cap). An expert replan must change the
  plan; an unchanged one is a gate rejection.
* A "met" without evidence is downgraded to unverified; a criterion the auditor skipped is
  unverified; not-met criteria with no defect listed get one keyed "criterion-<id>" (route DO).
* A defect's fix_count grows when it is sent back to DO or PLAN; seen again with fix_count >= 1
  means it came back after a fix.
* Caps that always end the loop: max_revisions, max_plan_rejections (per PLAN phase), max_role_calls,
  the run budget; the stop_reason names the one that fired.
* The status file lives in the clone at .pdca/status/<task>-<N>.md; ".pdca/" is added to the clone's
  .git/info/exclude so it is not part of the scored diff; the executor's write tools are refused
  there, and if a shell command changes it the loop restores it and notes the tampering.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from pydantic import BaseModel

from kit.context import RunContext
from kit.records import EVENTS, read_jsonl, utc_now
from kit.strategies import StrategyResult
from kit.strategies.pdca_model import (
    AuditVerdict,
    Defect,
    ExecutorReport,
    ExpertDecision,
    PlanDraft,
    ScoutReport,
    State,
    StatusFile,
    Unit,
    UnitRun,
    carry_states,
    check_evidence,
    check_plan,
    hide_from_git,
    judge,
    log_line,
    plan_key,
    render_header,
    render_snapshot,
    status_guard,
)

ROLES: dict[str, tuple[str, frozenset[str]]] = {
    "orchestrator": ("cheap", frozenset()),
    "scout": ("cheap", frozenset({"read"})),
    "analyst": ("medium", frozenset()),
    "executor": ("cheap", frozenset({"read", "write", "exec"})),
    "auditor": ("medium", frozenset()),
    "expert": ("strong", frozenset({"read"})),
}
STATUS_DIR = ".pdca/status"


@dataclass
class Params:
    max_attempts: int = 3  # auditor rejections per plan revision before the expert
    max_revisions: int = 3
    max_plan_rejections: int = 3  # PLAN->DO rejections in one PLAN phase before STOP
    max_do_rejections: int = 2  # DO->CHECK rejections on one revision before the expert
    max_role_calls: int = 80  # role sessions (orchestrator included) in the whole run
    executor_steps: int = 20
    scout_steps: int = 8
    answer_steps: int = 3  # tool-less roles: steps to produce a valid answer
    max_output_tokens: dict[str, int] = field(default_factory=dict)  # per role; default: the profile's

    @classmethod
    def from_ctx(cls, ctx: RunContext) -> Params:
        steps = ctx.step_cap()
        defaults = asdict(cls(executor_steps=steps, scout_steps=min(8, steps)))
        unknown = set(ctx.options) - set(defaults)
        if unknown:
            raise ValueError(f"unknown pdca options {sorted(unknown)}; valid: {', '.join(defaults)}")
        return cls(**{k: ctx.option(k, v) for k, v in defaults.items()})


class _Stop(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def run(ctx: RunContext) -> StrategyResult:
    return Loop(ctx, Params.from_ctx(ctx)).run()


class Loop:
    def __init__(self, ctx: RunContext, params: Params) -> None:
        self.ctx, self.p = ctx, params
        self.st = State(task=ctx.task.id, goal=ctx.task.prompt, max_attempts=params.max_attempts)
        self.status = StatusFile(ctx.workspace.root / STATUS_DIR / f"{ctx.task.id}-{self.st.N}.md")
        self.calls: Counter[str] = Counter()
        self.gate_rejections: Counter[str] = Counter()
        self.do_rejections: Counter[int] = Counter()
        self.attempts: dict[int, int] = {}
        self.escalations = 0
        self.facts: ScoutReport | None = None
        self.feedback: list[str] = []  # what the analyst must address next
        self.defects: list[Defect] = []  # the last verdict's defects (the executor fixes them)
        self.reason = ""  # why we escalate / stop
        self.after_check = self.must_change = False

    # ------------------------------------------------------------------------------ the cycle
    def run(self) -> StrategyResult:
        hide_from_git(self.ctx.workspace.root)
        self.status.append(render_header(self.st, utc_now()))
        steps = {
            "PLAN": self.plan,
            "DO": self.do,
            "CHECK": self.check,
            "ACT": self.act,
            "ESCALATE": self.escalate,
        }
        phase = "PLAN"
        try:
            while phase not in ("EXIT", "STOP"):
                phase = steps[phase]()
        except _Stop as stop:
            self.reason, phase = stop.reason, "STOP"
        if phase == "STOP":
            self.stop()
        copy = self.ctx.recorder.run_dir / "pdca-status" / self.status.path.name
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(self.status.path, copy)
        return self.result(phase)

    def plan(self) -> str:
        self.enter("PLAN")
        if self.facts is None:
            self.facts = self.scout("facts for planning: the files, functions and tests the task touches")
        previous, rejections = self.st.plan, 0
        problems: list[str] = []
        while True:
            plan, problems = check_plan(self.analyst(previous, problems), previous)
            changed = plan is not None and (previous is None or plan_key(plan) != plan_key(previous))
            if plan is not None and not problems and self.must_change and not changed:
                problems = ["the expert asked for a replan but the plan is unchanged; change it"]
            if not problems:
                break
            self.gate("PLAN->DO", False, "; ".join(problems))
            rejections += 1
            if rejections >= self.p.max_plan_rejections:
                raise _Stop(f"cap:max_plan_rejections ({rejections} rejected plans in a row)")
        assert plan is not None
        if previous is not None and changed:
            if self.st.r + 1 > self.p.max_revisions:
                raise _Stop(f"cap:max_revisions ({self.p.max_revisions})")
            self.st.r, self.st.n = self.st.r + 1, 1
        self.st.plan = carry_states(plan, previous)
        if self.after_check or self.must_change:  # after a rejection: redo the units that failed
            self.st.reopen(self.defects)
        if previous is not None and self.after_check and not changed:
            self.st.n += 1  # the same plan again: the next DO is another attempt on this revision
        self.after_check = self.must_change = False
        self.feedback = []
        self.gate(
            "PLAN->DO",
            True,
            f"plan r{self.st.r}: {len(plan.units)} units, {len(plan.acceptance_criteria)} criteria",
        )
        self.st.decisions.append(
            f"{self.st.where}: plan {'revised' if changed and previous else 'kept' if previous else 'accepted'}"
        )
        self.snapshot("plan written")
        return "DO"

    def do(self) -> str:
        self.enter("DO")
        self.attempts[self.st.r] = self.st.n
        while (unit := self.st.next_unit()) is not None:
            if unit.state == "blocked":
                self.log(f"unit {unit.id} resumes", f"prerequisite {unit.blocked_by} done")
            unit.state = "running"
            self.log(f"unit {unit.id} running", unit.expected_result)
            report, evidence = self.execute(unit)
            self.st.runs[unit.id] = UnitRun(report=report, evidence=evidence)
            if report.done and evidence:
                unit.state = "done"
                self.log(f"unit {unit.id} done", "; ".join(evidence))
                continue
            unit.state = "blocked" if report.blockers else "pending"
            self.log(
                f"unit {unit.id} {unit.state}",
                "; ".join(report.blockers + report.unfinished) or "no evidence",
            )
            break
        open_units = [u for u in self.st.active() if u.state != "done"]
        if not open_units:
            self.gate("DO->CHECK", True, f"{len(self.st.active())} units done with evidence")
            return "CHECK"
        self.gate("DO->CHECK", False, "not done with evidence: " + ", ".join(u.id for u in open_units))
        self.feedback = [self.st.unit_problem(u) for u in open_units]
        self.do_rejections[self.st.r] += 1
        if self.do_rejections[self.st.r] >= self.p.max_do_rejections:
            self.reason = f"DO gate rejected {self.do_rejections[self.st.r]} times on revision {self.st.r}"
            return "ESCALATE"
        return "PLAN"

    def check(self) -> str:
        self.enter("CHECK")
        plan = self.st.plan
        assert plan is not None
        criteria = [c.model_dump() for c in plan.acceptance_criteria]
        reported = {
            u.id: {"changed": self.st.runs[u.id].report.changed, "evidence": self.st.runs[u.id].evidence}
            for u in self.st.active()
            if u.id in self.st.runs
        }
        facts = self.scout(
            "evidence for each acceptance criterion", {"criteria": criteria, "executor": reported}
        )
        material = {
            "criteria": criteria,
            "executor_evidence": reported,
            "scout_facts": facts.model_dump()["facts"],
        }
        res = self.ask(
            "auditor", self.brief("auditor", "judge every acceptance criterion", material), AuditVerdict
        )
        verdict, defects, notes = judge(res.result, plan)  # type: ignore[arg-type]
        self.st.verdict = verdict
        for note in notes:
            self.log("audit rule", note)
        met = [cid for cid, v in verdict.items() if v.status == "met"]
        serious = [d.key for d in defects if d.severity != "minor"]
        if len(met) == len(verdict) and not serious:
            self.gate("CHECK->ACT", True, f"{len(met)}/{len(verdict)} criteria met on evidence")
            return "ACT"
        self.gate(
            "CHECK->ACT",
            False,
            f"{len(met)}/{len(verdict)} met; defects: {', '.join(d.key for d in defects)}",
        )
        self.defects = defects
        back = self.st.see_defects(defects)
        if back or self.st.n >= self.p.max_attempts:
            self.reason = (
                f"defect {', '.join(back)} came back after a fix"
                if back
                else f"auditor rejected {self.st.n} times on revision {self.st.r}"
            )
            return "ESCALATE"
        for d in defects:
            self.st.defects[d.key].fix_count += 1
        if any(d.route == "PLAN" for d in defects):
            self.feedback = [f"defect {d.key} ({d.severity}, {d.route}): {d.description}" for d in defects]
            self.after_check = True
            self.st.decisions.append(f"{self.st.where}: CHECK -> PLAN (plan defects)")
            return "PLAN"
        self.st.decisions.append(f"{self.st.where}: CHECK -> DO (implementation defects)")
        self.st.n += 1
        self.st.reopen(defects)
        return "DO"

    def escalate(self) -> str:
        self.enter("ESCALATE")
        self.escalations += 1
        material = {
            "reason": self.reason,
            "plan": self.st.plan.model_dump() if self.st.plan else None,
            "defect_history": [d.model_dump() for d in self.st.defects.values()],
            "unmet": self.st.unmet(),
            "open_problems": self.feedback,
        }
        res = self.ask("expert", self.brief("expert", "decide: replan or stop", material), ExpertDecision)
        decision = res.result or ExpertDecision(
            decision="stop", reasons=[f"the expert gave no decision ({res.outcome})"]
        )
        assert isinstance(decision, ExpertDecision)
        why = f"{self.reason}; {'; '.join(decision.reasons)}; confidence {decision.confidence:.2f}"
        self.ctx.recorder.event(
            "escalation", "expert", decision.decision, why[:300], ok=decision.decision == "replan"
        )
        for d in self.defects:
            self.st.defects[d.key].escalation = f"{decision.decision} @ {self.st.where}"
        self.st.decisions.append(f"{self.st.where}: expert -> {decision.decision}: {why}")
        self.log(f"expert: {decision.decision}", why)
        if decision.decision == "stop":
            raise _Stop(f"expert:stop ({self.reason})")
        if self.st.r >= self.p.max_revisions:
            raise _Stop(
                f"cap:max_revisions ({self.p.max_revisions}) reached when the expert asked for a replan"
            )
        self.feedback = [f"expert: {decision.new_input}", *self.feedback]
        self.feedback += [f"defect {d.key} ({d.severity}): {d.description}" for d in self.defects]
        self.must_change, self.after_check = True, False
        return "PLAN"

    def act(self) -> str:
        self.enter("ACT")
        self.st.decisions.append(
            f"{self.st.where}: ACT: all criteria met on evidence; cycle {self.st.N} closed"
        )
        self.log("cycle closed", "; ".join(f"{k}: {v.evidence}" for k, v in self.st.verdict.items()))
        self.st.phase = "EXIT"
        self.ctx.phase("EXIT", f"cycle {self.st.N}")
        self.snapshot("final: EXIT")
        self.log("exit", "outcome pass")
        return "EXIT"

    def stop(self) -> None:
        self.st.phase = "STOP"
        self.ctx.phase("STOP", self.reason)
        self.st.decisions.append(f"{self.st.where}: STOP: {self.reason}")
        self.snapshot("final: STOP")
        self.log("stop", self.reason)
        self.log("unmet/unverified", "; ".join(self.st.unmet()))

    # ------------------------------------------------------------------------------ the roles
    def ask(self, role: str, message: str, schema: type[BaseModel] | None = None) -> Any:
        if sum(self.calls.values()) >= self.p.max_role_calls:
            raise _Stop(f"cap:max_role_calls ({self.p.max_role_calls})")
        self.calls[role] += 1
        tier, permissions = ROLES[role]
        steps = {"executor": self.p.executor_steps, "scout": self.p.scout_steps, "expert": self.p.scout_steps}
        agent = self.ctx.agent(
            role,
            tier=tier,  # type: ignore[arg-type]
            permissions=permissions,
            system_prompt=self.ctx.prompts.get(role, max_attempts=self.p.max_attempts),
            max_steps=steps.get(role, 1 if role == "orchestrator" else self.p.answer_steps),
            result_schema=schema,
            conversation=f"{role}-{self.calls[role]}",
            guard=status_guard if role == "executor" else None,
        )
        agent.config.max_output_tokens = self.p.max_output_tokens.get(role)
        res = agent.run(message)
        if res.outcome == "budget":
            raise _Stop(f"cap:budget ({res.final})")
        return res

    def brief(self, role: str, purpose: str, material: Any) -> str:
        """The orchestrator's hand-off: its brief, then the previous output verbatim."""
        data = material if isinstance(material, str) else json.dumps(material, indent=1, default=str)
        res = self.ask("orchestrator", f"Hand-off to the {role}: {purpose}.\n\nPrevious output:\n{data}")
        return f"{(res.final or '').strip()}\n\n## Reference\nGoal:\n{self.st.goal}\n\n{data}"

    def scout(self, purpose: str, material: Any = None) -> ScoutReport:
        res = self.ask("scout", self.brief("scout", purpose, material or {"purpose": purpose}), ScoutReport)
        self.log("scout report", f"{len(res.result.facts) if res.result else 0} facts ({res.outcome})")
        return res.result or ScoutReport()

    def analyst(self, previous: Any, problems: list[str]) -> PlanDraft:
        material = {
            "scout_facts": self.facts.model_dump()["facts"] if self.facts else [],
            "previous_plan": previous.model_dump() if previous else None,
            "fix_these": problems + self.feedback,
        }
        res = self.ask(
            "analyst",
            self.brief("analyst", "write the plan" if previous is None else "revise the plan", material),
            PlanDraft,
        )
        self.log("analyst answered", f"{res.outcome}")
        return res.result or PlanDraft()

    def execute(self, unit: Unit) -> tuple[ExecutorReport, list[str]]:
        plan = self.st.plan
        assert plan is not None
        material = {
            "unit": unit.model_dump(include={"id", "expected_result", "criteria"}),
            "criteria": [c.model_dump() for c in plan.acceptance_criteria if c.id in unit.criteria],
            "constraints": plan.constraints,
            "defects_to_fix": [d.model_dump() for d in self.defects if d.unit in (None, unit.id)],
        }
        mark = len(read_jsonl(self.ctx.recorder.run_dir / EVENTS))
        res = self.ask(
            "executor", self.brief("executor", f"implement unit {unit.id}", material), ExecutorReport
        )
        report = res.result or ExecutorReport(unit=unit.id, unfinished=[f"no report ({res.outcome})"])
        runs = [e for e in read_jsonl(self.ctx.recorder.run_dir / EVENTS)[mark:] if e["role"] == "executor"]
        evidence, refused = check_evidence(report, runs)
        for command in refused:
            self.log(f"unit {unit.id} evidence refused", f"`{command}` was never run")
        return report, evidence

    # ------------------------------------------------------------------------------ bookkeeping
    def enter(self, phase: str) -> None:
        self.st.phase = phase
        self.ctx.phase(phase, f"r{self.st.r} n{self.st.n}")
        self.snapshot(f"enter {phase}")
        self.log("enter", self.reason if phase == "ESCALATE" else "")

    def gate(self, name: str, ok: bool, detail: str) -> None:
        if not ok:
            self.gate_rejections[name] += 1
        self.ctx.recorder.event("gate", "orchestrator", name, detail[:300], ok=ok)
        self.log(f"gate {name} {'passed' if ok else 'rejected'}", detail)

    def log(self, event: str, evidence: str = "") -> None:
        if self.status.append(log_line(utc_now(), self.st, event, evidence)):
            self.ctx.recorder.event(
                "note", "orchestrator", "status-file", "changed outside the loop; restored", ok=False
            )

    def snapshot(self, reason: str) -> None:
        self.status.append(render_snapshot(self.st, utc_now(), reason))

    def result(self, phase: str) -> StrategyResult:
        passed = phase == "EXIT"
        unmet = [] if passed else self.st.unmet()
        counters = {
            "outcome": "pass" if passed else "incomplete",
            "stop_reason": "exit" if passed else self.reason,
            "cycles": self.st.N,
            "cycles_closed": self.st.N if passed else self.st.N - 1,
            "plan_revisions": self.st.r,
            "attempts": sum(self.attempts.values()),
            "attempts_per_revision": {f"r{r}": n for r, n in sorted(self.attempts.items())},
            "escalations": self.escalations,
            "gate_rejections": sum(self.gate_rejections.values()),
            "gate_rejections_by_gate": dict(self.gate_rejections),
            "role_calls": dict(self.calls),
            "defect_history": [d.model_dump() for d in self.st.defects.values()],
            "unmet": unmet,
            "permission_denials": self.ctx.recorder.denials,
            "status_file": self.status.path.relative_to(self.ctx.workspace.root).as_posix(),
            "params": asdict(self.p),
        }
        summary = (
            f"EXIT after {counters['attempts']} attempt(s), r{self.st.r}: all criteria met on evidence."
            if passed
            else f"STOP ({self.reason}). Unmet/unverified: " + "; ".join(unmet)
        )
        return StrategyResult(
            outcome=counters["outcome"], claimed_done=passed, counters=counters, summary=summary
        )
