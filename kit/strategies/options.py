"""Each strategy's options (the experiment's ``strategy_options``) as a model that forbids unknown keys,
and the check of an experiment's strategy settings before any run: options, ``prompt_overrides``
names and ``tiers`` roles, each typo one ConfigError with a "did you mean" suggestion.

The models declare the names, types, defaults and meanings (``docs/experiments.md`` is generated from
them); the strategies still read their options from ``RunContext.options`` with the same defaults.
``tests/strategies/test_options.py`` keeps the two in step: every option a strategy reads is declared
here (pdca's are :class:`~kit.strategies.pdca.settings.PdcaSettings`' fields, taken from it).
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from kit.config import Experiment
from kit.errors import ConfigError
from kit.paths import PATH_OPTIONS, PROMPTS_DIR, bad_path


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid")


class VibeOptions(_Options):
    """vibe: one agent, one session."""

    max_steps: int | None = Field(
        None,
        ge=1,
        description="Steps of its one agent; default: the run's call budget, else limits.max_steps.",
    )


class LinearOptions(_Options):
    """linear: the fixed skill, one step per turn, the gate and the reviewers."""

    max_steps_per_step: int | None = Field(
        None,
        ge=1,
        description="Model calls per skill step; default: calls left // steps left (12 without a call budget).",
    )
    plan_file: str = Field(
        "PLAN.md",
        description="The file the plan step writes (a working file: scoring holds the base's there).",
    )
    gate_commands: list[str] | None = Field(
        None,
        description="The build/test gate's commands; default: a compile check and the task's test command.",
    )
    gate_retries: int = Field(2, ge=0, description="Times a failed gate sends the step back.")
    reviewers: int = Field(2, ge=0, description="Read-only reviewers at the audit step.")
    review_steps: int = Field(6, ge=1, description="Steps of each reviewer.")
    steps: list[str | dict[str, Any]] | None = Field(
        None, description="The step list (names, or step objects) replacing skill.yaml's."
    )
    skill: str | None = Field(None, description="Path to another skill.yaml.")

    @field_validator("plan_file")
    @classmethod
    def _a_working_file(cls, value: str) -> str:
        """A path inside the clone that is no code: scoring sets it back to the base's
        (:func:`kit.paths.owned_paths`), so a plan file on the agent's code would erase that code."""
        why = "a relative path inside the clone" if not value.strip() else bad_path(value)
        if why:
            raise ValueError(why)
        if value.lower().endswith((".py", ".pyi", ".pth")):
            raise ValueError("not a Python file: scoring holds the base's at the plan file's path")
        return value


class WorkflowOptions(_Options):
    """workflow: implement, analyze, refute, apply until clean."""

    max_cycles: int | None = Field(
        None, ge=1, description="Analyze/refute/apply cycles; default 16 (32 for a long task)."
    )
    analyzers: int = Field(3, ge=1, description="Analyzers per cycle, in parallel.")
    refuters: int = Field(
        3, ge=1, description="Skeptics per finding; a finding is kept on a strict majority."
    )
    clean_streak: int = Field(
        2, ge=1, description="Clean analyses in a row that end the run (converged-clean)."
    )
    max_steps: int | None = Field(None, ge=1, description="Steps per agent; default: limits.max_steps.")
    max_agent_calls: int = Field(
        1000, ge=1, description="Agent calls in the whole run before it stops as error."
    )
    max_output_tokens: int | None = Field(
        None, ge=1, description="Output tokens of the whole run (its own budget)."
    )
    concurrency: int | None = Field(
        None, ge=1, description="Agents at once; default min(16, max(2, cores - 2))."
    )
    format_retries: int = Field(2, ge=0, description="Re-asks of an agent whose answer does not validate.")
    retry_steps: int = Field(3, ge=1, description="Steps of each re-ask.")


class HarnessOptions(_Options):
    """harness: an initializer, then fresh-context coder sessions."""

    max_sessions: int = Field(12, ge=1, description="Coder sessions at most.")
    max_steps_per_session: int | None = Field(
        None, ge=1, description="Steps per session; default limits.max_steps."
    )
    initializer_max_steps: int | None = Field(
        None, ge=1, description="Steps of the initializer; default limits.max_steps."
    )
    initializer_retries: int = Field(
        1, ge=0, description="New initializer sessions when the feature list is unusable."
    )
    verify_tests: bool = Field(True, description="Run the task's tests before a feature counts as passing.")


#: What pdca's options mean (PdcaSettings keeps them as comments); an option missing here shows blank.
PDCA_MEANINGS = {
    "max_attempts": "Auditor rejections per plan revision before the expert is asked.",
    "max_plan_rejections": "PLAN->DO rejections in a row before the expert.",
    "max_do_rejections": "DO->CHECK rejections on one revision before the expert.",
    "max_role_calls": "Role sessions (the orchestrator's included) in the whole run.",
    "report_retries": "Times a missing or malformed scout, auditor or expert report is asked again.",
    "executor_steps": "Steps of an executor session; default: the run's step cap.",
    "scout_steps": "Steps of a scout (and expert) session; default: min(8, the step cap).",
    "answer_steps": "Steps a tool-less role gets to give a valid answer.",
    "status_writer": "Who writes the status file: model (the executor's cheap model calls, as the source) or kit.",
    "brief_safety_net": "Append the previous output when the orchestrator's brief misses an id, key, path or command.",
    "max_output_tokens": "Output cap per role, e.g. {executor: 8000}; default: the profile's.",
}


