"""What the pdca roles hand back (pydantic schemas) and the rules the code applies to it: the
executor's evidence checked against its own tool log, the proving commands re-run in CHECK, the
scout's per-criterion report on them, and the auditor's verdict judged against that fresh evidence
(docs/strategies.md, ``## pdca``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from kit.records.schema import Severity
from kit.strategies.pdca.plan import Plan

if TYPE_CHECKING:
    from kit.agent.loop import ToolUse

Status = Literal["met", "unmet", "unverified"]
Route = Literal["DO", "PLAN"]


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Fact(_Lenient):
    pointer: str = Field("", description="path:line, or the command whose output you read")
    fact: str = Field("", description="What is there (numbers, names), no advice.")
    criterion: str | None = Field(None, description="Criterion id this fact is evidence for, if any.")


class ScoutReport(_Lenient):
    facts: list[Fact] = Field(default_factory=list)


class CriterionFacts(_Lenient):
    """What the scout read for one criterion in CHECK -- facts, never a verdict (a "status" or
    "verdict" it adds is dropped: no field holds it)."""

    criterion: str = ""
    command: str = Field("", description="The proving command whose output you read, exactly.")
    exit_code: int | None = Field(
        None, description="Its exit status in the re-run; null if killed or not run."
    )
    numbers: str = Field("", description="What the output counts, e.g. '12 passed, 1 failed'.")
    pointers: list[str] = Field(
        default_factory=list, description="path:line of what bears on it: a failing test, the changed code."
    )


class CheckFacts(_Lenient):
    """The scout's CHECK report: one entry per acceptance criterion."""

    criteria: list[CriterionFacts] = Field(default_factory=list)

    def missing(self, ids: list[str]) -> list[str]:
        given = {c.criterion for c in self.criteria}
        return [i for i in ids if i not in given]


class Evidence(_Lenient):
    command: str = Field("", description="A command you ran (exactly as run).")
    exit_code: int | None = None
    numbers: str = Field("", description="What the output says, e.g. '5 passed'.")
    pointer: str = Field("", description="path:line of a change, if no command.")


def _listed(items: list[str]) -> list[str]:
    return [i for i in items if isinstance(i, str) and i.strip()]


class ExecutorReport(_Lenient):
    """changed / done / evidence / blockers / unfinished -- never a verdict."""

    unit: str = ""
    changed: list[str] = Field(default_factory=list, description="Files changed.")
    done: bool = False
    evidence: list[Evidence] = Field(default_factory=list)
    blockers: list[str] = Field(default_factory=list, description="What stops you (needs another unit).")
    unfinished: list[str] = Field(default_factory=list)

    @property
    def finished(self) -> bool:
        """Done means done: a report that lists blockers or unfinished work is never done."""
        return self.done and not _listed(self.blockers) and not _listed(self.unfinished)


class CriterionVerdict(_Lenient):
    id: str
    status: Status
    evidence: str = Field("", description="The pointer/command output it rests on; none => unverified.")


class Defect(_Lenient):
    key: str = Field(description="Stable short key, e.g. slugify-trailing-hyphen.")
    severity: Severity = "major"
    route: Route = Field("DO", description="DO: the implementation is wrong; PLAN: the plan is wrong.")
    description: str = ""
    unit: str | None = None


class AuditVerdict(_Lenient):
    criteria: list[CriterionVerdict] = Field(default_factory=list)
    defects: list[Defect] = Field(default_factory=list)


Decision = Literal["replan", "continue", "stop"]


class ExpertDecision(_Lenient):
    decision: Decision
    new_input: str = Field("", description="For replan: what the analyst must change.")
    reasons: list[str] = Field(default_factory=list)
    confidence: float = Field(0.5, ge=0, le=1)


