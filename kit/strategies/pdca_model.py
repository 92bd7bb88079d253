"""The pdca strategy's data: what each role hands back (pydantic schemas), the PLAN->DO gate, the
auditor's rules, and the loop state with its append-only markdown status file (STRATEGIES.md §3).

The analyst is *asked* for the strict :class:`Plan` schema (every mandatory field required and
non-empty, so grammar-constrained providers produce the whole structure) but its answer is *read*
with :class:`PlanDraft`, where everything is optional: a missing or empty field is then a gate
rejection listed by name, never a crash or a format error.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

UnitState = Literal["pending", "running", "blocked", "done", "superseded"]
Status = Literal["met", "unmet", "unverified"]
Severity = Literal["critical", "major", "minor"]
Route = Literal["DO", "PLAN"]

# --------------------------------------------------------------------------- the plan


class Criterion(BaseModel):
    id: str = Field(min_length=1, description="Short id, e.g. C1.")
    text: str = Field(min_length=1, description="What must be true.")
    how_verified: str = Field(min_length=1, description="The command or reading that proves it.")


class Unit(BaseModel):
    id: str = Field(min_length=1, description="Short id, e.g. U1.")
    expected_result: str = Field(min_length=1)
    criteria: list[str] = Field(min_length=1, description="Ids of the acceptance criteria it covers.")
    depends_on: list[str] = Field(default_factory=list, description="Unit ids that must be done first.")
    state: UnitState = "pending"
    superseded_by: str | None = Field(None, description="Replacement unit id (state superseded).")
    blocked_by: str | None = Field(None, description="Prerequisite unit id (state blocked).")


class Plan(BaseModel):
    """The plan the PLAN->DO gate accepts: every field present and non-empty."""

    expected_result: str = Field(min_length=1)
    constraints: list[str] = Field(min_length=1)
    assumptions: list[str] = Field(min_length=1)
    acceptance_criteria: list[Criterion] = Field(min_length=1)
    units: list[Unit] = Field(default_factory=list, description="Empty only with no_split.")
    no_split: bool = Field(False, description="True: one unit is the whole job (give no_split_reason).")
    no_split_reason: str | None = None
    means_and_access: str = Field(min_length=1, description="Tools, files, commands the work needs.")
    risks: list[str] = Field(min_length=1)
    stop_conditions: list[str] = Field(min_length=1)


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class CriterionDraft(_Lenient):
    id: str | None = None
    text: str | None = None
    how_verified: str | None = None


class UnitDraft(_Lenient):
    id: str | None = None
    expected_result: str | None = None
    criteria: list[str] | None = None
    depends_on: list[str] | None = None
    state: str | None = None
    superseded_by: str | None = None
    blocked_by: str | None = None


class PlanDraft(_Lenient):
    """The analyst's answer as read: every field optional, so the gate can list what is missing."""

    expected_result: str | None = None
    constraints: list[str] | None = None
    assumptions: list[str] | None = None
    acceptance_criteria: list[CriterionDraft] | None = None
    units: list[UnitDraft] | None = None
    no_split: bool | None = None
    no_split_reason: str | None = None
    means_and_access: str | None = None
    risks: list[str] | None = None
    stop_conditions: list[str] | None = None

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        """Ask for the strict plan, with short lists and strings (a request, not a gate rule: it
        keeps grammar-constrained small models from repeating one item until the token cap)."""
        schema = _bounded(Plan.model_json_schema(*args, **kwargs))
        schema["required"] = [*schema["required"], "units"]  # no_split stays allowed beside it
        schema["properties"]["units"]["minItems"] = 1
        return schema


def _bounded(node: Any, items: int = 4, chars: int = 200) -> Any:
    if isinstance(node, dict):
        node = {k: _bounded(v, items, chars) for k, v in node.items()}
        if node.get("type") == "array":
            node.setdefault("maxItems", items)
        elif node.get("type") == "string":
            node.setdefault("maxLength", chars)
        return node
    return [_bounded(v, items, chars) for v in node] if isinstance(node, list) else node