def _pdca_model() -> type[_Options]:
    """pdca's options, built from PdcaSettings (its fields, types and defaults) so they never drift."""
    from pydantic import create_model

    from kit.strategies.pdca.settings import PdcaSettings

    hints = typing.get_type_hints(PdcaSettings)
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(PdcaSettings):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        fields[f.name] = (hints.get(f.name, Any), Field(default, description=PDCA_MEANINGS.get(f.name, "")))
    return create_model("PdcaOptions", __base__=_Options, __doc__="pdca: PLAN, DO, CHECK, ACT.", **fields)


def option_models() -> dict[str, type[_Options]]:
    """strategy -> its options model."""
    return {
        "vibe": VibeOptions,
        "linear": LinearOptions,
        "pdca": _pdca_model(),
        "workflow": WorkflowOptions,
        "harness": HarnessOptions,
    }


def suggest(name: str, known: Iterable[str]) -> str:
    """`` (did you mean X?)`` for the closest known name, or ''."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def _unknown(where: str, name: str, known: Iterable[str], what: str) -> ConfigError:
    known = sorted(known)
    return ConfigError(
        f"field `{where}`: unknown {what} {name!r}{suggest(name, known)}",
        f"known: {', '.join(known) or '(none)'}",
    )


def check_options(strategy: str, options: dict[str, Any]) -> None:
    """``strategy_options.<strategy>`` against the strategy's model (unknown keys, removed keys, types)."""
    from kit.strategies.pdca.settings import REMOVED

    model = option_models()[strategy]
    for key in options:
        if strategy == "pdca" and key in REMOVED:
            raise ConfigError(f"field `strategy_options.pdca.{key}`: removed: {REMOVED[key]}", "delete it")
        if key not in model.model_fields:
            raise _unknown(
                f"strategy_options.{strategy}.{key}", key, model.model_fields, f"{strategy} option"
            )
    try:
        model.model_validate(options)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise ConfigError(f"field `strategy_options.{strategy}.{where}`: {err['msg']}") from None


#: Prompt folders every strategy reads (kit/prompts/agent/: the agent loop's own messages).
SHARED_PROMPTS = ("agent",)


def prompt_names(strategy: str, options: dict[str, Any] | None = None) -> set[str]:
    """The prompt names ``prompt_overrides`` may set for ``strategy``: its prompt files, plus for linear
    the step names its ``steps`` option introduces."""
    names = {p.stem for p in (PROMPTS_DIR / strategy).glob("*.md")}
    for step in (options or {}).get("steps") or []:
        name = step if isinstance(step, str) else step.get("name") if isinstance(step, dict) else None
        if isinstance(name, str):
            names.add(name)
    return names


def check_experiment(experiment: Experiment, roles: dict[str, dict[str, str]]) -> None:
    """Every strategy setting of ``experiment`` before any run: ``strategy_options`` (strategies and
    their keys), ``prompt_overrides`` (``<strategy>/<name>``) and ``tiers`` (strategies, roles, tiers).
    ``roles`` is each strategy's role -> tier defaults."""
    chosen = experiment.strategies
    for strategy in experiment.strategy_options:
        if strategy not in roles:
            raise _unknown(f"strategy_options.{strategy}", strategy, roles, "strategy")
    for strategy in chosen:
        check_options(strategy, experiment.strategy_options.get(strategy, {}))
    for strategy, names in PATH_OPTIONS.items():  # the paths scoring holds as at the base, for every run
        given = experiment.strategy_options.get(strategy) or {}
        check_options(strategy, {name: given[name] for name in names if name in given})
    for key in experiment.prompt_overrides:
        strategy, _, name = key.partition("/")
        if strategy in SHARED_PROMPTS:  # the agent loop's own messages: every strategy reads them
            known = prompt_names(strategy)
            if name not in known:
                raise _unknown(f"prompt_overrides.{key}", name, known, f"{strategy} prompt")
            continue
        if strategy not in chosen:
            raise _unknown(f"prompt_overrides.{key}", strategy, chosen, "strategy (of this experiment)")
        known = prompt_names(strategy, experiment.strategy_options.get(strategy))
        if name not in known:
            raise _unknown(f"prompt_overrides.{key}", name, known, f"{strategy} prompt")
    for strategy, choice in experiment.tiers.items():
        if strategy not in chosen:
            raise _unknown(f"tiers.{strategy}", strategy, chosen, "strategy (of this experiment)")
        for role in choice if isinstance(choice, dict) else []:
            if role not in roles.get(strategy, {}):
                raise _unknown(f"tiers.{strategy}.{role}", role, roles.get(strategy, {}), f"{strategy} role")
