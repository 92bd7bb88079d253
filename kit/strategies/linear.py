"""linear -- one agent walks a fixed skill of N steps in one conversation, no going back (STRATEGIES.md §2).

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

Choices where the spec is silent (written down here, as the style asks):

* outcome: ``done`` after the last step (``budget`` if the budget stopped the skill early);
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
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from kit.agent.toolbox import TOOL_PERMISSION, ToolResult
from kit.errors import ConfigError
from kit.prompts import PROMPTS_DIR
from kit.sandbox.commands import run_command
from kit.strategies import StrategyResult
from kit.strategies.context import RunContext
from kit.tasks.workspace import diff

ROLE = "coder"
TIER = "cheap"
PERMISSIONS = {"read", "write", "exec"}
REVIEWER, REVIEWER_TIER, REVIEWER_PERMISSIONS = "reviewer", "cheap", {"read"}
SKILL_FILE = PROMPTS_DIR / "linear" / "skill.yaml"
MAX_STEPS_PER_STEP = 12
GATE_RETRIES = 2
REVIEWERS = 2
REVIEW_STEPS = 6
MAX_DIFF_CHARS = 12_000
PLAN_FILE = "PLAN.md"
COMPILE_CHECK = "python -m compileall -q ."
RESERVED = ("coder", "task", "step", "reviewer", "review", "gate_failed")  # prompt files that are not steps
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
    gate: bool = Field(False, description="After this step the kit runs the gate; a failure sends it back.")
    audit: bool = Field(False, description="Before this step reviewer subagents review the diff.")


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


class Skill(BaseModel):
    model_config = ConfigDict(extra="forbid")
    steps: list[Step] = Field(min_length=1)


def run(ctx: RunContext) -> StrategyResult:
    steps = load_steps(ctx)
    explicit_cap = ctx.option("max_steps_per_step", None)
    plan_file = ctx.option("plan_file", PLAN_FILE)
    gate_commands = list(ctx.option("gate_commands", [COMPILE_CHECK, ctx.task.test_command]))
    gate_retries = int(ctx.option("gate_retries", GATE_RETRIES))
    reviewers = int(ctx.option("reviewers", REVIEWERS))
    review_steps = int(ctx.option("review_steps", REVIEW_STEPS))
    placeholders = {"task": ctx.task.prompt, "plan_file": plan_file, "test_command": ctx.task.test_command}
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
    finish = FINISH_HOW[coder.mode]

    per_step: list[dict[str, Any]] = []
    review_calls = reviewer_failures = 0
    last = None
    for number, (step, body) in enumerate(zip(steps, bodies, strict=True), start=1):
        if last is not None and last.outcome == "budget":
            per_step.append(_entry(step, "not_run", "the run's budget is used up"))
            ctx.recorder.event("step", ROLE, step.name, "not run: budget used up", ok=False)
            continue
        ctx.phase(step.name, step.title or step.name)
        cap = step_cap(ctx, explicit_cap, len(steps) - number + 1)
        findings: list[ReviewIssue] = []
        if step.audit:
            findings, calls, failures = audit(ctx, reviewers, min(review_steps, cap))
            review_calls, reviewer_failures = review_calls + calls, reviewer_failures + failures
            cap = step_cap(ctx, explicit_cap, len(steps) - number + 1)  # the reviewers spent some
            body = body.strip() + "\n\n" + render_findings(findings)
        message = ctx.prompts.get(
            "step", number=number, total=len(steps), title=step.title or step.name, body=body.strip(),
            finish=finish,
        )  # fmt: skip
        if number == 1:
            message = (
                ctx.prompts.get("task", task=ctx.task.prompt, total=len(steps)).strip() + "\n\n" + message
            )
        tally.start_step()
        before = diff(ctx.workspace)
        last = coder.run(message, max_steps=cap)
        usage = {"steps": last.steps, "tool_calls": last.tool_calls, "format_errors": last.format_errors}
        gate, sent_back = None, 0
        if step.gate and last.outcome != "budget":
            gate = run_gate(ctx, step, gate_commands)
            while not gate[0] and sent_back < gate_retries and usage["steps"] < cap:
                sent_back += 1  # the step comes back: same conversation, what is left of its cap
                again = ctx.prompts.get("gate_failed", detail=gate[1], finish=finish)
                last = coder.run(again, max_steps=cap - usage["steps"])
                for k in usage:
                    usage[k] += getattr(last, k)
                if last.outcome == "budget":
                    break
                gate = run_gate(ctx, step, gate_commands)
        changed = diff(ctx.workspace) != before
        needs = [*step.needs, "write"] if findings and "write" not in step.needs else step.needs
        outcome, detail = judge(step.model_copy(update={"needs": needs}), last.outcome, tally, changed, gate)
        entry = _entry(step, outcome, detail)
        entry.update(usage, cap=cap, gate=None if gate is None else gate[0], gate_sent_back=sent_back)
        if step.audit:
            entry["findings"] = len(findings)
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
            "gate_sent_back": sum(e["gate_sent_back"] for e in per_step),
            "review_findings": sum(e.get("findings", 0) for e in per_step),
            "reviewer_failures": reviewer_failures,
            "per_step": per_step,
            "model_calls": sum(e["steps"] for e in per_step) + review_calls,
            "review_calls": review_calls,
            "tool_calls": sum(e["tool_calls"] for e in per_step),
            "format_errors": sum(e["format_errors"] for e in per_step),
            "params": {
                "max_steps_per_step": explicit_cap
                or (MAX_STEPS_PER_STEP if ctx.calls_left() is None else None),
                "step_cap_from": "option"
                if explicit_cap
                else ("default" if ctx.calls_left() is None else "run budget (calls left // steps left)"),
                "steps": [s.name for s in steps],
                "plan_file": plan_file,
                "gate_commands": gate_commands,
                "gate_retries": gate_retries,
                "reviewers": reviewers,
                "review_steps": review_steps,
                "action_mode": coder.mode,
                "tier": coder.config.tier,
            },
        },
        summary=last.final if last is not None else "",
    )


def step_cap(ctx: RunContext, explicit: int | None, steps_left: int) -> int:
    """Model calls this step may use: the option if given, else a fair share of the run budget's
    calls left (at least 1), else the default of 12."""
    if explicit:
        return int(explicit)
    left = ctx.calls_left()
    if left is None:
        return MAX_STEPS_PER_STEP
    return max(1, left // steps_left)


# --------------------------------------------------------------------------- the audit


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
