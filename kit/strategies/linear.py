"""linear -- one agent walks a fixed skill of N steps in one conversation, no going back (STRATEGIES.md §2).

The skill is ``kit/prompts/linear/skill.yaml``: an ordered list of steps, each with a prompt file
``kit/prompts/linear/<name>.md`` (overridable per experiment as ``prompt_overrides["linear/<name>"]``).
The default eight: restate requirements and acceptance criteria -> find the relevant code -> write a
plan file -> implement -> build/compile check (the only gate) -> self-audit of the diff -> write tests
-> update docs/changelog. An experiment may replace the list with ``strategy_options.linear.steps``
(names from skill.yaml, or ``{name, title, needs, gate}`` objects for new steps whose prompt comes
from a file or a prompt override).

The loop: one ``coder`` (tier cheap, read + write + exec) and ONE conversation. Each step is one user
turn (the first also carries the task prompt); within it the agent may act up to
``max_steps_per_step`` model calls. The kit never re-sends an earlier step, and the frame of every
step says the earlier ones are closed. After each step the kit records how it ended -- a "step"
event and one entry of ``counters["per_step"]`` -- and goes on to the next step whatever happened:

* ``done``          the agent ended the step by itself and did what the step needs;
* ``skipped``       it ended the step by itself without doing what the step needs (``needs`` in
                    skill.yaml: ``read`` = a read tool or a command ran, ``write`` = the clone's files
                    changed during the step, ``exec`` = a command ran);
* ``capped``        it used all ``max_steps_per_step`` calls without ending the step;
* ``format_errors`` it stopped after too many invalid actions in a row;
* ``gate_failed``   on a gate step: the agent ended the step but the kit's own check failed;
* ``budget``        the run's token/USD budget ran out; the remaining steps are ``not_run`` (every
                    call would be refused, so sending them would only add empty turns).

The gate: after a step marked ``gate: true`` (the build check) the kit itself runs
``gate_commands`` in the clone -- by default ``python -m compileall -q .`` and the task's
``test_command`` -- and records a "gate" event; all must exit 0. The gate is recorded, not enforced:
a linear skill has no way back, so the next step runs either way (the result is not told to the
agent; it saw its own command output in the step).

Options (``strategy_options.linear``): ``max_steps_per_step`` (12), ``plan_file`` ("PLAN.md"),
``gate_commands`` (see above), ``steps`` (the step list, see above), ``skill`` (another skill.yaml).
All effective values land in ``counters["params"]``.

Choices where the spec is silent (written down here, as the style asks):

* outcome: ``done`` after the last step (``budget`` if the budget stopped the skill early);
* claimed_done: the agent ended the LAST step by itself (it said it was done, as vibe counts it),
  whatever happened to the earlier steps -- the per-step outcomes carry the rest;
* the step cap counts model calls (as ``Agent.run(max_steps=...)`` does), not tool calls;
* a step ended by the agent is judged only by ``needs``; the quality of what it did is the scorer's job.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kit.commands import run_command
from kit.context import RunContext
from kit.errors import ConfigError
from kit.prompts import PROMPTS_DIR
from kit.strategies import StrategyResult
from kit.tools import TOOL_PERMISSION, ToolResult
from kit.workspace import diff

ROLE = "coder"
TIER = "cheap"
PERMISSIONS = {"read", "write", "exec"}
SKILL_FILE = PROMPTS_DIR / "linear" / "skill.yaml"
MAX_STEPS_PER_STEP = 12
PLAN_FILE = "PLAN.md"
COMPILE_CHECK = "python -m compileall -q ."
RESERVED = ("coder", "task", "step")  # prompt files that are not steps
READ_TOOLS = [t for t, p in TOOL_PERMISSION.items() if p == "read"]

#: How the agent ends a step, per action mode (fills ``$finish`` in step.md).
FINISH_HOW = {
    "native": "reply with a one-line summary and no tool call",
    "json": 'reply {"thought": "...", "tool": "finish", "args": {"summary": "<one line>"}}',
    "text": "reply with a one-line summary and the word DONE, with no block",
}

Need = Literal["read", "write", "exec"]


class Step(BaseModel):
    """One step of the skill."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(description="Prompt file kit/prompts/linear/<name>.md; override key linear/<name>.")
    title: str = Field("", description="Header line of the step's message; defaults to the name.")
    needs: list[Need] = Field(default_factory=list, description="What the step must do to count as done.")
    gate: bool = Field(False, description="After this step the kit runs the gate commands itself.")


class Skill(BaseModel):
    model_config = ConfigDict(extra="forbid")
    steps: list[Step] = Field(min_length=1)


