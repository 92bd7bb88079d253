"""linear's audit: before a step marked ``audit``, read-only reviewer subagents review the diff; their
findings go into the step's message. See docs/strategies.md, ``## linear``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, field_validator

from kit.strategies.context import RunContext
from kit.tasks.workspace import diff

REVIEWER, REVIEWER_TIER, REVIEWER_PERMISSIONS = "reviewer", "cheap", {"read"}
MAX_DIFF_CHARS = 12_000


class ReviewIssue(BaseModel):
    file: str = ""
    problem: str
    severity: str = "major"

    @field_validator("severity", mode="before")
    @classmethod
    def _severity(cls, value: Any) -> str:
        text = str(value or "").strip().lower()
        return text if text in ("critical", "major", "minor") else "major"


class Review(BaseModel):
    """A reviewer's report."""

    issues: list[ReviewIssue] = Field(default_factory=list)


def audit(ctx: RunContext, reviewers: int, max_steps: int) -> tuple[list[ReviewIssue], int, int]:
    """``reviewers`` read-only reviewer subagents, one after the other, each on the diff.
    Returns (all their findings, their model calls, how many gave no valid report)."""
    change = diff(ctx.workspace)
    if len(change) > MAX_DIFF_CHARS:
        change = change[:MAX_DIFF_CHARS] + "\n[... diff shortened ...]"
    findings: list[ReviewIssue] = []
    calls = failures = 0
    for seat in range(1, reviewers + 1):
        reviewer = ctx.agent(
            REVIEWER,
            tier=REVIEWER_TIER,
            permissions=REVIEWER_PERMISSIONS,
            system_prompt=ctx.prompts.get(REVIEWER),
            max_steps=max_steps,
            result_schema=Review,
            conversation=f"{REVIEWER}#{seat}",
        )
        message = ctx.prompts.get(
            "review", seat=seat, reviewers=reviewers, task=ctx.task.prompt, diff=change or "(no change yet)"
        )
        result = reviewer.run(message)
        calls += result.steps
        if result.outcome == "done" and isinstance(result.result, Review):
            findings += result.result.issues
        else:
            failures += 1
        ctx.recorder.event(
            "note", REVIEWER, "review", f"reviewer {seat}: {result.outcome}, "
            f"{len(result.result.issues) if isinstance(result.result, Review) else 0} findings",
            ok=result.outcome == "done",
        )  # fmt: skip
        if result.outcome == "budget":
            break
    return findings, calls, failures


def render_findings(findings: list[ReviewIssue]) -> str:
    if not findings:
        return "The reviewers found no problems."
    lines = [f"Findings of the reviewers ({len(findings)}):"]
    lines += [f"{i}. {f.file or '(no file)'} ({f.severity}): {f.problem}" for i, f in enumerate(findings, 1)]
    return "\n".join(lines)
