"""pdca -- Plan-Do-Check-Act with roles, tiers, gates and counters. What it does, every option, and
every choice the kit makes where the source is silent: docs/strategies.md, ``## pdca`` and
``## Where the kit chooses``.

The state machine is this code; the models only fill in the roles. The orchestrator is ONE
conversation for the whole run: each hand-off is its next turn (the role's report: statuses, counts,
pointers, never raw output), and its reply is the next role's brief -- every role session's, CHECK's
included (kit/strategies/pdca/roles.py).

    PLAN   scout facts (once) -> analyst plan -> gate PLAN->DO (plan.py)
    DO     the executor implements the ready units one at a time -> gate DO->CHECK
    CHECK  an executor session the orchestrator briefs re-runs every proving command (read + exec,
           its writes thrown away after each command; evidence.py), the scout reads its raw output
           (given it by the kit, no other role sees it) and returns per criterion the command, exit
           status, numbers and pointers; the auditor judges from that report -> gate CHECK->ACT;
           else DO (n += 1) or PLAN
    ESCALATE  the expert: replan, continue or stop (escalation.py)
    ACT    the status file finalised -> EXIT (outcome done, stop_reason pass)

Only the expert stops a run (outcome incomplete), or the run's caps (``cap:budget`` -> budget,
``cap:max_role_calls`` -> capped). The status file: journal.py, status.py, writer.py.
"""

from __future__ import annotations

from kit.strategies import StrategyResult
from kit.strategies.context import RunContext
from kit.strategies.pdca import escalation
from kit.strategies.pdca.evidence import changed_files, criteria_to_judge, rerun
from kit.strategies.pdca.journal import Journal
from kit.strategies.pdca.plan import Plan, carry_states, check_plan, structure_key
from kit.strategies.pdca.reports import (
    AuditVerdict,
    Defect,
    ExpertDecision,
    ScoutReport,
    judge,
    missing_verdicts,
)
from kit.strategies.pdca.roles import Roles, Stop
from kit.strategies.pdca.settings import ROLES, STATUS_DIR, PdcaSettings
from kit.strategies.pdca.status import State, StatusFile, hide_from_git
from kit.strategies.pdca.tally import Tally, counters

__all__ = ["ROLES", "STATUS_DIR", "Loop", "PdcaSettings", "run"]

REPLAN_UNCHANGED = (
    "the expert asked for a replan but the plan's structure (units, criteria, dependencies, "
    "verification methods) is unchanged; change it"
)


def run(ctx: RunContext) -> StrategyResult:
    return Loop(ctx, PdcaSettings.from_ctx(ctx)).run()


