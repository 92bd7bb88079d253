"""linear -- one agent walks a fixed skill of N steps in one conversation, no going back
(docs/strategies.md, ``## linear``).

The skill is ``kit/prompts/linear/skill.yaml``: an ordered list of steps, each with a prompt file
``kit/prompts/linear/<name>.md`` (overridable per experiment as ``prompt_overrides["linear/<name>"]``).
The default eight: restate requirements and acceptance criteria -> find the relevant code -> write a
plan file -> implement -> build/test check (the gate) -> audit by two reviewers -> write tests ->
update docs/changelog. An experiment may replace the list with ``strategy_options.linear.steps``
(names from skill.yaml, or ``{name, title, needs, gate, audit}`` objects for new steps whose prompt
comes from a file or a prompt override).

The loop: one ``coder`` (tier cheap, read + write + exec) and ONE conversation. Each step is one user
turn (the first also carries the task prompt); within it the agent may act up to its per-step cap of
model calls. The kit never re-sends an earlier step, and the frame of every step says the earlier
ones are closed. After each step the kit records how it ended -- a "step" event and one entry of
``counters["per_step"]`` -- and goes on to the next step whatever happened:

* ``done``          the agent ended the step by itself and did what the step needs;
* ``skipped``       it ended the step by itself without doing what the step needs (``needs`` in
                    skill.yaml: ``read`` = a read tool or a command ran, ``write`` = the clone's files
                    changed during the step, ``exec`` = a command ran);
* ``capped``        it used all of the step's calls without ending the step;
* ``format_errors`` it stopped after too many invalid actions in a row;
* ``gate_failed``   on a gate step: the gate still fails after the step was sent back;
* ``budget``        the run budget ran out; the remaining steps are ``not_run`` (every call would be
                    refused, so sending them would only add empty turns).

The gate (enforced). After a step marked ``gate: true`` (the build check) the kit itself runs
``gate_commands`` in the clone -- by default ``python -m compileall -q .`` and the task's
``test_command`` -- and records a "gate" event; all must exit 0. A failed gate sends the step back:
the coder gets the failing output as a new turn of the same step and works on, within what is left
of the step's cap, at most ``gate_retries`` times (2); the gate runs again after each. Only the
current step comes back -- never an earlier one.

The audit (as the skill describes it). Before a step marked ``audit: true``, ``reviewers`` (2)
``reviewer`` subagents -- each a fresh conversation, read-only tools, tier cheap -- review the diff
against the task and return ``{issues: [{file, problem, severity}]}``. Their findings are appended to
the step's message, so the coder addresses them in that step; a step with findings needs a write.

Budget. The run budget (``limits.max_model_calls`` / ``max_usd`` / ``max_tokens``) bounds the whole
skill, reviewers included. The per-step cap derives from it: without an explicit
``max_steps_per_step``, a step gets ``calls left // steps left`` (at least 1), so unused calls flow
to later steps; with no call budget the default is 12.

Options (``strategy_options.linear``): ``max_steps_per_step``, ``plan_file`` ("PLAN.md"),
``gate_commands`` (see above), ``gate_retries`` (2), ``reviewers`` (2), ``review_steps`` (6),
``steps`` (the step list, see above), ``skill`` (another skill.yaml). All effective values land in
``counters["params"]``.

Choices where the source skill is silent (also in docs/strategies.md, ``## Where the kit chooses``):

* outcome: ``done`` after the last step (stop reason ``last-step``), ``budget`` if the budget stopped
  the skill early (stop reason ``budget``);
* claimed_done: the agent ended the LAST step by itself (it said it was done, as vibe counts it),
  whatever happened to the earlier steps -- the per-step outcomes carry the rest;
* the step cap counts model calls (as ``Agent.run(max_steps=...)`` does), not tool calls; the
  gate's send-backs count against it;
* reviewers see the diff in their message and get only the read tools (no exec: a reviewer's
  command could change the clone); a reviewer without a valid report counts in
  ``reviewer_failures`` and adds no finding. Their calls count in ``model_calls``;
* a step ended by the agent is judged only by ``needs``; the quality of what it did is the scorer's job.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from kit.agent.loop import Agent, AgentResult
from kit.agent.toolbox import TOOL_PERMISSION, ToolResult
from kit.paths import STRATEGY_FILES
from kit.sandbox.commands import run_command
from kit.strategies import StrategyResult
from kit.strategies.context import RunContext
from kit.strategies.linear.audit import REVIEWER, REVIEWER_TIER, Review, ReviewIssue, audit, render_findings
from kit.strategies.linear.skill import SKILL_FILE, Skill, Step, load_steps
from kit.tasks.workspace import diff

__all__ = [
    "COMPILE_CHECK",
    "REVIEWER",
    "REVIEWER_TIER",
    "ROLE",
    "SKILL_FILE",
    "TIER",
    "Review",
    "ReviewIssue",
    "Skill",
    "Step",
    "run",
]

ROLE = "coder"
TIER = "cheap"
PERMISSIONS = {"read", "write", "exec"}
MAX_STEPS_PER_STEP = 12
GATE_RETRIES = 2
REVIEWERS = 2
REVIEW_STEPS = 6
PLAN_FILE = STRATEGY_FILES["linear"]["plan_file"]  # "PLAN.md" (kit.paths.STRATEGY_FILES: not scored)
COMPILE_CHECK = "python -m compileall -q ."
READ_TOOLS = [t for t, p in TOOL_PERMISSION.items() if p == "read"]

#: How the agent ends a step, per action mode (fills ``$finish`` in step.md).
FINISH_HOW = {
    "native": "reply with a one-line summary and no tool call",
    "json": 'reply {"thought": "...", "tool": "finish", "args": {"summary": "<one line>"}}',
    "text": "reply with a one-line summary and the word DONE, with no block",
}


@dataclass
class Walk:
    """One run's skill: its steps and prompt bodies, the effective options, the coder and its tool tally."""

    steps: list[Step]
    bodies: list[str]
    explicit_cap: int | None
    plan_file: str
    gate_commands: list[str]
    gate_retries: int
    reviewers: int
    review_steps: int
    coder: Agent
    tally: _ToolTally
    review_calls: int = 0
    reviewer_failures: int = 0

    @property
    def finish(self) -> str:
        return FINISH_HOW[self.coder.mode]


