"""workflow -- a deterministic script orchestrates subagents (docs/strategies.md, ``## workflow``).

The script is ordinary code; the model never decides what runs next::

    Implement (implementer: read + write + exec)
    loop, at most max_cycles times (16; 32 for a task marked long):
        Analyze: `analyzers` analyzers in parallel (read + exec, no write), each a report
                 {verdict: clean | issues, issues: [{file, problem, suggested_fix, severity}]} whose
                 verdict is clean exactly when the list is empty (a contradiction is a format error)
        findings deduplicated (normalised file + problem)
        Refute:  each finding goes to `refuters` independent skeptics (fresh conversations, all findings'
                 skeptics in parallel); a failed skeptic (no valid judgement) is null, not a vote; a
                 finding is kept on a strict majority of its valid judgements saying it is real, and a
                 finding with no valid judgement is *unresolved*
        no finding kept or unresolved -> a clean pass; two clean passes in a row -> stop (converged-clean)
        otherwise -> Apply (editor: read + write + exec) the kept findings (unresolved ones are not
                     applied); the streak is 0

Outcomes (docs/strategies.md, ``## Outcomes and stop reasons``): ``done`` (stop reason
``converged-clean``; claimed_done), ``capped`` (stop reason ``cycle-cap``, or ``output-budget``: the
workflow's own output-token budget used up), ``budget`` (stop reason ``budget``: the run budget --
``limits.max_model_calls`` / ``max_usd`` / ``max_tokens``). An agent whose provider failed for good
raises (the runtime's ProviderFailure) and the run ends as ``error``, so ``kit run --retry-errors``
redoes it, replaying the journal. Agent calls and cycles are counted separately, and so are findings
raised / refuted / kept / unresolved.

Choices where the source workflow is silent (also in docs/strategies.md, ``## Where the kit chooses``):

* A finding whose skeptics all failed is unresolved: its cycle is an issues cycle (not clean, the
  streak resets), counted in ``unresolved_findings``; the runtime's bounded format retries were the
  skeptics' retries, and the next cycle's analyzers look again. Unresolved findings are not sent to the
  editor (no judgement says they are real).
* A cycle counts as clean only when a majority of the configured analyzers returned a report: if most
  analyzers failed (no valid report), the cycle is *inconclusive* -- not clean (the streak resets), and
  there is nothing to apply.
* The issue list is required (an analyzer that just says it is done has not reported: format error).
  The verdict is derived from the list when the analyzer leaves it out; when it gives one that
  contradicts the list ("issues" with no issue, "clean" with issues) the answer is a format error and
  the agent is asked again (the runtime's bounded retries). A severity outside critical/major/minor is
  read as major (small models write "High", "MAJOR").
* An implementer or editor that answers badly (None) does not stop the loop: the analyzers judge the
  clone.
* Tiers: implementer and editor cheap (they do the typing), analyzer and refuter medium (judgement, as
  the auditor in pdca). The experiment's ``tiers: {workflow: ...}`` (or a profile's ``roles``) may
  reassign any of them; ``tiers: {workflow: cheap}`` is the equal-tier variant.
* Analyzers and refuters get the read and exec permissions, never write; their commands run over a
  throwaway layer (the test suite may write its caches; nothing reaches the clone:
  :mod:`kit.sandbox.throwaway`).
* A CallCapReached (the runtime's agent-call cap) is not a normal stop: it propagates and the run ends
  as ``error`` with the message saying how to raise the cap; the counters so far go with it.
* The prompt of an analyzer names its round and seat ("Review round 3, reviewer 2 of 3") and that of a
  skeptic its round, finding and seat ("Review round 3, finding 2, skeptic 1 of 3"), so calls are
  distinct in the journal and in transcripts.

Options (experiment ``strategy_options: {workflow: {...}}``): max_cycles, analyzers, refuters,
clean_streak, max_steps, max_agent_calls, max_output_tokens, concurrency, format_retries, retry_steps.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from kit.config import Tier
from kit.errors import BudgetExceeded, CallCapReached, ConfigError
from kit.prompts import PromptBook
from kit.records.schema import Severity
from kit.strategies import StrategyResult
from kit.strategies.context import RunContext
from kit.strategies.workflow.runtime import (
    DEFAULT_FORMAT_RETRIES,
    DEFAULT_MAX_CALLS,
    DEFAULT_RETRY_STEPS,
    ProviderFailure,
    Runtime,
    default_concurrency,
)

READ_WRITE_EXEC = frozenset({"read", "write", "exec"})
READ_EXEC = frozenset({"read", "exec"})
TIERS: dict[str, Tier] = {
    "implementer": "cheap",
    "analyzer": "medium",
    "refuter": "medium",
    "editor": "cheap",
}
MAX_CYCLES, MAX_CYCLES_LONG = 16, 32
ANALYZERS = 3
REFUTERS = 3
CLEAN_STREAK = 2


# --------------------------------------------------------------------------- what subagents return


class Issue(BaseModel):
    file: str = ""
    problem: str
    suggested_fix: str = ""
    severity: Severity = "major"

    @field_validator("severity", mode="before")
    @classmethod
    def _severity(cls, value: Any) -> str:
        text = str(value or "").strip().lower()
        return text if text in ("critical", "major", "minor") else "major"


class Analysis(BaseModel):
    """An analyzer's report. The issue list is required (a bare "done" is no report); the verdict is
    clean exactly when the list is empty: left out, it is derived from the list; contradicting the
    list, it is rejected (a format error, asked again)."""

    verdict: Literal["clean", "issues"] | None = None
    issues: list[Issue]

    @model_validator(mode="after")
    def _verdict_follows_the_issues(self) -> Analysis:
        derived = "issues" if self.issues else "clean"
        if self.verdict is not None and self.verdict != derived:
            raise ValueError(
                f"verdict {self.verdict!r} contradicts the issue list ({len(self.issues)} issues): "
                'use "clean" with an empty list, or "issues" with at least one issue'
            )
        self.verdict = derived
        return self


class Judgement(BaseModel):
    """One skeptic's judgement of one finding."""

    confirmed: bool = Field(description="True only if the problem really exists and matters for the task.")
    reason: str = ""


