"""vibe -- one prompt, one agent, a tool loop (docs/strategies.md, ``## vibe``).

The coder gets a short generic system prompt and the task prompt verbatim, and loops until it
answers without a tool call (it says it is done) or hits the step cap / budget. Its one session is
the whole run, so with a call budget (``limits.max_model_calls``) its step cap derives from it (the
whole budget) unless ``strategy_options.vibe.max_steps`` sets one; otherwise ``limits.max_steps``.
Outcome: ``done``, ``capped`` (its step cap, with budget left) or ``budget`` (the run budget used up).
"""

from __future__ import annotations

from kit.strategies import StrategyResult
from kit.strategies.context import RunContext

ROLE = "coder"
TIER = "cheap"
PERMISSIONS = {"read", "write", "exec"}


def run(ctx: RunContext) -> StrategyResult:
    budget_calls = ctx.calls_left()
    derived = ctx.step_cap() if budget_calls is None else max(1, budget_calls)
    if budget_calls is not None and ctx.task.limits.max_steps:  # the task's own limit still tightens it
        derived = min(derived, ctx.task.limits.max_steps)
    max_steps = ctx.option("max_steps", derived)
    coder = ctx.agent(
        ROLE,
        tier=TIER,
        permissions=PERMISSIONS,
        system_prompt=ctx.prompts.get(ROLE),
        max_steps=max_steps,
    )
    ctx.phase("code")
    result = coder.run(ctx.task.prompt)
    spent = result.outcome == "budget" or (result.outcome == "capped" and ctx.calls_left() == 0)
    return StrategyResult(
        outcome="done" if result.done else ("budget" if spent else "capped"),
        claimed_done=result.done,
        counters={
            "steps": result.steps,
            "max_steps": max_steps,
            "tool_calls": result.tool_calls,
            "format_errors": result.format_errors,
            "stop_reason": result.outcome,
        },
        summary=result.final,
        stop_reason=result.outcome,
    )
