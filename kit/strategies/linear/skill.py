"""linear's skill: the ordered steps (kit/prompts/linear/skill.yaml, or the experiment's ``steps``
option). See docs/strategies.md, ``## linear``."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kit.errors import ConfigError
from kit.prompts import PROMPTS_DIR
from kit.strategies.context import RunContext

SKILL_FILE = PROMPTS_DIR / "linear" / "skill.yaml"
RESERVED = ("coder", "task", "step", "reviewer", "review", "gate_failed")  # prompt files that are not steps

Need = Literal["read", "write", "exec"]


class Step(BaseModel):
    """One step of the skill."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(description="Prompt file kit/prompts/linear/<name>.md; override key linear/<name>.")
    title: str = Field("", description="Header line of the step's message; defaults to the name.")
    needs: list[Need] = Field(default_factory=list, description="What the step must do to count as done.")
    gate: bool = Field(False, description="After this step the kit runs the gate; a failure sends it back.")
    audit: bool = Field(False, description="Before this step reviewer subagents review the diff.")


class Skill(BaseModel):
    model_config = ConfigDict(extra="forbid")
    steps: list[Step] = Field(min_length=1)


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
