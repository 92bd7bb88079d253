"""vibe -- one prompt, one agent, a tool loop (STRATEGIES.md §1).

The coder gets a short generic system prompt and the task prompt verbatim, and loops until it
answers without a tool call (it says it is done) or hits the step cap / budget.
Outcome: ``done``, ``capped`` (its step cap) or ``budget`` (the run budget used up).
"""

from __future__ import annotations

from kit.context import RunContext
from kit.strategies import StrategyResult

ROLE = "coder"
TIER = "cheap"
PERMISSIONS = {"read", "write", "exec"}


def run(ctx: RunContext) -> StrategyResult:
    max_steps = ctx.option("max_steps", ctx.step_cap())
    coder = ctx.agent(
        ROLE,
        tier=TIER,
        permissions=PERMISSIONS,
        system_prompt=ctx.prompts.get(ROLE),
        max_steps=max_steps,
    )
    ctx.phase("code")
    result = coder.run(ctx.task.prompt)
    return StrategyResult(
        outcome="done" if result.done else ("budget" if result.outcome == "budget" else "capped"),
        claimed_done=result.done,
        counters={
            "steps": result.steps,
            "max_steps": max_steps,
            "tool_calls": result.tool_calls,
            "format_errors": result.format_errors,
            "stop_reason": result.outcome,
        },
        summary=result.final,
    )