def run(ctx: RunContext) -> StrategyResult:
    """Every step of the skill once, in order, in one conversation; a spent budget skips the rest."""
    walk = prepare(ctx)
    per_step: list[dict[str, Any]] = []
    last = None
    for number, (step, body) in enumerate(zip(walk.steps, walk.bodies, strict=True), start=1):
        if last is not None and last.outcome == "budget":
            per_step.append(_entry(step, "not_run", "the run's budget is used up"))
            ctx.recorder.event("step", ROLE, step.name, "not run: budget used up", ok=False)
            continue
        last, entry = one_step(ctx, walk, number, step, body)
        per_step.append(entry)
    outcomes = Counter(e["outcome"] for e in per_step)
    spent = outcomes["budget"] or outcomes["not_run"]
    stop_reason = "budget" if spent else "last-step"
    return StrategyResult(
        outcome="budget" if spent else "done",
        claimed_done=per_step[-1]["ended_by_agent"],
        counters={**counters(ctx, walk, per_step), "stop_reason": stop_reason},
        summary=last.final if last is not None else "",
        stop_reason=stop_reason,
    )


def prepare(ctx: RunContext) -> Walk:
    """The steps and options; the coder, whose toolbox is wrapped to count the tools of each step."""
    steps = load_steps(ctx)
    explicit_cap = ctx.option("max_steps_per_step", None)
    plan_file = ctx.option("plan_file", PLAN_FILE)
    placeholders = {"task": ctx.task.prompt, "plan_file": plan_file, "test_command": ctx.task.test_command}
    gate_commands = list(ctx.option("gate_commands", [COMPILE_CHECK, ctx.task.test_command]))
    gate_retries = int(ctx.option("gate_retries", GATE_RETRIES))
    reviewers = int(ctx.option("reviewers", REVIEWERS))
    review_steps = int(ctx.option("review_steps", REVIEW_STEPS))
    bodies = [ctx.prompts.get(s.name, **placeholders) for s in steps]  # a missing prompt fails up front
    coder = ctx.agent(
        ROLE,
        tier=TIER,
        permissions=PERMISSIONS,
        system_prompt=ctx.prompts.get(ROLE),
        max_steps=explicit_cap or MAX_STEPS_PER_STEP,
    )
    tally = _ToolTally(coder.toolbox)
    coder.toolbox = tally  # counts which tools ran in each step (for `needs`)
    return Walk(
        steps,
        bodies,
        explicit_cap,
        plan_file,
        gate_commands,
        gate_retries,
        reviewers,
        review_steps,
        coder,
        tally,
    )


