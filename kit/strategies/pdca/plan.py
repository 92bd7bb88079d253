"""The pdca plan (docs/strategies.md, ``## pdca``): its schema, the PLAN->DO gate, and what counts as
a revision.

The analyst is *asked* for the strict :class:`Plan` schema (every mandatory field required and
non-empty, so grammar-constrained providers produce the whole structure) but its answer is *read*
with :class:`PlanDraft`, where everything is optional: a missing or empty field is then a gate
rejection listed by name, never a crash or a format error.

Criteria are append-only across revisions: a new plan keeps every criterion of the accepted one, or
keeps it listed with ``superseded_by`` naming an active replacement criterion that inherits it
(the auditor judges the replacement against the superseded text too). A unit keeps its criteria
the same way: to move a criterion elsewhere, supersede the unit with a replacement that inherits it.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

UnitState = Literal["pending", "running", "blocked", "done", "superseded"]
UNIT_STATES = ("pending", "running", "blocked", "done", "superseded")


class Criterion(BaseModel):
    id: str = Field(min_length=1, description="Short id, e.g. C1.")
    text: str = Field(min_length=1, description="What must be true.")
    how_verified: str = Field(
        min_length=1, description="The exact shell command that proves it, or 'read: path' for a reading."
    )
    negative_case: str = Field(min_length=1, description="What must NOT happen (the failure it rules out).")
    superseded_by: str | None = Field(None, description="Replacement criterion id (it inherits this one).")


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

    def active_criteria(self) -> list[Criterion]:
        return [c for c in self.acceptance_criteria if not c.superseded_by]

    def inherited(self, cid: str) -> list[Criterion]:
        """The superseded criteria whose replacement chain ends at ``cid`` (it must satisfy them too)."""
        by_id = {c.id: c for c in self.acceptance_criteria}
        out = []
        for c in self.acceptance_criteria:
            seen, nxt = {c.id}, c.superseded_by
            while nxt and nxt in by_id and by_id[nxt].superseded_by and nxt not in seen:
                seen.add(nxt)
                nxt = by_id[nxt].superseded_by
            if c.superseded_by and nxt == cid:
                out.append(c)
        return out


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class CriterionDraft(_Lenient):
    id: str | None = None
    text: str | None = None
    how_verified: str | None = None
    negative_case: str | None = None
    superseded_by: str | None = None


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
CRITERION_FIELDS = ("id", "text", "how_verified", "negative_case")


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
        missing += [f"acceptance_criteria[{i}].{f}" for f in CRITERION_FIELDS if _empty(getattr(c, f))]
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
        if u.get("state") not in UNIT_STATES:
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
                id="U1", expected_result=plan.expected_result, criteria=[c.id for c in plan.active_criteria()]
            )
        ]
    return plan, list(dict.fromkeys(_consistency(plan) + _append_only(plan, previous)))


def _consistency(plan: Plan) -> list[str]:
    problems: list[str] = []
    crit = {c.id: c for c in plan.acceptance_criteria}
    units = {u.id: u for u in plan.units}
    for kind, ids in (
        ("criterion", [c.id for c in plan.acceptance_criteria]),
        ("unit", [u.id for u in plan.units]),
    ):
        problems += [f"duplicate {kind} id {i}" for i in sorted({i for i in ids if ids.count(i) > 1})]
    for c in plan.acceptance_criteria:
        new = crit.get(c.superseded_by or "")
        if c.superseded_by and (new is None or new.superseded_by or new.id == c.id):
            problems.append(f"criterion {c.id} is superseded but superseded_by names no active criterion")
    for u in plan.units:
        problems += [f"unit {u.id} covers unknown criterion {c}" for c in u.criteria if c not in crit]
        problems += [f"unit {u.id} depends on unknown unit {d}" for d in u.depends_on if d not in units]
        if u.state == "blocked" and (not u.blocked_by or u.blocked_by not in units):
            problems.append(f"unit {u.id} is blocked but blocked_by names no unit of the plan")
        if u.state == "superseded":
            new_unit = units.get(u.superseded_by or "")
            if new_unit is None or new_unit.state == "superseded":
                problems.append(f"unit {u.id} is superseded but superseded_by names no active unit")
            else:
                problems += _inherits(new_unit, u.id, u.criteria, plan)
    covered = {resolve(c, plan) for u in plan.units if u.state != "superseded" for c in u.criteria}
    problems += [
        f"criterion {c.id} is covered by no active unit"
        for c in plan.active_criteria()
        if c.id not in covered
    ]
    return problems


def resolve(cid: str, plan: Plan) -> str:
    """A criterion id followed through its supersede chain to the active one."""
    by_id, seen = {c.id: c for c in plan.acceptance_criteria}, set()
    while cid in by_id and by_id[cid].superseded_by and cid not in seen:
        seen.add(cid)
        cid = by_id[cid].superseded_by or cid
    return cid


def _inherits(new: Unit, old_id: str, old_criteria: list[str], plan: Plan) -> list[str]:
    have = {resolve(c, plan) for c in new.criteria}
    lost = sorted(c for c in old_criteria if resolve(c, plan) not in have)
    return (
        [f"unit {new.id} replaces {old_id} but does not inherit criteria {', '.join(lost)}"] if lost else []
    )


def _append_only(plan: Plan, previous: Plan | None) -> list[str]:
    """Nothing of the accepted plan may silently disappear: criteria, units, and a unit's criteria."""
    if previous is None:
        return []
    problems: list[str] = []
    crit = {c.id for c in plan.acceptance_criteria}
    problems += [
        f"criterion {c.id} of the previous revision is gone; criteria are append-only: keep it, or keep it "
        "with superseded_by naming a replacement criterion that inherits it"
        for c in previous.acceptance_criteria
        if c.id not in crit
    ]
    units = {u.id: u for u in plan.units}
    for old in previous.units:
        new = units.get(old.id)
        if new is None:
            problems.append(
                f"unit {old.id} of the previous revision is gone; keep it, marked superseded_by its replacement"
            )
            continue
        if new.state == "superseded":
            replacement = units.get(new.superseded_by or "")
            if replacement is not None:  # the consistency check covers a missing replacement
                problems += _inherits(replacement, new.id, old.criteria, plan)
            continue
        kept = {resolve(c, plan) for c in new.criteria}
        lost = sorted(c for c in old.criteria if resolve(c, plan) not in kept)
        if lost:
            problems.append(
                f"unit {new.id} dropped criteria {', '.join(lost)}; a unit keeps its criteria "
                "(supersede it with a replacement that inherits them to move them)"
            )
    return problems