def run(ctx: RunContext) -> StrategyResult:
    steps = load_steps(ctx)
    cap = int(ctx.option("max_steps_per_step", MAX_STEPS_PER_STEP))
    plan_file = ctx.option("plan_file", PLAN_FILE)
    gate_commands = list(ctx.option("gate_commands", [COMPILE_CHECK, ctx.task.test_command]))
    placeholders = {"task": ctx.task.prompt, "plan_file": plan_file, "test_command": ctx.task.test_command}
    bodies = [ctx.prompts.get(s.name, **placeholders) for s in steps]  # a missing prompt fails up front

    coder = ctx.agent(
        ROLE, tier=TIER, permissions=PERMISSIONS, system_prompt=ctx.prompts.get(ROLE), max_steps=cap
    )
    tally = _ToolTally(coder.toolbox)
    coder.toolbox = tally  # counts which tools ran in each step (for `needs`)
    finish = FINISH_HOW[coder.mode]

    per_step: list[dict[str, Any]] = []
    last = None
    for number, (step, body) in enumerate(zip(steps, bodies, strict=True), start=1):
        if last is not None and last.outcome == "budget":
            per_step.append(_entry(step, "not_run", "the run's budget is used up"))
            ctx.recorder.event("step", ROLE, step.name, "not run: budget used up", ok=False)
            continue
        ctx.phase(step.name, step.title or step.name)
        message = ctx.prompts.get(
            "step", number=number, total=len(steps), title=step.title or step.name, body=body.strip(),
            finish=finish,
        )  # fmt: skip
        if number == 1:
            message = (
                ctx.prompts.get("task", task=ctx.task.prompt, total=len(steps)).strip() + "\n\n" + message
            )
        tally.start_step()
        before = diff(ctx.workspace) if "write" in step.needs else ""
        last = coder.run(message, max_steps=cap)
        changed = "write" in step.needs and diff(ctx.workspace) != before
        gate = run_gate(ctx, step, gate_commands) if step.gate else None

        outcome, detail = judge(step, last.outcome, tally, changed, gate)
        entry = _entry(step, outcome, detail)
        entry.update(steps=last.steps, tool_calls=last.tool_calls, format_errors=last.format_errors)
        entry["gate"] = None if gate is None else gate[0]
        per_step.append(entry)
        ctx.recorder.event("step", ROLE, step.name, f"{outcome}: {detail}"[:300], ok=outcome == "done")

    outcomes = Counter(e["outcome"] for e in per_step)
    gates = [e["gate"] for e in per_step if e["gate"] is not None]
    return StrategyResult(
        outcome="budget" if outcomes["budget"] or outcomes["not_run"] else "done",
        claimed_done=per_step[-1]["ended_by_agent"],
        counters={
            "steps_total": len(steps),
            "steps_done": outcomes["done"],
            "steps_capped": outcomes["capped"],
            "steps_skipped": outcomes["skipped"],
            "steps_failed": outcomes["format_errors"] + outcomes["gate_failed"] + outcomes["budget"],
            "steps_not_run": outcomes["not_run"],
            "gate_passed": all(gates) if gates else None,
            "per_step": per_step,
            "model_calls": sum(e["steps"] for e in per_step),
            "tool_calls": sum(e["tool_calls"] for e in per_step),
            "format_errors": sum(e["format_errors"] for e in per_step),
            "params": {
                "max_steps_per_step": cap,
                "steps": [s.name for s in steps],
                "plan_file": plan_file,
                "gate_commands": gate_commands,
                "action_mode": coder.mode,
                "tier": coder.config.tier,
            },
        },
        summary=last.final if last is not None else "",
    )


# --------------------------------------------------------------------------- the skill


def load_steps(ctx: RunContext) -> list[Step]:
    """The skill's steps: skill.yaml, or the experiment's ``steps`` option (names or step objects)."""
    skill = _read_skill(Path(ctx.option("skill", SKILL_FILE)))
    chosen = ctx.option("steps", None)
    if chosen is None:
        steps = skill.steps
    else:
        known = {s.name: s for s in skill.steps}
        steps = []
        for item in chosen:
            if isinstance(item, str):
                item = known[item].model_dump() if item in known else {"name": item}
            try:
                steps.append(Step.model_validate(item))
            except ValidationError as e:
                raise ConfigError(f"strategy_options.linear.steps: bad step {item!r}: {e}") from None
        if not steps:
            raise ConfigError("strategy_options.linear.steps is empty", "list at least one step")
    clash = [s.name for s in steps if s.name in RESERVED]
    if clash:
        raise ConfigError(
            f"linear step names {clash} clash with the prompts {', '.join(RESERVED)}", "rename them"
        )
    return steps


def _read_skill(path: Path) -> Skill:
    try:
        return Skill.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
    except (OSError, yaml.YAMLError, ValidationError) as e:
        raise ConfigError(
            f"cannot read the linear skill {path}: {e}", "see kit/prompts/linear/skill.yaml"
        ) from None


# --------------------------------------------------------------------------- judging a step


def run_gate(ctx: RunContext, step: Step, commands: list[str]) -> tuple[bool, str]:
    """The kit's own check after a gate step: every command must exit 0. Records one "gate" event."""
    results = []
    for command in commands:
        res = run_command(
            command, ctx.workspace.root, timeout_s=ctx.limits.command_timeout_s, sandbox=ctx.sandbox
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
        "gate": None,
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
