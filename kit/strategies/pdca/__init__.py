"""pdca -- Plan-Do-Check-Act with roles, tiers, gates and counters (STRATEGIES.md §3).

The state machine is this code; the models only fill in the roles. Every hand-off goes through the
orchestrator's LLM turn, which writes the next role's brief from the previous role's structured
output; that brief is all the role gets (option ``brief_safety_net``, default off: when the brief
misses an id, key, path or command of the output, the kit appends the output verbatim under
"Reference" and counts it). Roles (default tier; permissions): orchestrator (cheap; none), scout
(cheap; read), analyst (medium; none), executor (cheap; read+write+exec -- the only role that
changes files or runs commands), auditor (medium; none), expert (strong; read). A profile may
reassign tiers.

    PLAN  scout gathers facts -> analyst writes the plan -> gate PLAN->DO: every field present
          (each criterion with how it is verified and a negative case), supersede mappings
          complete, every criterion covered, and nothing of the accepted plan lost: criteria are
          append-only (kept, or superseded by a replacement that inherits them), and a unit keeps
          its criteria unless it is superseded. r grows only when the structure changes.
    DO    the executor implements the ready units one at a time and reports; its evidence is checked
          against the exact commands it ran (its tool log); a report listing blockers or unfinished
          work is never done. Gate DO->CHECK: every active unit done with evidence; otherwise back
          to PLAN with the blockers (the analyst adds a prerequisite unit or a replacement).
    CHECK fresh evidence first: the kit re-runs every criterion's proving command on the scout's
          behalf (a toolbox with read + exec only), the scout reads around it, the auditor judges
          from that. Gate CHECK->ACT: every criterion met on evidence and no critical/major defect;
          otherwise implementation defects -> DO (n += 1), plan defects -> PLAN (r += 1, n = 1 if
          the plan's structure changes). A missing or malformed scout/auditor report is asked
          again (a format retry), never counted as a rejection.
    ESCALATE  after the max_attempts-th rejection on a revision, when a defect key comes back after
          a fix, when the DO gate or the PLAN gate keeps rejecting, or when the auditor gives no
          usable report: the expert decides replan (r += 1, n = 1), continue (n += 1, only while
          attempts remain on this revision) or stop.
    ACT   result and status file finalised (Done/Verified, Next plan, Changed artefacts) -> EXIT
          (outcome pass). STOP -> outcome incomplete, the unmet/unverified criteria listed.

Only the expert stops a run, or the run's caps: ``stop_reason`` is ``expert:stop (...)``,
``expert:no-decision (...)``, ``cap:max_role_calls (...)`` or ``cap:budget (...)``.

The status file (``status_writer``, see kit/strategies/pdca_writer.py): with ``model`` (default,
as in the source) every update is a model call of the executor role on its tier (cheap), recorded in
calls.jsonl like any call; with ``kit`` the kit writes it for free. Either way the kit composes the
exact text and keeps it: a model update that differs is replaced by the kit's text (a repair).

Choices where the source is silent (every one the kit makes):
* N starts at 1 and grows only in ACT; a run has one goal, so ACT always exits and N stays 1.
* What a revision is: the structure key is the criteria (id, verification method with case,
  punctuation and spacing ignored, supersede link) and the units (id, criteria, dependencies,
  blocked_by, superseded_by). A CHECK->PLAN whose plan keeps the structure is not a revision: the
  next DO is attempt n+1 of the same revision. An expert replan must change the structure;
  otherwise it is a PLAN->DO rejection.
* A reworded plan replaces the old wording; units whose structure is unchanged stay done.
* A criterion's ``how_verified`` is its proving command unless it starts with "read"; for a
  reading, or a command the shell cannot find (exit 127), the proving commands are those the
  executor verifiably ran as evidence for the units covering it. Each distinct command runs once.
* The kit enforces the re-run: a criterion the auditor calls met whose proving command failed in
  CHECK is unmet (defect ``criterion-<id>``). A re-run that changes the clone's files (the scored
  diff) counts as failed and is flagged to the auditor; the kit does not undo the change (the run's
  sandbox, when present, mounts the clone read-only for roles without write).
* A "met" without evidence is downgraded to unverified; a criterion the auditor skipped (after the
  re-asks) is unverified; not-met criteria with no defect listed get one keyed "criterion-<id>".
* "Missing or malformed": no parseable report, a scout report with no facts, an auditor report
  that leaves an active criterion unjudged, an expert decision not available now. Each is asked
  again up to ``report_retries`` times in a fresh session; an auditor still silent escalates; an
  expert still without a valid decision ends the run as ``expert:no-decision``.
* A re-ask is a fresh session of the same role with the same brief plus what was wrong (no new
  orchestrator turn); it is counted in ``format_retries``, not as a rejection.
* An executor report listing unfinished work is not done either (like blockers); its blockers make
  the unit blocked, otherwise it stays pending.
* Every hand-off message to the orchestrator carries the task's goal; the expert's step cap is the
  scout's. ``max_role_calls`` counts role sessions (re-asks included), not status-file updates.
* CHECK's re-runs are recorded as the scout's ``run`` tool events; the auditor gets each command's
  exit code and the last 1,500 characters of its output, and no DO-time evidence (only the list
  of changed files).
* One status update per progress-log line: the snapshots (on entering a phase, on a new plan, the
  final state and the closing sections) travel with the next line, so they are part of that call.
* A defect's fix_count grows when it is sent back to DO or PLAN (or the expert says continue);
  seen again with fix_count >= 1 means it came back after a fix.
* ``continue`` is the next attempt (n += 1) under the current plan, with the failing units
  reopened; it is offered only when a plan was accepted and n < max_attempts.
* The PLAN->DO gate rejecting ``max_plan_rejections`` plans in a row, or the DO->CHECK gate
  ``max_do_rejections`` times on a revision, escalates to the expert (no kit-made STOP).
* The status file lives in the clone at .pdca/status/<task>-<N>.md; ".pdca/" is in the kit's git
  excludes (``workspace.GIT_EXCLUDE``, also written to the clone's .git/info/exclude) so it is not
  part of the scored diff or of "Changed artefacts"; the executor's write tools are refused
  there, and if a shell command changes it the loop restores it and notes the tampering. A model
  status update that runs into the budget makes the kit write the rest (noted).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from pydantic import BaseModel

from kit.records.schema import utc_now
from kit.strategies import StrategyResult
from kit.strategies.context import RunContext
from kit.strategies.pdca.plan import PlanDraft, Unit, carry_states, check_plan, resolve, structure_key
from kit.strategies.pdca.reports import (
    AuditVerdict,
    Defect,
    ExecutorReport,
    ExpertDecision,
    Rerun,
    ScoutReport,
    check_evidence,
    exit_code,
    judge,
    missing_verdicts,
)
from kit.strategies.pdca.status import (
    State,
    StatusFile,
    UnitRun,
    hide_from_git,
    log_line,
    render_final,
    render_header,
    render_snapshot,
    status_guard,
)
from kit.strategies.pdca.writer import StatusWriter
from kit.tasks.workspace import diff

ROLES: dict[str, tuple[str, frozenset[str]]] = {
    "orchestrator": ("cheap", frozenset()),
    "scout": ("cheap", frozenset({"read"})),
    "analyst": ("medium", frozenset()),
    "executor": ("cheap", frozenset({"read", "write", "exec"})),
    "auditor": ("medium", frozenset()),
    "expert": ("strong", frozenset({"read"})),
}
STATUS_DIR = ".pdca/status"
RERUN_PERMISSIONS = frozenset({"read", "exec"})  # CHECK's re-runs: never write tools
REMOVED = {"max_revisions": "the source has no revision cap: the expert decides (or the run's caps)"}


@dataclass
class Params:
    max_attempts: int = 3  # auditor rejections per plan revision before the expert
    max_plan_rejections: int = 3  # PLAN->DO rejections in a row before the expert
    max_do_rejections: int = 2  # DO->CHECK rejections on one revision before the expert
    max_role_calls: int = 80  # role sessions (orchestrator included) in the whole run
    report_retries: int = 2  # a missing/malformed scout, auditor or expert report is asked again
    executor_steps: int = 20
    scout_steps: int = 8
    answer_steps: int = 3  # tool-less roles: steps to produce a valid answer
    status_writer: str = "model"  # model: the executor's (cheap) model calls, as in the source; kit
    brief_safety_net: bool = False  # append the previous output when the orchestrator's brief misses it
    max_output_tokens: dict[str, int] = field(default_factory=dict)  # per role; default: the profile's

    @classmethod
    def from_ctx(cls, ctx: RunContext) -> Params:
        steps = ctx.step_cap()
        defaults = asdict(cls(executor_steps=steps, scout_steps=min(8, steps)))
        removed = sorted(set(ctx.options) & set(REMOVED))
        if removed:
            raise ValueError(f"pdca option {removed[0]} was removed: {REMOVED[removed[0]]}; delete it")
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
        self.format_retries: Counter[str] = Counter()
        self.do_rejections: Counter[int] = Counter()
        self.attempts: dict[int, int] = {}
        self.escalations = 0
        self.facts: ScoutReport | None = None
        self.feedback: list[str] = []  # what the analyst must address next
        self.defects: list[Defect] = []  # the last verdict's defects (the executor fixes them)
        self.reason = ""  # why we escalate / stop
        self.origin = ""  # where the escalation came from: CHECK, CHECK->PLAN, DO or PLAN
        self.next_plan: list[str] = []  # for the final "Next plan" section
        self.after_check = self.must_change = False
        self.pending = ""  # status text waiting for the next progress line
        self.writer = StatusWriter(ctx, self.status, params.status_writer)
        self.safety_net = 0
        self.reruns = 0

    # ------------------------------------------------------------------------------ the cycle
    def run(self) -> StrategyResult:
        hide_from_git(self.ctx.workspace.root)
        self.pending = render_header(self.st, utc_now())
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
            structural = plan is not None and (
                previous is None or structure_key(plan) != structure_key(previous)
            )
            if plan is not None and not problems and self.must_change and not structural:
                problems = [
                    "the expert asked for a replan but the plan's structure (units, criteria, dependencies, "
                    "verification methods) is unchanged; change it"
                ]
            if not problems:
                break
            self.gate("PLAN->DO", False, "; ".join(problems))
            rejections += 1
            if rejections >= self.p.max_plan_rejections:
                self.reason = f"PLAN->DO gate rejected {rejections} plans in a row"
                self.origin = "CHECK->PLAN" if self.after_check else "PLAN"
                self.feedback = problems + self.feedback
                return "ESCALATE"
        assert plan is not None
        if previous is not None and structural:
            self.st.r, self.st.n = self.st.r + 1, 1
        self.st.plan = carry_states(plan, previous)
        if previous is not None and (self.after_check or self.must_change):  # redo the units that failed
            self.st.reopen(self.defects)
        if previous is not None and self.after_check and not structural:
            self.st.n += 1  # the same structure again: the next DO is another attempt on this revision
        self.after_check = self.must_change = False
        self.feedback = []
        self.gate(
            "PLAN->DO",
            True,
            f"plan r{self.st.r}: {len(plan.units)} units, {len(plan.active_criteria())} criteria",
        )
        verb = "accepted" if previous is None else "revised" if structural else "kept (no structural change)"
        self.st.decisions.append(f"{self.st.where}: plan {verb}")
        before = {c.id for c in previous.acceptance_criteria if c.superseded_by} if previous else set()
        for c in plan.acceptance_criteria:
            if c.superseded_by and c.id not in before:
                self.st.decisions.append(f"{self.st.where}: criterion {c.id} superseded by {c.superseded_by}")
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
            report, run = self.execute(unit)
            self.st.runs[unit.id] = run
            if report.finished and run.evidence:
                unit.state = "done"
                self.log(f"unit {unit.id} done", "; ".join(run.evidence))
                continue
            unit.state = "blocked" if [b for b in report.blockers if b.strip()] else "pending"
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
            self.origin = "DO"
            return "ESCALATE"
        return "PLAN"

    def check(self) -> str:
        self.enter("CHECK")
        plan = self.st.plan
        assert plan is not None
        reruns = self.rerun()
        criteria = [
            {
                **c.model_dump(exclude={"superseded_by"}),
                "inherits": [i.model_dump() for i in plan.inherited(c.id)],
            }
            for c in plan.active_criteria()
        ]
        changed = sorted(
            {p for u in self.st.active() if u.id in self.st.runs for p in self.st.runs[u.id].report.changed}
        )
        fresh = [r.brief() for r in reruns]
        facts = self.scout(
            "read the changed code and the CHECK re-run output for each acceptance criterion",
            {"criteria": criteria, "fresh_evidence": fresh, "changed_files": changed},
        )
        material = {
            "criteria": criteria,
            "fresh_evidence": fresh,
            "scout_facts": facts.model_dump()["facts"],
            "changed_files": changed,
            "rule": "judge from fresh_evidence (every proving command re-run in CHECK) and the scout's facts",
        }
        brief = self.brief("auditor", "judge every acceptance criterion on the fresh evidence", material)

        def unjudged(v: BaseModel) -> str | None:
            missing = missing_verdicts(v, plan)  # type: ignore[arg-type]
            return f"no verdict for criteria {', '.join(missing)}" if missing else None

        verdict = self.report("auditor", brief, AuditVerdict, unjudged, keep_partial=True)
        if verdict is None:
            self.reason, self.origin = "the auditor gave no usable report", "CHECK"
            self.defects = []
            return "ESCALATE"
        verdict_, defects, notes = judge(verdict, plan, reruns)  # type: ignore[arg-type]
        self.st.verdict = verdict_
        for note in notes:
            self.log("audit rule", note)
        met = [cid for cid, v in verdict_.items() if v.status == "met"]
        serious = [d.key for d in defects if d.severity != "minor"]
        if len(met) == len(verdict_) and not serious:
            self.gate("CHECK->ACT", True, f"{len(met)}/{len(verdict_)} criteria met on evidence")
            return "ACT"
        self.gate(
            "CHECK->ACT",
            False,
            f"{len(met)}/{len(verdict_)} met; defects: {', '.join(d.key for d in defects)}",
        )
        self.defects = defects
        back = self.st.see_defects(defects)
        if back or self.st.n >= self.p.max_attempts:
            self.reason = (
                f"defect {', '.join(back)} came back after a fix"
                if back
                else f"auditor rejected {self.st.n} times on revision {self.st.r}"
            )
            self.origin = "CHECK"
            return "ESCALATE"
        self.fixing(defects)
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
        allowed = ["replan", "stop"] + (
            ["continue"] if self.st.plan is not None and self.st.n < self.p.max_attempts else []
        )
        material = {
            "reason": self.reason,
            "counters": {"r": self.st.r, "n": self.st.n, "max_attempts": self.p.max_attempts},
            "allowed_decisions": allowed,
            "plan": self.st.plan.model_dump() if self.st.plan else None,
            "defect_history": [d.model_dump() for d in self.st.defects.values()],
            "unmet": self.st.unmet(),
            "open_problems": self.feedback,
        }
        brief = self.brief("expert", f"decide: {' or '.join(allowed)}", material)

        def available(d: BaseModel) -> str | None:
            choice = d.decision  # type: ignore[attr-defined]
            return (
                None
                if choice in allowed
                else f"decision {choice!r} is not available now; choose one of {allowed}"
            )

        decision = self.report("expert", brief, ExpertDecision, available)
        if decision is None:
            raise _Stop(f"expert:no-decision ({self.reason})")
        assert isinstance(decision, ExpertDecision)
        why = f"{self.reason}; {'; '.join(decision.reasons)}; confidence {decision.confidence:.2f}"
        self.ctx.recorder.event(
            "escalation", "expert", decision.decision, why[:300], ok=decision.decision != "stop"
        )
        for d in self.defects:
            if d.key in self.st.defects:
                self.st.defects[d.key].escalation = f"{decision.decision} @ {self.st.where}"
        self.st.decisions.append(f"{self.st.where}: expert -> {decision.decision}: {why}")
        self.log(f"expert: {decision.decision}", why)
        if decision.decision == "stop":
            self.next_plan = [f"expert: {r}" for r in decision.reasons] + (
                [decision.new_input] if decision.new_input else []
            )
            raise _Stop(f"expert:stop ({self.reason})")
        if decision.decision == "continue":  # the next attempt on this revision, same plan
            if self.origin == "CHECK":
                self.fixing(self.defects)
            self.st.n += 1
            if self.origin in ("CHECK", "CHECK->PLAN"):
                self.st.reopen(self.defects)
            self.after_check = self.must_change = False
            self.feedback = []
            return "DO"
        self.feedback = [f"expert: {decision.new_input}", *self.feedback]
        self.feedback += [f"defect {d.key} ({d.severity}): {d.description}" for d in self.defects]
        self.must_change, self.after_check = self.st.plan is not None, False
        return "PLAN"

    def act(self) -> str:
        self.enter("ACT")
        self.st.decisions.append(
            f"{self.st.where}: ACT: all criteria met on evidence; cycle {self.st.N} closed"
        )
        self.log("cycle closed", "; ".join(f"{k}: {v.evidence}" for k, v in self.st.verdict.items()))
        self.st.phase = "EXIT"
        self.ctx.phase("EXIT", f"cycle {self.st.N}")
        self.finalise("EXIT")
        self.log("exit", "outcome pass")
        return "EXIT"

    def stop(self) -> None:
        self.st.phase = "STOP"
        self.ctx.phase("STOP", self.reason)
        self.st.decisions.append(f"{self.st.where}: STOP: {self.reason}")
        self.next_plan = self.next_plan or [f"address: {u}" for u in self.st.unmet()]
        self.finalise("STOP")
        self.log("stop", self.reason)
        self.log("unmet/unverified", "; ".join(self.st.unmet()))

    def finalise(self, outcome: str) -> None:
        changed = re.findall(r"^diff --git a/(.+?) b/", diff(self.ctx.workspace), flags=re.MULTILINE)
        self.snapshot(f"final: {outcome}")
        self.pending += render_final(self.st, utc_now(), outcome, changed, self.next_plan)

    def fixing(self, defects: list[Defect]) -> None:
        for d in defects:
            self.st.defects[d.key].fix_count += 1

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
            raise _Stop(f"cap:budget ({(res.final.splitlines() or [''])[0]})")
        return res

    def report(
        self, role: str, brief: str, schema: type[BaseModel], problem: Any, keep_partial: bool = False
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
                self.format_retries[role] += 1
                message = f"{brief}\n\nYour previous answer could not be used: {wrong}. Answer again."
        return last

    def brief(self, role: str, purpose: str, material: Any) -> str:
        """The orchestrator's hand-off; the safety net (off by default) appends what it missed."""
        data = material if isinstance(material, str) else json.dumps(material, indent=1, default=str)
        res = self.ask(
            "orchestrator",
            f"Hand-off to the {role}: {purpose}.\n\nGoal:\n{self.st.goal}\n\nPrevious output:\n{data}",
        )
        text = (res.final or "").strip()
        if self.p.brief_safety_net:
            missed = [a for a in _anchors(material) if a not in text]
            if missed:
                self.safety_net += 1
                self.log("brief safety net", f"{role} brief missed {', '.join(missed[:5])}")
                text += f"\n\n## Reference (appended by the kit)\nGoal:\n{self.st.goal}\n\n{data}"
        return text

    def scout(self, purpose: str, material: Any = None) -> ScoutReport:
        brief = self.brief("scout", purpose, material or {"purpose": purpose})
        report = self.report("scout", brief, ScoutReport, lambda r: None if r.facts else "no facts")
        self.log("scout report", f"{len(report.facts) if report else 0} facts")
        return report or ScoutReport()

    def analyst(self, previous: Any, problems: list[str]) -> PlanDraft:
        material = {
            "scout_facts": self.facts.model_dump()["facts"] if self.facts else [],
            "previous_plan": previous.model_dump() if previous else None,
            "fix_these": problems + self.feedback,
        }
        purpose = "write the plan" if previous is None else "revise the plan"
        res = self.ask("analyst", self.brief("analyst", purpose, material), PlanDraft)
        self.log("analyst answered", f"{res.outcome}")
        return res.result or PlanDraft()

    def execute(self, unit: Unit) -> tuple[ExecutorReport, UnitRun]:
        plan = self.st.plan
        assert plan is not None
        ids = {resolve(c, plan) for c in unit.criteria}
        material = {
            "unit": unit.model_dump(include={"id", "expected_result", "criteria"}),
            "criteria": [
                c.model_dump(exclude={"superseded_by"}) for c in plan.active_criteria() if c.id in ids
            ],
            "constraints": plan.constraints,
            "defects_to_fix": [d.model_dump() for d in self.defects if d.unit in (None, unit.id)],
        }
        res = self.ask(
            "executor", self.brief("executor", f"implement unit {unit.id}", material), ExecutorReport
        )
        report = res.result or ExecutorReport(unit=unit.id, unfinished=[f"no report ({res.outcome})"])
        evidence, refused, commands = check_evidence(report, res.tool_log)
        for command in refused:
            self.log(f"unit {unit.id} evidence refused", f"`{command}` was never run")
        return report, UnitRun(report=report, evidence=evidence, commands=commands)

    def rerun(self) -> list[Rerun]:
        """CHECK's fresh evidence: every criterion's proving command run again (read + exec only)."""
        plan = self.st.plan
        assert plan is not None
        box = self.ctx.toolbox("scout", RERUN_PERMISSIONS)
        done: dict[str, Rerun] = {}

        def run_once(command: str, cid: str) -> Rerun:
            if command not in done:
                before = self._fingerprint()
                out = box.execute("run", {"command": command}).output
                self.reruns += 1
                done[command] = Rerun(command, [], exit_code(out), out[-1500:], self._fingerprint() != before)
                self.log("CHECK re-run", f"`{command}` -> exit {done[command].exit_code}")
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
            for u in self.st.active():
                if covering & {resolve(x, plan) for x in u.criteria} and u.id in self.st.runs:
                    for command in self.st.runs[u.id].commands:
                        run_once(command, c.id)
        return [r for r in done.values() if r.criteria]

    def _fingerprint(self) -> str:
        return hashlib.sha256(diff(self.ctx.workspace).encode()).hexdigest()

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

    def snapshot(self, reason: str) -> None:
        self.pending += render_snapshot(self.st, utc_now(), reason)

    def log(self, event: str, evidence: str = "") -> None:
        """One event: its progress line (and any pending snapshot) goes into the status file."""
        chunk, self.pending = self.pending + log_line(utc_now(), self.st, event, evidence), ""
        self.writer.append(chunk, event)

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
            "format_retries": dict(self.format_retries),
            "role_calls": dict(self.calls),
            "status_updates": dict(self.writer.counts),
            "brief_safety_net_appends": self.safety_net,
            "check_reruns": self.reruns,
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