class Loop:
    """One pdca run: the phases below are the state machine; each returns the next phase."""

    def __init__(self, ctx: RunContext, settings: PdcaSettings) -> None:
        self.ctx, self.p = ctx, settings
        self.st = State(task=ctx.task.id, goal=ctx.task.prompt, max_attempts=settings.max_attempts)
        self.status = StatusFile(ctx.workspace.root / STATUS_DIR / f"{ctx.task.id}-{self.st.N}.md")
        self.tally = Tally()
        self.journal = Journal(ctx, self.st, self.status, settings.status_writer, self.tally)
        self.log = self.journal.log
        self.roles = Roles(ctx, settings, self.tally, self.st.goal, self.log)
        self.facts: ScoutReport | None = None
        self.feedback: list[str] = []  # what the analyst must address next
        self.defects: list[Defect] = []  # the last verdict's defects (the executor fixes them)
        self.reason = ""  # why we escalate / stop
        self.origin = ""  # where the escalation came from: CHECK, CHECK->PLAN, DO or PLAN
        self.next_plan: list[str] = []  # for the final "Next plan" section
        self.after_check = self.must_change = False

    # ------------------------------------------------------------------------------ the cycle
    def run(self) -> StrategyResult:
        hide_from_git(self.ctx.workspace.root)
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
        except Stop as stop:
            self.reason, phase = stop.reason, "STOP"
        if phase == "STOP":
            self.stop()
        self.status.copy_to(self.ctx.recorder.run_dir / "pdca-status" / self.status.path.name)
        return self.result(phase == "EXIT")

    def plan(self) -> str:
        """PLAN: scout facts (once), then analyst drafts until one passes the PLAN->DO gate."""
        self.enter("PLAN")
        if self.facts is None:
            self.facts = self.roles.scout(
                "facts for planning: the files, functions and tests the task touches"
            )
        previous, rejections = self.st.plan, 0
        problems: list[str] = []
        while True:
            plan, problems = check_plan(
                self.roles.analyst(self.facts, previous, problems + self.feedback), previous
            )
            structural = plan is not None and (
                previous is None or structure_key(plan) != structure_key(previous)
            )
            if plan is not None and not problems and self.must_change and not structural:
                problems = [REPLAN_UNCHANGED]
            if not problems:
                break
            self.journal.gate("PLAN->DO", False, "; ".join(problems))
            rejections += 1
            if rejections >= self.p.max_plan_rejections:
                self.reason = f"PLAN->DO gate rejected {rejections} plans in a row"
                self.origin = "CHECK->PLAN" if self.after_check else "PLAN"
                self.feedback = problems + self.feedback
                return "ESCALATE"
        assert plan is not None
        self.accept(plan, previous, structural)
        return "DO"

    def accept(self, plan: Plan, previous: Plan | None, structural: bool) -> None:
        """The plan passed the gate: revision and attempt counters, carried unit states, decisions."""
        if previous is not None and structural:
            self.st.r, self.st.n = self.st.r + 1, 1
        self.st.plan = carry_states(plan, previous)
        if previous is not None and (self.after_check or self.must_change):  # redo the units that failed
            self.st.reopen(self.defects)
        if previous is not None and self.after_check and not structural:
            self.st.n += 1  # the same structure again: the next DO is another attempt on this revision
        self.after_check = self.must_change = False
        self.feedback = []
        detail = f"plan r{self.st.r}: {len(plan.units)} units, {len(plan.active_criteria())} criteria"
        self.journal.gate("PLAN->DO", True, detail)
        verb = "accepted" if previous is None else "revised" if structural else "kept (no structural change)"
        self.st.decisions.append(f"{self.st.where}: plan {verb}")
        before = {c.id for c in previous.acceptance_criteria if c.superseded_by} if previous else set()
        for c in plan.acceptance_criteria:
            if c.superseded_by and c.id not in before:
                self.st.decisions.append(f"{self.st.where}: criterion {c.id} superseded by {c.superseded_by}")
        self.journal.snapshot("plan written")

    def do(self) -> str:
        """DO: the ready units one at a time; the DO->CHECK gate wants every active unit done with evidence."""
        self.enter("DO")
        self.tally.attempts[self.st.r] = self.st.n
        while (unit := self.st.next_unit()) is not None:
            if unit.state == "blocked":
                self.log(f"unit {unit.id} resumes", f"prerequisite {unit.blocked_by} done")
            unit.state = "running"
            self.log(f"unit {unit.id} running", unit.expected_result)
            assert self.st.plan is not None
            report, run = self.roles.executor(unit, self.st.plan, self.defects)
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
            self.journal.gate("DO->CHECK", True, f"{len(self.st.active())} units done with evidence")
            return "CHECK"
        self.journal.gate(
            "DO->CHECK", False, "not done with evidence: " + ", ".join(u.id for u in open_units)
        )
        self.feedback = [self.st.unit_problem(u) for u in open_units]
        self.tally.do_rejections[self.st.r] += 1
        if self.tally.do_rejections[self.st.r] >= self.p.max_do_rejections:
            self.reason = (
                f"DO gate rejected {self.tally.do_rejections[self.st.r]} times on revision {self.st.r}"
            )
            self.origin = "DO"
            return "ESCALATE"
        return "PLAN"

    def check(self) -> str:
        """CHECK: fresh evidence (the orchestrator briefs the re-run), the scout reads its raw output,
        the auditor judges from the scout's report and the exit statuses; the code applies the audit
        rules, then the CHECK->ACT gate."""
        self.enter("CHECK")
        plan = self.st.plan
        assert plan is not None
        reruns, ran = rerun(self.roles, self.st, self.log)
        self.tally.reruns += ran
        criteria, changed, statuses = (
            criteria_to_judge(plan),
            changed_files(self.st),
            [r.brief() for r in reruns],
        )
        pointers = {"criteria": criteria, "check_reruns": statuses, "changed_files": changed}
        ids = [c.id for c in plan.active_criteria()]
        facts = self.roles.check_scout(pointers, reruns, ids)  # the raw output goes to the scout only
        material = {
            "criteria": criteria,
            "check_reruns": statuses,
            "check_facts": facts.model_dump()["criteria"],
            "changed_files": changed,
            "rule": "judge from the exit statuses of the re-runs (every proving command run again in "
            "CHECK) and the scout's facts on their output",
        }
        brief = self.roles.brief(
            "auditor", "judge every acceptance criterion on the fresh evidence", material
        )

        def unjudged(v: AuditVerdict) -> str | None:
            missing = missing_verdicts(v, plan)
            return f"no verdict for criteria {', '.join(missing)}" if missing else None

        verdict = self.roles.report("auditor", brief, AuditVerdict, unjudged, keep_partial=True)
        if verdict is None:
            self.reason, self.origin = "the auditor gave no usable report", "CHECK"
            self.defects = []
            return "ESCALATE"
        self.st.verdict, defects, notes = judge(verdict, plan, reruns)
        for note in notes:
            self.log("audit rule", note)
        met = [cid for cid, v in self.st.verdict.items() if v.status == "met"]
        if len(met) == len(self.st.verdict) and all(d.severity == "minor" for d in defects):
            self.journal.gate(
                "CHECK->ACT", True, f"{len(met)}/{len(self.st.verdict)} criteria met on evidence"
            )
            return "ACT"
        keys = ", ".join(d.key for d in defects)
        self.journal.gate("CHECK->ACT", False, f"{len(met)}/{len(self.st.verdict)} met; defects: {keys}")
        return self.route(defects)

    def route(self, defects: list[Defect]) -> str:
        """A rejected CHECK: escalate (a defect back after a fix, or no attempts left), else plan
        defects go to PLAN and implementation defects to DO (the next attempt)."""
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
        """ESCALATE: the expert decides replan (PLAN, the structure must change), continue (DO, the
        next attempt under the same plan) or stop."""
        self.enter("ESCALATE")
        self.tally.escalations += 1
        allowed = escalation.allowed_decisions(self.st, self.p)
        material = escalation.expert_material(self.st, self.p, self.reason, allowed, self.feedback)
        brief = self.roles.brief("expert", f"decide: {' or '.join(allowed)}", material)
        decision = self.roles.report("expert", brief, ExpertDecision, escalation.only(allowed))
        if decision is None:
            raise Stop(f"expert:no-decision ({self.reason})")
        assert isinstance(decision, ExpertDecision)
        why = f"{self.reason}; {'; '.join(decision.reasons)}; confidence {decision.confidence:.2f}"
        escalation.record(self.ctx, self.st, decision, why, self.defects)
        self.log(f"expert: {decision.decision}", why)
        if decision.decision == "stop":
            self.next_plan = [f"expert: {r}" for r in decision.reasons] + (
                [decision.new_input] if decision.new_input else []
            )
            raise Stop(f"expert:stop ({self.reason})")
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
        """ACT: the cycle closes and the run exits (a run has one goal, so N stays 1)."""
        self.enter("ACT")
        self.st.decisions.append(
            f"{self.st.where}: ACT: all criteria met on evidence; cycle {self.st.N} closed"
        )
        self.log("cycle closed", "; ".join(f"{k}: {v.evidence}" for k, v in self.st.verdict.items()))
        self.st.phase = "EXIT"
        self.ctx.phase("EXIT", f"cycle {self.st.N}")
        self.journal.finalise("EXIT", self.next_plan)
        self.log("exit", "outcome done (stop_reason pass)")
        return "EXIT"

    def stop(self) -> None:
        self.st.phase = "STOP"
        self.ctx.phase("STOP", self.reason)
        self.st.decisions.append(f"{self.st.where}: STOP: {self.reason}")
        self.next_plan = self.next_plan or [f"address: {u}" for u in self.st.unmet()]
        self.journal.finalise("STOP", self.next_plan)
        self.log("stop", self.reason)
        self.log("unmet/unverified", "; ".join(self.st.unmet()))

    # ------------------------------------------------------------------------------ bookkeeping
    def enter(self, phase: str) -> None:
        self.journal.enter(phase, self.reason if phase == "ESCALATE" else "")

    def fixing(self, defects: list[Defect]) -> None:
        for d in defects:
            self.st.defects[d.key].fix_count += 1

    def result(self, passed: bool) -> StrategyResult:
        c = counters(
            self.tally,
            self.st,
            self.p,
            passed=passed,
            reason=self.reason,
            status_updates=dict(self.journal.writer.counts),
            denials=self.ctx.recorder.denials,
            status_file=self.status.path.relative_to(self.ctx.workspace.root).as_posix(),
        )
        summary = (
            f"EXIT after {c['attempts']} attempt(s), r{self.st.r}: all criteria met on evidence."
            if passed
            else f"STOP ({self.reason}). Unmet/unverified: " + "; ".join(c["unmet"])
        )
        return StrategyResult(outcome=c["outcome"], claimed_done=passed, counters=c, summary=summary)