def defect_key(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "unnamed"


def same_command(a: str, b: str) -> bool:
    """Equal up to whitespace runs -- quotes and backslashes are compared as they are."""
    return " ".join(a.split()) == " ".join(b.split())


def check_evidence(report: ExecutorReport, log: list[ToolUse]) -> tuple[list[str], list[str], list[str]]:
    """The report's evidence checked against the exact commands the executor ran in that session
    (its tool log): a command counts only if it was really run, and its real exit code is shown.
    Returns (evidence lines, refused commands, verified commands)."""
    runs = [c for c in log if c.tool == "run" and not c.denied and isinstance(c.args.get("command"), str)]
    evidence, refused, verified = [], [], []
    for ev in report.evidence:
        command = ev.command.strip()
        if command:
            seen = [c for c in runs if same_command(c.args["command"], command)]
            if not seen:
                refused.append(command)
                continue
            code = seen[-1].exit_code
            ran = f"exit {code}" if code is not None else "killed (timeout)"
            evidence.append(f"`{command}` -> {ran} (claimed exit {ev.exit_code}) {ev.numbers}".strip())
            verified.append(seen[-1].args["command"])
        elif ev.pointer.strip() or ev.numbers.strip():
            evidence.append(f"{ev.pointer} {ev.numbers}".strip())
    return evidence, refused, verified


@dataclass
class Rerun:
    """One proving command run again in CHECK by the executor's CHECK session (read + exec only)."""

    command: str
    criteria: list[str]
    exit_code: int | None  # None: killed after the timeout, or not run
    output_tail: str
    changed_clone: bool = False
    ran: bool = True  # False: the CHECK session never ran it

    @property
    def passed(self) -> bool:
        return self.ran and self.exit_code == 0 and not self.changed_clone

    @property
    def status(self) -> str:
        if not self.ran:
            return "not run by the executor"
        return f"exit {self.exit_code}" if self.exit_code is not None else "killed (timeout)"

    def brief(self) -> dict[str, object]:
        """What the orchestrator (and through it the scout and the auditor) may carry: the command,
        its criteria and its status, no output."""
        return {
            "command": self.command,
            "for_criteria": self.criteria,
            "exit_code": self.exit_code if self.ran and self.exit_code is not None else self.status,
            **({"warning": "the CHECK session changed files in the clone"} if self.changed_clone else {}),
        }

    def evidence(self) -> str:
        """What the scout gets straight from the executor's session (raw data: no other role reads
        it): the command, its status and the end of its output."""
        warning = " (the CHECK session changed files in the clone)" if self.changed_clone else ""
        head = f"$ {self.command}\n[{self.status}{warning}; proves {', '.join(self.criteria)}]"
        return f"{head}\n{self.output_tail}" if self.output_tail else head


def missing_verdicts(verdict: AuditVerdict | None, plan: Plan) -> list[str]:
    """The active criteria the auditor's report does not judge (all of them if there is no report)."""
    given = {c.id for c in verdict.criteria} if verdict else set()
    return [c.id for c in plan.active_criteria() if c.id not in given]


def judge(
    verdict: AuditVerdict | None, plan: Plan, reruns: list[Rerun]
) -> tuple[dict[str, CriterionVerdict], list[Defect], list[str]]:
    """The auditor's rules applied by code: every active criterion judged (missing => unverified),
    "met" without evidence => unverified, "met" while its proving command failed in CHECK => unmet,
    "met" while the CHECK session did not run it => unverified, and a not-met criterion with no
    defect gets one keyed on it."""
    given = {c.id: c for c in (verdict.criteria if verdict else [])}
    failed = {cid: r for r in reruns if r.ran and not r.passed for cid in r.criteria}
    missing = {cid: r for r in reruns if not r.ran for cid in r.criteria}
    notes: list[str] = []
    out: dict[str, CriterionVerdict] = {}
    overridden: list[str] = []
    for c in plan.active_criteria():
        v = given.get(c.id) or CriterionVerdict(id=c.id, status="unverified")
        if v.status == "met" and not v.evidence.strip():
            notes.append(f"{c.id} judged met without evidence -> unverified")
            v = CriterionVerdict(id=c.id, status="unverified")
        if v.status == "met" and c.id in failed:
            r = failed[c.id]
            why = "changed the clone" if r.changed_clone else f"exit {r.exit_code}"
            notes.append(f"{c.id} judged met but `{r.command}` failed in CHECK ({why}) -> unmet")
            v = CriterionVerdict(id=c.id, status="unmet", evidence=f"CHECK re-run `{r.command}`: {why}")
            overridden.append(c.id)
        elif v.status == "met" and c.id in missing:
            notes.append(f"{c.id} judged met but `{missing[c.id].command}` was not re-run -> unverified")
            v = CriterionVerdict(id=c.id, status="unverified")
        out[c.id] = v
    defects = [d.model_copy(update={"key": defect_key(d.key)}) for d in (verdict.defects if verdict else [])]
    listed = bool(defects)
    for cid, v in out.items():
        if v.status != "met" and (not listed or cid in overridden):
            defects.append(Defect(key=f"criterion-{defect_key(cid)}", description=f"{cid} is {v.status}"))
    return out, defects, notes