@dataclass
class Finding:
    id: int
    issue: Issue
    raised_by: int = 1  # how many analyzers reported it
    confirmations: int = 0  # how many skeptics said it is real
    judgements: int = 0  # how many skeptics gave a valid judgement (a failed one is null, not a vote)


# --------------------------------------------------------------------------- parameters and tallies


@dataclass
class WorkflowSettings:
    max_cycles: int
    analyzers: int
    refuters: int
    clean_streak: int
    max_steps: int
    max_agent_calls: int
    max_output_tokens: int | None
    concurrency: int
    format_retries: int
    retry_steps: int
    long_task: bool
    tiers: dict[str, str]
    refutation: str = (
        "per finding: `refuters` independent skeptics; a failed one is null; kept on a strict majority "
        "of the valid judgements; no valid judgement = unresolved (the cycle is not clean)"
    )

    @classmethod
    def from_context(cls, ctx: RunContext) -> WorkflowSettings:
        long_task = bool(ctx.task.long)
        params = cls(
            max_cycles=int(ctx.option("max_cycles", MAX_CYCLES_LONG if long_task else MAX_CYCLES)),
            analyzers=int(ctx.option("analyzers", ANALYZERS)),
            refuters=int(ctx.option("refuters", REFUTERS)),
            clean_streak=int(ctx.option("clean_streak", CLEAN_STREAK)),
            max_steps=int(ctx.option("max_steps", ctx.step_cap())),
            max_agent_calls=int(ctx.option("max_agent_calls", DEFAULT_MAX_CALLS)),
            max_output_tokens=ctx.option("max_output_tokens", None),
            concurrency=int(ctx.option("concurrency", default_concurrency())),
            format_retries=int(ctx.option("format_retries", DEFAULT_FORMAT_RETRIES)),
            retry_steps=int(ctx.option("retry_steps", DEFAULT_RETRY_STEPS)),
            long_task=long_task,
            tiers={role: ctx.tier(role, tier) for role, tier in TIERS.items()},
        )
        for name in ("max_cycles", "analyzers", "refuters", "clean_streak", "max_steps", "max_agent_calls"):
            if getattr(params, name) < 1:
                raise ConfigError(
                    f"workflow option {name} must be at least 1", "fix strategy_options.workflow"
                )
        return params