def one_step(
    ctx: RunContext, walk: Walk, number: int, step: Step, body: str
) -> tuple[AgentResult, dict[str, Any]]:
    """One step: the audit before it (if marked), one user turn, the gate after it (if marked); the
    last agent result and the step's ``per_step`` entry."""
    ctx.phase(step.name, step.title or step.name)
    steps_left = len(walk.steps) - number + 1
    cap = step_cap(ctx, walk.explicit_cap, steps_left)
    findings: list[ReviewIssue] = []
    if step.audit:
        findings, calls, failures = audit(ctx, walk.reviewers, min(walk.review_steps, cap))
        walk.review_calls, walk.reviewer_failures = (
            walk.review_calls + calls,
            walk.reviewer_failures + failures,
        )
        cap = step_cap(ctx, walk.explicit_cap, steps_left)  # the reviewers spent some
        body = body.strip() + "\n\n" + render_findings(findings)
    message = ctx.prompts.get(
        "step", number=number, total=len(walk.steps), title=step.title or step.name, body=body.strip(),
        finish=walk.finish,
    )  # fmt: skip
    if number == 1:
        message = (
            ctx.prompts.get("task", task=ctx.task.prompt, total=len(walk.steps)).strip() + "\n\n" + message
        )
    walk.tally.start_step()
    before = diff(ctx.workspace)
    last = walk.coder.run(message, max_steps=cap)
    usage = {"steps": last.steps, "tool_calls": last.tool_calls, "format_errors": last.format_errors}
    gate, sent_back = None, 0
    if step.gate and last.outcome != "budget":
        last, gate, sent_back = gated(ctx, walk, step, cap, usage, last)
    changed = diff(ctx.workspace) != before
    needs = [*step.needs, "write"] if findings and "write" not in step.needs else step.needs
    outcome, detail = judge(step.model_copy(update={"needs": needs}), last.outcome, walk.tally, changed, gate)
    entry = _entry(step, outcome, detail)
    entry.update(usage, cap=cap, gate=None if gate is None else gate[0], gate_sent_back=sent_back)
    if step.audit:
        entry["findings"] = len(findings)
    ctx.recorder.event("step", ROLE, step.name, f"{outcome}: {detail}"[:300], ok=outcome == "done")
    return last, entry


def gated(
    ctx: RunContext, walk: Walk, step: Step, cap: int, usage: dict[str, int], last: AgentResult
) -> tuple[AgentResult, tuple[bool, str], int]:
    """The gate after a gate step; a failure sends the step back (same conversation, what is left of
    its cap, at most ``gate_retries`` times). Adds the send-backs' usage to ``usage``; returns the
    last agent result, the last gate result and how often the step was sent back."""
    gate = run_gate(ctx, step, walk.gate_commands)
    sent_back = 0
    while not gate[0] and sent_back < walk.gate_retries and usage["steps"] < cap:
        sent_back += 1
        again = ctx.prompts.get("gate_failed", detail=gate[1], finish=walk.finish)
        last = walk.coder.run(again, max_steps=cap - usage["steps"])
        for k in usage:
            usage[k] += getattr(last, k)
        if last.outcome == "budget":
            break
        gate = run_gate(ctx, step, walk.gate_commands)
    return last, gate, sent_back


def counters(ctx: RunContext, walk: Walk, per_step: list[dict[str, Any]]) -> dict[str, Any]:
    """linear's run.json counters (docs/strategies.md, ``## linear``)."""
    outcomes = Counter(e["outcome"] for e in per_step)
    gates = [e["gate"] for e in per_step if e["gate"] is not None]
    no_budget = ctx.calls_left() is None
    return {
        "steps_total": len(walk.steps),
        "steps_done": outcomes["done"],
        "steps_capped": outcomes["capped"],
        "steps_skipped": outcomes["skipped"],
        "steps_failed": outcomes["format_errors"] + outcomes["gate_failed"] + outcomes["budget"],
        "steps_not_run": outcomes["not_run"],
        "gate_passed": all(gates) if gates else None,
        "gate_sent_back": sum(e["gate_sent_back"] for e in per_step),
        "review_findings": sum(e.get("findings", 0) for e in per_step),
        "reviewer_failures": walk.reviewer_failures,
        "per_step": per_step,
        "model_calls": sum(e["steps"] for e in per_step) + walk.review_calls,
        "review_calls": walk.review_calls,
        "tool_calls": sum(e["tool_calls"] for e in per_step),
        "format_errors": sum(e["format_errors"] for e in per_step),
        "params": {
            "max_steps_per_step": walk.explicit_cap or (MAX_STEPS_PER_STEP if no_budget else None),
            "step_cap_from": "option"
            if walk.explicit_cap
            else ("default" if no_budget else "run budget (calls left // steps left)"),
            "steps": [s.name for s in walk.steps],
            "plan_file": walk.plan_file,
            "gate_commands": walk.gate_commands,
            "gate_retries": walk.gate_retries,
            "reviewers": walk.reviewers,
            "review_steps": walk.review_steps,
            "action_mode": walk.coder.mode,
            "tier": walk.coder.config.tier,
        },
    }