def _words(text: str | None) -> str:
    return " ".join(re.sub(r"[^\w./=:-]+", " ", (text or "").lower()).split()).strip(".:- ")


def structure_key(plan: Plan) -> str:
    """What makes a revision (docs/strategies.md, ``## pdca``): units, their criteria, their dependencies and the
    verification methods -- not wording (texts, constraints, risks) and not the loop's unit states."""
    data = {
        "criteria": sorted(
            (c.id, _words(c.how_verified), c.superseded_by or "") for c in plan.acceptance_criteria
        ),
        "units": sorted(
            (
                u.id,
                sorted(u.criteria),
                sorted(u.depends_on),
                u.blocked_by or "" if u.state == "blocked" else "",
                u.superseded_by or "" if u.state == "superseded" else "",
            )
            for u in plan.units
        ),
    }
    return json.dumps(data, sort_keys=True)


def carry_states(plan: Plan, previous: Plan | None) -> Plan:
    """Unit states are the loop's: a unit stays done only if its structure (criteria, dependencies,
    their verification methods) is unchanged; rewording does not redo work."""
    if previous is None:
        for u in plan.units:
            u.state = u.state if u.state in ("superseded", "blocked") else "pending"
        return plan
    old_units = {u.id: u for u in previous.units}
    old_crit = {c.id: _words(c.how_verified) for c in previous.acceptance_criteria}
    new_crit = {c.id: _words(c.how_verified) for c in plan.acceptance_criteria}
    for u in plan.units:
        if u.state in ("superseded", "blocked"):
            continue
        old = old_units.get(u.id)
        same = (
            old is not None
            and old.state == "done"
            and (sorted(old.criteria), sorted(old.depends_on)) == (sorted(u.criteria), sorted(u.depends_on))
            and all(old_crit.get(c) == new_crit.get(c) for c in u.criteria)
            and [resolve(c, previous) for c in old.criteria] == [resolve(c, plan) for c in old.criteria]
        )
        u.state = "done" if same else "pending"
    return plan