@dataclass
class Tally:
    cycles: int = 0
    clean_streak_history: list[int] = field(default_factory=list)
    issues_reported: int = 0  # raw issues in all reports, before deduplication
    findings_raised: int = 0  # after deduplication, summed over cycles
    findings_refuted: int = 0
    findings_kept: int = 0
    unresolved_findings: int = 0  # findings with no valid skeptic judgement (their cycle is not clean)
    skeptic_calls: int = 0
    analyzer_failures: int = 0
    refuter_failures: int = 0
    inconclusive_cycles: int = 0
    applies: int = 0
    implementer_ok: bool = False
    per_cycle: list[dict[str, Any]] = field(default_factory=list)

    def record(
        self,
        cycle: int,
        seats: int,
        reports: list[Analysis],
        findings: list[Finding],
        survivors: list[Finding],
        unresolved: list[Finding],
        clean: bool,
    ) -> None:
        self.analyzer_failures += seats - len(reports)
        self.issues_reported += sum(len(r.issues) for r in reports)
        self.findings_raised += len(findings)
        self.findings_kept += len(survivors)
        self.unresolved_findings += len(unresolved)
        self.findings_refuted += len(findings) - len(survivors) - len(unresolved)
        self.inconclusive_cycles += len(reports) < majority(seats)
        self.clean_streak_history.append(int(clean))
        self.per_cycle.append(
            {
                "cycle": cycle,
                "reports": len(reports),
                "findings": len(findings),
                "kept": len(survivors),
                "unresolved": len(unresolved),
                "clean": clean,
            }
        )


# --------------------------------------------------------------------------- the workflow


def run(ctx: RunContext) -> StrategyResult:
    params = WorkflowSettings.from_context(ctx)
    rt = Runtime(
        ctx,
        max_calls=params.max_agent_calls,
        max_output_tokens=params.max_output_tokens,
        concurrency=params.concurrency,
        format_retries=params.format_retries,
        retry_steps=params.retry_steps,
    )
    return coding_workflow(rt, ctx.prompts, ctx.task.prompt, params)


def coding_workflow(rt: Runtime, prompts: PromptBook, task: str, p: WorkflowSettings) -> StrategyResult:
    """Implement, then analyze -> refute -> apply until two clean analyses in a row or the cap."""
    tally = Tally()
    outcome, stop_reason, streak = "capped", "cycle-cap", 0
    try:
        rt.phase("implement")
        done = rt.agent(
            task,
            role="implementer",
            tier=TIERS["implementer"],
            permissions=READ_WRITE_EXEC,
            system=prompts.get("implementer"),
            max_steps=p.max_steps,
        )
        tally.implementer_ok = done is not None

        for cycle in range(1, p.max_cycles + 1):
            tally.cycles = cycle
            rt.phase("analyze", f"cycle {cycle}")
            reports = analyze(rt, prompts, task, p, cycle)
            findings = deduplicate(reports)
            survivors: list[Finding] = []
            unresolved: list[Finding] = []
            if findings:
                rt.phase("refute", f"cycle {cycle}: {len(findings)} findings")
                survivors, unresolved = refute(rt, prompts, task, p, cycle, findings, tally)
            # clean: most analyzers reported, and every finding was judged not real
            clean = len(reports) >= majority(p.analyzers) and not survivors and not unresolved
            tally.record(cycle, p.analyzers, reports, findings, survivors, unresolved, clean)
            rt.log(
                f"cycle {cycle}: {len(reports)}/{p.analyzers} reports, {len(findings)} findings, "
                f"{len(survivors)} kept, {len(unresolved)} unresolved -> {'clean' if clean else 'not clean'}"
            )

            if clean:
                streak += 1
                if streak >= p.clean_streak:
                    outcome, stop_reason = "done", "converged-clean"
                    break
                continue
            streak = 0
            if survivors:
                rt.phase("apply", f"cycle {cycle}: {len(survivors)} findings")
                rt.agent(
                    prompts.get("editor_request", task=task, findings=render_findings(survivors)).rstrip(
                        "\n"
                    ),
                    role="editor",
                    tier=TIERS["editor"],
                    permissions=READ_WRITE_EXEC,
                    system=prompts.get("editor"),
                    max_steps=p.max_steps,
                )
                tally.applies += 1
    except BudgetExceeded as exc:  # the run budget (budget), or the workflow's own output budget (capped)
        own = rt.max_output_tokens is not None and rt.output_tokens >= rt.max_output_tokens
        outcome, reason = ("capped", "output-budget") if own else ("budget", "budget")
        stop_reason = f"{reason} ({exc})"  # the key, then which budget (stop_reason_key strips it)
        rt.log(f"stopped: {exc}", ok=False)
    except (CallCapReached, ProviderFailure) as exc:
        reason = "call-cap" if isinstance(exc, CallCapReached) else "provider-failure"
        rt.ctx.counters.update(counters(rt, p, tally, reason))  # the runner records them with the error
        rt.log(f"{reason}; counters so far: {rt.ctx.counters}", ok=False)
        raise

    return StrategyResult(
        outcome=outcome,
        claimed_done=outcome == "done",
        counters=counters(rt, p, tally, stop_reason),
        summary=f"{outcome} after {tally.cycles} cycles ({rt.calls} agent calls): {stop_reason}",
        stop_reason=stop_reason,
    )