def step_cap(ctx: RunContext, explicit: int | None, steps_left: int) -> int:
    """Model calls this step may use: the option if given, else a fair share of the run budget's
    calls left (at least 1), else the default of 12."""
    if explicit:
        return int(explicit)
    left = ctx.calls_left()
    if left is None:
        return MAX_STEPS_PER_STEP
    return max(1, left // steps_left)


# --------------------------------------------------------------------------- judging a step


def run_gate(ctx: RunContext, step: Step, commands: list[str]) -> tuple[bool, str]:
    """The kit's own check after a gate step: every command must exit 0. Records one "gate" event."""
    results = []
    for command in commands:
        res = run_command(
            command,
            ctx.workspace.root,
            timeout_s=ctx.limits.command_timeout_s,
            sandbox=ctx.sandbox,
            env=ctx.command_env(),
            neutral=True,  # its output reaches the agent: the agent's view
        )
        last_line = next((ln for ln in reversed(res.output.strip().splitlines()) if ln.strip()), "")
        code = "timeout" if res.timed_out else res.exit_code
        results.append(
            (res.exit_code == 0 and not res.timed_out, f"{command} -> exit {code}: {last_line[:120]}")
        )
    passed = all(ok for ok, _ in results)
    detail = "; ".join(text for _, text in results)
    ctx.recorder.event("gate", "", step.name, detail[:300], ok=passed)
    return passed, detail


def judge(
    step: Step, agent_outcome: str, tally: _ToolTally, changed: bool, gate: tuple[bool, str] | None
) -> tuple[str, str]:
    """(outcome, detail) of one step; see the module docstring for the outcomes."""
    did = tally.summary()
    if agent_outcome != "done":
        return agent_outcome, f"the agent did not end the step ({agent_outcome}); {did}"
    if gate is not None and not gate[0]:
        return "gate_failed", f"gate failed: {gate[1]}"
    missing = [
        need
        for need in step.needs
        if (need == "write" and not changed)
        or (need == "exec" and not tally.ran("run"))
        or (need == "read" and not tally.read_something())
    ]
    if missing:
        return "skipped", f"ended without the step's {'/'.join(missing)}; {did}"
    return "done", did


def _entry(step: Step, outcome: str, detail: str) -> dict[str, Any]:
    return {
        "name": step.name,
        "outcome": outcome,
        "ended_by_agent": outcome in ("done", "skipped", "gate_failed"),
        "steps": 0,
        "tool_calls": 0,
        "format_errors": 0,
        "cap": 0,
        "gate": None,
        "gate_sent_back": 0,
        "detail": detail[:300],
    }


class _ToolTally:
    """Wraps the coder's toolbox to count which tools were executed (not denied) in the current step."""

    def __init__(self, toolbox: Any) -> None:
        self._toolbox = toolbox
        self.counts: Counter[str] = Counter()  # executed calls per tool
        self.succeeded: Counter[str] = Counter()  # of which ok

    def __getattr__(self, name: str) -> Any:
        return getattr(self._toolbox, name)

    def execute(self, name: str, args: dict) -> ToolResult:
        result = self._toolbox.execute(name, args)
        if not result.denied and name in TOOL_PERMISSION:
            self.counts[name] += 1
            self.succeeded[name] += result.ok
        return result

    def start_step(self) -> None:
        self.counts.clear()
        self.succeeded.clear()

    def ran(self, *names: str) -> bool:
        return any(self.counts[n] for n in names)

    def read_something(self) -> bool:
        """A read tool succeeded, or a command ran (in text mode the agent reads with cat/grep)."""
        return self.ran("run") or any(self.succeeded[n] for n in READ_TOOLS)

    def summary(self) -> str:
        return ", ".join(f"{n} x{c}" for n, c in sorted(self.counts.items())) or "no tool calls"
