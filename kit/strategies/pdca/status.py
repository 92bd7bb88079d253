"""The pdca loop state and its status file (docs/strategies.md, ``## pdca``): counters N/r/n, units
and their runs, the defect history, and the append-only markdown file with its progress log and final
sections."""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from kit.agent import safefs
from kit.records.schema import Severity
from kit.strategies.pdca.plan import Plan, Unit, resolve
from kit.strategies.pdca.reports import CriterionVerdict, Defect, ExecutorReport, Route


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
    evidence: list[str] = Field(default_factory=list)  # verified lines (the status file shows them)
    commands: list[str] = Field(default_factory=list)  # the cited commands it really ran, exactly


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
        plan = self.plan
        assert plan is not None
        units = [
            u
            for u in self.active()
            if u.id in {d.unit for d in defects} or failed & {resolve(c, plan) for c in u.criteria}
        ]
        for u in units or self.active():
            u.state = "pending"

    def unmet(self) -> list[str]:
        """Active criteria not met on evidence, as 'C1 (unverified): text' (plus what they inherit)."""
        if self.plan is None:
            return ["(no accepted plan)"]
        out = []
        for c in self.plan.active_criteria():
            if c.id in self.verdict and self.verdict[c.id].status == "met":
                continue
            inherits = [i.id for i in self.plan.inherited(c.id)]
            status = self.verdict[c.id].status if c.id in self.verdict else "unverified"
            out.append(
                f"{c.id} ({status}): {c.text}" + (f" [inherits {', '.join(inherits)}]" if inherits else "")
            )
        return out

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
        [
            c.id,
            f"superseded by {c.superseded_by}"
            if c.superseded_by
            else state.verdict[c.id].status
            if c.id in state.verdict
            else "-",
            c.text,
            c.how_verified,
            c.negative_case,
        ]
        for c in (plan.acceptance_criteria if plan else [])
    ]
    return "\n".join(
        [
            f"\n## State @ {at} ({reason})\n",
            f"- current state: {state.phase}",
            f"- counters: N={state.N} r={state.r} n={state.n}/{state.max_attempts}",
            f"- expected result: {plan.expected_result if plan else '(no plan yet)'}\n",
            "### Criteria\n",
            _table(["id", "status", "criterion", "how verified", "negative case"], criteria),
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


def render_final(state: State, at: str, outcome: str, changed: list[str], next_plan: list[str]) -> str:
    """The closing sections: Done/Verified, Next plan, Changed artefacts."""
    plan = state.plan
    verified = [f"- {cid} met: {v.evidence}" for cid, v in state.verdict.items() if v.status == "met"]
    done = [
        f"- unit {u.id} done: " + ("; ".join(state.runs[u.id].evidence) if u.id in state.runs else "")
        for u in (plan.units if plan else [])
        if u.state == "done"
    ]
    return "\n".join(
        [
            f"\n## Final @ {at} ({outcome})\n",
            "### Done/Verified\n",
            "\n".join(verified + done) or "(nothing verified)",
            "\n### Next plan\n",
            "\n".join(f"- {line}" for line in next_plan) or "(none: the goal is met on evidence)",
            "\n### Changed artefacts\n",
            "\n".join(f"- {path}" for path in changed) or "(no files changed)",
            "\n### Progress log\n",
        ]
    )


def log_line(at: str, state: State, event: str, evidence: str = "") -> str:
    evidence = " ".join(evidence.split())[:300]
    return f"{at} | {state.phase} | r{state.r} | n{state.n}/{state.max_attempts} | {event} | {evidence}\n"


LOG_LINE = re.compile(r"^(\S+) \| (\w+) \| r(\d+) \| n(\d+)/(\d+) \| ([^|]*?) \| ?(.*)$")


def _in_clone(path: Path) -> tuple[Path, Path]:
    """(the clone, the path inside it) of a status file under the clone's ``.pdca/``."""
    parts = path.parts
    top = max((i for i, part in enumerate(parts) if part == ".pdca"), default=len(parts) - 1)
    return Path(*parts[:top]), Path(*parts[top:])


class StatusFile:
    """Append-only markdown file. The loop keeps the text it wrote; if anything else changed the file
    (a shell command of the executor), it is restored first and the append reports the tampering.
    The file is in the clone, so it is read and written without following links (:mod:`safefs`,
    from a descriptor of the clone), never read beyond the length the loop wrote, and never parsed."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.root, self.rel = _in_clone(self.path)
        self.text = ""

    def _current(self) -> bytes | None:
        """The file's bytes, up to one more than the loop wrote (enough to see a change); None when it
        is missing, a link or not a regular file."""
        try:
            with safefs.open_read(self.root, self.rel) as fh:
                return fh.read(len(self.text.encode("utf-8")) + 1)
        except OSError:
            return None

    def append(self, chunk: str) -> bool:
        current = self._current()
        tampered = current != self.text.encode("utf-8") and (current is not None or bool(self.text))
        try:
            self._write(chunk, rewrite=current is None or tampered)
        except OSError:  # a link or a file where the file's folders should be, a folder where the
            tampered = True  # file should be: removed (never followed), then again
            for i in range(1, len(self.rel.parts)):
                with contextlib.suppress(OSError):  # a real folder is refused: it stays
                    safefs.unlink(self.root, Path(*self.rel.parts[:i]))
            with contextlib.suppress(OSError):
                safefs.remove(self.root, self.rel)
            with contextlib.suppress(OSError):  # still unwritable: the loop's own text (self.text)
                self._write(chunk, rewrite=True)  # stays the record; the next append tries again
        self.text += chunk
        return tampered

    def _write(self, chunk: str, *, rewrite: bool) -> None:
        if rewrite:
            with contextlib.suppress(OSError):  # a link or a special file in its place
                safefs.unlink(self.root, self.rel)
            safefs.write_text(self.root, self.rel, self.text)
        safefs.write_text(self.root, self.rel, chunk, append=True)

    def copy_to(self, dest: Path) -> None:
        """The loop's own text into ``dest`` (the run folder): what is in the clone is never copied."""
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(self.text, encoding="utf-8")

    def log(self) -> list[tuple[str, ...]]:
        """The progress log as (time, phase, r, n, max, event, evidence) tuples."""
        return [m.groups() for line in self.text.splitlines() if (m := LOG_LINE.match(line))]


def status_guard(name: str, args: dict) -> str | None:
    """The executor's write guard: nothing under .pdca/status/ (the loop's status file; the rest of
    .pdca/ is the repository's, as any folder)."""
    path = os.path.normpath(str(args.get("path", "")))
    if path.split(os.sep)[:2] == [".pdca", "status"]:
        return (
            f"refused: {args.get('path')!r} is under .pdca/status/, the PDCA status file only the loop writes"
        )
    return None


def hide_from_git(root: Path) -> None:
    """Keep .pdca/status/ out of the agent's ``git status`` (the clone's .git/info/exclude; the scored
    diff never shows it: snapshots leave .pdca/status out). Written without following links; an
    exclude file that is a link, special or larger than 1 MB is left alone."""
    rel = Path(".git", "info", "exclude")
    try:
        text = safefs.read_text(root, rel, 1024 * 1024)
    except FileNotFoundError:
        text = ""
    except OSError:
        return
    if "/.pdca/status/" not in text.split():
        with contextlib.suppress(OSError):
            safefs.write_text(
                root, rel, ("" if text.endswith("\n") or not text else "\n") + "/.pdca/status/\n", append=True
            )