def analyze(rt: Runtime, prompts: PromptBook, task: str, p: WorkflowSettings, cycle: int) -> list[Analysis]:
    """The analyzers of one cycle, in parallel; only those that returned a valid report."""

    def one(seat: int) -> Analysis | None:
        message = prompts.get("analyzer_request", cycle=cycle, seat=seat, analyzers=p.analyzers, task=task)
        return rt.agent(
            message.rstrip("\n"),
            Analysis,
            role="analyzer",
            tier=TIERS["analyzer"],
            permissions=READ_EXEC,
            system=prompts.get("analyzer"),
            max_steps=p.max_steps,
        )

    results = rt.parallel([lambda seat=seat: one(seat) for seat in range(1, p.analyzers + 1)])
    return [r for r in results if r is not None]


def refute(
    rt: Runtime,
    prompts: PromptBook,
    task: str,
    p: WorkflowSettings,
    cycle: int,
    findings: list[Finding],
    tally: Tally,
) -> tuple[list[Finding], list[Finding]]:
    """Each finding goes to ``refuters`` independent skeptics (all of them in parallel). A failed
    skeptic (None: no valid judgement) is null, not a vote. A finding is kept when a strict majority of
    its valid judgements confirms it, and unresolved when it has none. Returns (kept, unresolved)."""

    def one(finding: Finding, seat: int) -> Judgement | None:
        message = prompts.get(
            "refuter_request",
            cycle=cycle,
            finding=finding.id,
            seat=seat,
            refuters=p.refuters,
            task=task,
            finding_text=render_findings([finding]),
        )
        return rt.agent(
            message.rstrip("\n"),
            Judgement,
            role="refuter",
            tier=TIERS["refuter"],
            permissions=READ_EXEC,
            system=prompts.get("refuter"),
            max_steps=p.max_steps,
        )

    seats = range(1, p.refuters + 1)
    results = rt.parallel([lambda f=f, s=s: one(f, s) for f in findings for s in seats])
    tally.skeptic_calls += len(results)
    tally.refuter_failures += sum(r is None for r in results)
    kept, unresolved = [], []
    for i, finding in enumerate(findings):
        votes = [v for v in results[i * p.refuters : (i + 1) * p.refuters] if v is not None]
        finding.judgements = len(votes)
        finding.confirmations = sum(v.confirmed for v in votes)
        if not votes:
            unresolved.append(finding)
        elif finding.confirmations >= majority(len(votes)):
            kept.append(finding)
    return kept, unresolved


# --------------------------------------------------------------------------- small helpers


def majority(n: int) -> int:
    """More than half of n."""
    return n // 2 + 1


def normalise(issue: Issue) -> tuple[str, str]:
    """The deduplication key: the file path and the problem text, normalised."""
    path = issue.file.strip().replace("\\", "/").lower()
    while path.startswith("./"):
        path = path[2:]
    problem = " ".join(re.sub(r"[^a-z0-9]+", " ", issue.problem.lower()).split())
    return path, problem


def deduplicate(reports: list[Analysis]) -> list[Finding]:
    """Unique findings of a cycle's reports, numbered from 1, in order of first appearance."""
    found: dict[tuple[str, str], Finding] = {}
    for report in reports:
        for issue in report.issues:
            key = normalise(issue)
            if key in found:
                found[key].raised_by += 1
            else:
                found[key] = Finding(id=len(found) + 1, issue=issue)
    return list(found.values())


def render_findings(findings: list[Finding]) -> str:
    lines = []
    for f in findings:
        i = f.issue
        lines.append(f"[{f.id}] {i.file or '(no file)'} ({i.severity}): {i.problem}")
        if i.suggested_fix:
            lines.append(f"    suggested fix: {i.suggested_fix}")
    return "\n".join(lines)


def counters(rt: Runtime, p: WorkflowSettings, tally: Tally, stop_reason: str) -> dict[str, Any]:
    data = asdict(tally)
    return {**data, **rt.counters(), "stop_reason": stop_reason, "params": asdict(p)}