MANDATORY = ("expected_result", "constraints", "assumptions", "acceptance_criteria")
MANDATORY_TAIL = ("means_and_access", "risks", "stop_conditions")


def _empty(value: Any) -> bool:
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, list):
        return not value or all(_empty(v) for v in value)
    return value is None


def missing_fields(draft: PlanDraft) -> list[str]:
    """Names of the mandatory fields that are missing or empty (nested ones as units[1].criteria)."""
    missing = [f for f in MANDATORY if _empty(getattr(draft, f))]
    for i, c in enumerate(draft.acceptance_criteria or []):
        missing += [
            f"acceptance_criteria[{i}].{f}" for f in ("id", "text", "how_verified") if _empty(getattr(c, f))
        ]
    if _empty(draft.units) and not (draft.no_split and not _empty(draft.no_split_reason)):
        missing.append("units (or no_split with no_split_reason)")
    for i, u in enumerate(draft.units or []):
        missing += [f"units[{i}].{f}" for f in ("id", "expected_result", "criteria") if _empty(getattr(u, f))]
    return missing + [f for f in MANDATORY_TAIL if _empty(getattr(draft, f))]


def check_plan(draft: PlanDraft, previous: Plan | None) -> tuple[Plan | None, list[str]]:
    """The PLAN->DO gate: the accepted plan, or None and the reasons (missing fields first)."""
    problems = missing_fields(draft)
    if problems:
        return None, [f"missing or empty: {p}" for p in problems]
    data = draft.model_dump(exclude_none=True)
    for u in data.get("units", []):
        if u.get("state") not in ("pending", "running", "blocked", "done", "superseded"):
            u["state"] = "pending"
        if u.get("superseded_by"):
            u["state"] = "superseded"
    try:
        plan = Plan.model_validate(data)
    except ValidationError as e:
        return None, [f"invalid: {'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors()]
    if plan.no_split and not plan.units:
        plan.units = [
            Unit(
                id="U1",
                expected_result=plan.expected_result,
                criteria=[c.id for c in plan.acceptance_criteria],
            )
        ]
    return plan, _consistency(plan, previous)


def _consistency(plan: Plan, previous: Plan | None) -> list[str]:
    problems: list[str] = []
    crit_ids = [c.id for c in plan.acceptance_criteria]
    units = {u.id: u for u in plan.units}
    for kind, ids in (("criterion", crit_ids), ("unit", [u.id for u in plan.units])):
        problems += [f"duplicate {kind} id {i}" for i in sorted({i for i in ids if ids.count(i) > 1})]
    before = {u.id: u for u in previous.units} if previous else {}
    for u in plan.units:
        problems += [f"unit {u.id} covers unknown criterion {c}" for c in u.criteria if c not in crit_ids]
        problems += [f"unit {u.id} depends on unknown unit {d}" for d in u.depends_on if d not in units]
        if u.state == "blocked" and (not u.blocked_by or u.blocked_by not in units):
            problems.append(f"unit {u.id} is blocked but blocked_by names no unit of the plan")
        if u.state == "superseded":
            new = units.get(u.superseded_by or "")
            if new is None or new.state == "superseded":
                problems.append(f"unit {u.id} is superseded but superseded_by names no active unit")
                continue
            old = set(u.criteria) | set(before[u.id].criteria if u.id in before else [])
            lost = sorted(old - set(new.criteria))
            if lost:
                problems.append(
                    f"unit {new.id} replaces {u.id} but does not inherit criteria {', '.join(lost)}"
                )
    problems += [
        f"unit {old} of the previous revision is gone; keep it, marked superseded_by its replacement"
        for old in before
        if old not in units
    ]
    covered = {c for u in plan.units if u.state != "superseded" for c in u.criteria}
    problems += [f"criterion {c} is covered by no active unit" for c in crit_ids if c not in covered]
    return problems


def plan_key(plan: Plan) -> str:
    """The plan's content (unit states excluded: the loop owns them), to tell a real revision."""
    data = plan.model_dump()
    for u in data["units"]:
        if u["state"] != "superseded":
            u["state"] = "active"
    return json.dumps(data, sort_keys=True)


# --------------------------------------------------------------------------- role outputs


class Fact(_Lenient):
    pointer: str = Field("", description="path:line, or the command whose output you read")
    fact: str = Field("", description="What is there (numbers, names), no advice.")
    criterion: str | None = Field(None, description="Criterion id this fact is evidence for, if any.")


class ScoutReport(_Lenient):
    facts: list[Fact] = Field(default_factory=list)


class Evidence(_Lenient):
    command: str = Field("", description="A command you ran (exactly as run).")
    exit_code: int | None = None
    numbers: str = Field("", description="What the output says, e.g. '5 passed'.")
    pointer: str = Field("", description="path:line of a change, if no command.")


class ExecutorReport(_Lenient):
    """changed / done / evidence / blockers / unfinished -- never a verdict."""

    unit: str = ""
    changed: list[str] = Field(default_factory=list, description="Files changed.")
    done: bool = False
    evidence: list[Evidence] = Field(default_factory=list)
    blockers: list[str] = Field(default_factory=list, description="What stops you (needs another unit).")
    unfinished: list[str] = Field(default_factory=list)


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


class ExpertDecision(_Lenient):
    decision: Literal["replan", "stop"]
    new_input: str = Field("", description="For replan: what the analyst must change.")
    reasons: list[str] = Field(default_factory=list)
    confidence: float = Field(0.5, ge=0, le=1)


def defect_key(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "unnamed"


def judge(
    verdict: AuditVerdict | None, plan: Plan
) -> tuple[dict[str, CriterionVerdict], list[Defect], list[str]]:
    """The auditor's rules applied by code: every criterion judged (missing => unverified), "met"
    without evidence => unverified, and a not-met criterion with no defect gets one keyed on it."""
    given = {c.id: c for c in (verdict.criteria if verdict else [])}
    notes: list[str] = []
    out: dict[str, CriterionVerdict] = {}
    for c in plan.acceptance_criteria:
        v = given.get(c.id) or CriterionVerdict(id=c.id, status="unverified")
        if v.status == "met" and not v.evidence.strip():
            notes.append(f"{c.id} judged met without evidence -> unverified")
            v = CriterionVerdict(id=c.id, status="unverified")
        out[c.id] = v
    defects = [d.model_copy(update={"key": defect_key(d.key)}) for d in (verdict.defects if verdict else [])]
    listed = bool(defects)
    for cid, v in out.items():
        if v.status != "met" and not listed:
            defects.append(Defect(key=f"criterion-{defect_key(cid)}", description=f"{cid} is {v.status}"))
    return out, defects, notes


# --------------------------------------------------------------------------- loop state


def check_evidence(report: ExecutorReport, events: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """The report's evidence checked against the executor's tool events of that session: a command
    counts only if it was really run (its real result is shown); returns (evidence, refused)."""
    runs = [e for e in events if e["kind"] == "tool" and e["name"] == "run"]
    evidence, refused = [], []
    for ev in report.evidence:
        command = ev.command.strip()
        if command:
            seen = [e for e in runs if command[:150] in e["detail"]]
            if not seen:
                refused.append(command)
                continue
            ran = "exit 0" if seen[-1]["ok"] else "failed"
            evidence.append(f"`{command}` -> {ran} (claimed exit {ev.exit_code}) {ev.numbers}".strip())
        elif ev.pointer.strip() or ev.numbers.strip():
            evidence.append(f"{ev.pointer} {ev.numbers}".strip())
    return evidence, refused


class DefectRecord(BaseModel):
    key: str
    severity: Severity
    route: Route
    first_seen: str  # "r1/n2"
    last_seen: str
    seen: int = 1
    fix_count: int = 0
    escalation: str = ""


class UnitRun(BaseModel):
    """What the executor reported for a unit, with its evidence checked against the tool log."""

    report: ExecutorReport
    evidence: list[str] = Field(default_factory=list)  # verified lines the auditor gets


class State(BaseModel):
    task: str
    goal: str
    phase: str = "PLAN"
    N: int = 1
    r: int = 1
    n: int = 1
    max_attempts: int = 3
    plan: Plan | None = None
    runs: dict[str, UnitRun] = Field(default_factory=dict)
    defects: dict[str, DefectRecord] = Field(default_factory=dict)
    decisions: list[str] = Field(default_factory=list)
    verdict: dict[str, CriterionVerdict] = Field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"r{self.r}/n{self.n}"

    def active(self) -> list[Unit]:
        return [u for u in (self.plan.units if self.plan else []) if u.state != "superseded"]

    def next_unit(self) -> Unit | None:
        """The first pending (or blocked) unit whose dependencies and prerequisite are done."""
        done = {u.id for u in self.active() if u.state == "done"}
        for u in self.active():
            needs = set(u.depends_on) | ({u.blocked_by} if u.blocked_by else set())
            if u.state in ("pending", "blocked") and needs <= done:
                return u
        return None

    def unit_problem(self, u: Unit) -> str:
        run = self.runs.get(u.id)
        if run is None:
            return f"unit {u.id} never ran: it waits for {u.depends_on or u.blocked_by}"
        r = run.report
        return f"unit {u.id} {u.state}: blockers {r.blockers}; unfinished {r.unfinished}; evidence {run.evidence}"

    def reopen(self, defects: list[Defect]) -> None:
        """Units to redo in the next attempt: those named by a defect or covering a failed criterion."""
        failed = {cid for cid, v in self.verdict.items() if v.status != "met"}
        units = [u for u in self.active() if u.id in {d.unit for d in defects} or failed & set(u.criteria)]
        for u in units or self.active():
            u.state = "pending"

    def unmet(self) -> list[str]:
        """Criteria not met on evidence, as 'C1 (unverified): text'."""
        if self.plan is None:
            return ["(no accepted plan)"]
        return [
            f"{c.id} ({self.verdict[c.id].status if c.id in self.verdict else 'unverified'}): {c.text}"
            for c in self.plan.acceptance_criteria
            if c.id not in self.verdict or self.verdict[c.id].status != "met"
        ]

    def see_defects(self, defects: list[Defect]) -> list[str]:
        """Add this verdict's defects to the history; the keys that came back after a fix."""
        back = []
        for d in defects:
            rec = self.defects.get(d.key)
            if rec is None:
                self.defects[d.key] = DefectRecord(
                    key=d.key, severity=d.severity, route=d.route, first_seen=self.where, last_seen=self.where
                )
                continue
            rec.seen, rec.last_seen, rec.severity, rec.route = rec.seen + 1, self.where, d.severity, d.route
            if rec.fix_count >= 1:
                back.append(d.key)
        return back


# --------------------------------------------------------------------------- markdown


def _cell(value: Any) -> str:
    text = ", ".join(map(str, value)) if isinstance(value, list) else ("" if value is None else str(value))
    return text.replace("|", "/").replace("\n", " ")


def _table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines) if rows else "(none)"


def render_header(state: State, started: str) -> str:
    return (
        f"# PDCA status: {state.task} (cycle {state.N})\n\n"
        f"- task: {state.task}\n- started: {started}\n- goal:\n\n"
        + "\n".join(f"  > {line}" for line in state.goal.strip().splitlines())
        + "\n\nProgress log: `<UTC time> | <phase> | r<r> | n<n>/<max> | <event> | <evidence>`. "
        "This file is append-only: state snapshots are added below as the loop moves.\n\n"
    )


def render_snapshot(state: State, at: str, reason: str) -> str:
    plan = state.plan
    units = [
        [u.id, u.state, u.criteria, u.depends_on, u.superseded_by, u.blocked_by,
         len(state.runs[u.id].evidence) if u.id in state.runs else 0]
        for u in (plan.units if plan else [])
    ]  # fmt: skip
    defects = [
        [d.key, d.severity, d.route, d.first_seen, d.last_seen, d.seen, d.fix_count, d.escalation]
        for d in state.defects.values()
    ]
    criteria = [
        [c.id, state.verdict[c.id].status if c.id in state.verdict else "-", c.text, c.how_verified]
        for c in (plan.acceptance_criteria if plan else [])
    ]
    return "\n".join(
        [
            f"\n## State @ {at} ({reason})\n",
            f"- current state: {state.phase}",
            f"- counters: N={state.N} r={state.r} n={state.n}/{state.max_attempts}",
            f"- expected result: {plan.expected_result if plan else '(no plan yet)'}\n",
            "### Criteria\n",
            _table(["id", "status", "criterion", "how verified"], criteria),
            "\n### Units\n",
            _table(
                ["id", "state", "criteria", "depends on", "superseded by", "blocked by", "evidence"], units
            ),
            "\n### Defect history\n",
            _table(
                ["key", "severity", "route", "first seen", "last seen", "seen", "fixes", "escalation"],
                defects,
            ),
            "\n### Decisions\n",
            "\n".join(f"- {d}" for d in state.decisions) or "(none)",
            "\n### Risks\n",
            "\n".join(f"- {r}" for r in (plan.risks if plan else [])) or "(none)",
            "\n### Progress log\n",
        ]
    )


def log_line(at: str, state: State, event: str, evidence: str = "") -> str:
    evidence = " ".join(evidence.split())[:300]
    return f"{at} | {state.phase} | r{state.r} | n{state.n}/{state.max_attempts} | {event} | {evidence}\n"


LOG_LINE = re.compile(r"^(\S+) \| (\w+) \| r(\d+) \| n(\d+)/(\d+) \| ([^|]*?) \| ?(.*)$")


class StatusFile:
    """Append-only markdown file. The loop keeps the text it wrote; if anything else changed the file
    (a shell command of the executor), it is restored first and the append reports the tampering."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.text = ""

    def append(self, chunk: str) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        current = self.path.read_text(encoding="utf-8") if self.path.exists() else ""
        tampered = current != self.text
        if tampered:
            self.path.write_text(self.text, encoding="utf-8")
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(chunk)
        self.text += chunk
        return tampered

    def log(self) -> list[tuple[str, ...]]:
        """The progress log as (time, phase, r, n, max, event, evidence) tuples."""
        return [m.groups() for line in self.text.splitlines() if (m := LOG_LINE.match(line))]


def carry_states(plan: Plan, previous: Plan | None) -> Plan:
    """Unit states are the loop's: a unit stays done only if it and its criteria are unchanged."""
    if previous is None:
        for u in plan.units:
            u.state = u.state if u.state in ("superseded", "blocked") else "pending"
        return plan
    old_units = {u.id: u for u in previous.units}
    old_crit = {c.id: c for c in previous.acceptance_criteria}
    new_crit = {c.id: c for c in plan.acceptance_criteria}
    for u in plan.units:
        if u.state in ("superseded", "blocked"):
            continue
        old = old_units.get(u.id)
        same = (
            old is not None
            and old.state == "done"
            and (old.expected_result, old.criteria, old.depends_on)
            == (u.expected_result, u.criteria, u.depends_on)
            and all(old_crit.get(c) == new_crit.get(c) for c in u.criteria)
        )
        u.state = "done" if same else "pending"
    return plan


def status_guard(name: str, args: dict) -> str | None:
    """The executor's write guard: nothing under .pdca/ (the loop's status file)."""
    path = os.path.normpath(str(args.get("path", "")))
    if path.split(os.sep)[0] == ".pdca":
        return f"refused: {args.get('path')!r} is under .pdca/, the PDCA status file only the loop writes"
    return None


def hide_from_git(root: Path) -> None:
    """Keep .pdca/ out of the scored diff (the clone's .git/info/exclude)."""
    exclude = Path(root) / ".git" / "info" / "exclude"
    text = exclude.read_text(encoding="utf-8") if exclude.exists() else ""
    if ".pdca/" not in text.split():
        exclude.parent.mkdir(parents=True, exist_ok=True)
        exclude.write_text(
            text + ("" if text.endswith("\n") or not text else "\n") + ".pdca/\n", encoding="utf-8"
        )
