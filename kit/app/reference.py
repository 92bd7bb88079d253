"""``docs/experiments.md``, generated from the models that read the files: every field of an experiment
file, a profile file and a price sheet, and every strategy's options -- type, default, meaning and an
example. ``python -m kit docs`` rewrites it; ``python -m kit docs --check`` fails when it is stale
(``tests/app/test_reference.py`` does the same)."""

from __future__ import annotations

import inspect
import types
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from kit.config import Experiment, Limits, ModelSpec, PriceSheet, Profile, RetryPolicy
from kit.paths import REPO_ROOT
from kit.strategies import DEFAULT_TIERS
from kit.strategies.options import option_models
from kit.usage import ModelPrice

REFERENCE = REPO_ROOT / "docs" / "experiments.md"

#: An example value per field where the default is no example (``model.field`` -> YAML value).
EXAMPLES: dict[str, Any] = {
    "Experiment.name": "my-bench",
    "Experiment.description": "Every strategy on the micro task, 3 repeats.",
    "Experiment.tasks": ["micro-slugify", "suite:exercism-hard"],
    "Experiment.strategies": ["vibe", "pdca", "workflow"],
    "Experiment.profile": "tiered",
    "Experiment.repeats": 3,
    "Experiment.concurrency": 4,
    "Experiment.limits": {"max_model_calls": 60, "max_usd": 2.5},
    "Profile.retry": {"max_retries": 5, "max_backoff_s": 30},
    "Experiment.strategy_options": {"workflow": {"max_cycles": 4}, "pdca": {"max_attempts": 2}},
    "Experiment.prompt_overrides": {
        "vibe/coder": "You are a careful engineer. Run the tests before you stop."
    },
    "Experiment.sandbox": "podman",
    "Experiment.sandbox_image": "localhost/my-python:3.8",
    "Experiment.tiers": {"workflow": {"analyzer": "medium"}, "pdca": "cheap"},
    "Limits.max_model_calls": 60,
    "Limits.max_usd": 2.5,
    "Limits.max_total_usd": 40.0,
    "Limits.max_tokens": 2000000,
    "Profile.name": "my-models",
    "Profile.description": "Our gateway's models.",
    "Profile.price_sheet": "anthropic",
    "Profile.tiers": {
        "cheap": {"model": "anthropic/claude-haiku-4-5"},
        "medium": {"model": "anthropic/claude-sonnet-4-5"},
        "strong": {"model": "anthropic/claude-opus-4-5"},
    },
    "Profile.roles": {"executor": "medium"},
    "ModelSpec.model": "anthropic/claude-sonnet-4-5",
    "ModelSpec.price": "anthropic/claude-sonnet-4-5",
    "ModelSpec.api_base": "http://127.0.0.1:4000",
    "ModelSpec.api_key_env": "MY_GATEWAY_KEY",
    "ModelSpec.action_mode": "text",
    "ModelSpec.temperature": 0.2,
    "ModelSpec.cache_breakpoints": False,
    "ModelSpec.cache_ttl": "1h",
    "ModelPrice.cache_write_1h": 6.0,
    "ModelSpec.custom": True,
    "ModelSpec.extra": {"frequency_penalty": 0.8},
    "PriceSheet.name": "my-prices",
    "PriceSheet.prices": {
        "anthropic/claude-sonnet-4-5": {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75}
    },
    "PriceSheet.source": "https://www.anthropic.com/pricing, 2026-11-01",
    "PriceSheet.illustrative": True,
    "PriceSheet.description": "Our negotiated prices.",
    "linear.gate_commands": ["python -m compileall -q .", "python -m pytest -q"],
    "linear.steps": ["step_1_requirements", "step_4_implement", "step_7_tests"],
    "linear.skill": "my-skill.yaml",
    "linear.max_steps_per_step": 8,
    "pdca.max_output_tokens": {"executor": 8000},
    "workflow.max_output_tokens": 200000,
    "workflow.max_cycles": 4,
    "workflow.max_steps": 20,
    "workflow.concurrency": 2,
    "vibe.max_steps": 30,
    "harness.max_steps_per_session": 20,
    "harness.initializer_max_steps": 10,
    "ModelPrice.input": 3.0,
    "ModelPrice.output": 15.0,
    "ModelPrice.cache_read": 0.3,
    "ModelPrice.cache_write": 3.75,
    # task.yaml (docs/tasks.md: kit.app.task_reference)
    "TaskFile.id": "mylib-fix-parser",
    "TaskFile.title": "mylib: the parser accepts trailing commas",
    "TaskFile.prompt": "Make the parser accept a trailing comma in lists.",
    "TaskFile.setup": ["python tools/generate_tables.py"],
    "TaskFile.long": True,
    "TaskFile.limits": {"scoring_timeout_s": 300},
    "TaskFile.tags": ["git-history", "commit"],
    "TaskFile.acceptance_layout": "repo",
    "TaskFile.packages": ["mylib"],
    "TaskFile.own_tests_deselect": ["tests/test_parser.py::test_trailing_comma_rejected"],
    "TaskFile.sandbox_image": "python:3.11-slim",
    "TaskFile.project": "mylib",
    "TaskFile.exclude_tests": [{"test": "tests/test_p.py::test_order", "reason": "pinned to random.seed(0)"}],
    "TaskFile.spec_notes": [{"test": "*", "what": "ParseError", "note": "the parser's one error type"}],
    "TaskFile.spec_gaps": {"exception": 2},
    "TaskFile.expert_minutes": 45,
    "TaskFile.expert": "A. Reviewer",
    "TaskFile.source": {"kind": "git", "base": "4f1c...", "head": "9a2e..."},
    "TaskLimits.max_steps": 40,
    "TaskLimits.test_timeout_s": 60,
    "TaskSource.repo_url": "https://github.com/me/mylib",
    "TaskSource.base": "4f1c2a9d0e...",
    "TaskSource.head": "9a2e77b1c3...",
    "TaskSource.commits": ["9a2e77b1c3..."],
    "TaskSource.base_date": "2025-03-01T12:00:00+00:00",
    "TaskSource.head_date": "2025-03-02T09:30:00+00:00",
    "TaskSource.licence": "LICENSE",
    "TaskSource.command": "python -m kit tasks import-git ../mylib --commit 9a2e77b",
}

#: Meanings of fields whose model has no description.
MEANINGS: dict[str, str] = {
    "ModelPrice.input": "USD per 1M prompt tokens not read from the cache.",
    "ModelPrice.output": "USD per 1M output tokens (reasoning included).",
    "ModelPrice.cache_read": "USD per 1M prompt tokens read from the cache.",
    "ModelPrice.cache_write": "USD per 1M prompt tokens written to the cache.",
}

#: Default values that depend on the machine or the run, described instead of shown.
DEFAULT_TEXT: dict[str, str] = {
    "ModelPrice.cache_write_1h": "2 × `input`",
    "Experiment.sandbox": "bwrap on Linux, docker elsewhere",
    "pdca.executor_steps": "the run's step cap",
    "pdca.scout_steps": "min(8, the step cap)",
}


def type_name(tp: Any) -> str:
    """A field's type as a reader writes it: ``int | None``, ``list[str]``, ``cheap | medium | strong``."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return type_name(args[0])
    if origin is typing.Literal:
        return " \\| ".join(str(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(type_name(a) for a in args)
    if origin in (list, dict, tuple):
        return f"{origin.__name__}[{', '.join(type_name(a) for a in args)}]"
    if tp is type(None):
        return "null"
    if tp is typing.Any:
        return "any"
    return getattr(tp, "__name__", str(tp))


def _default(key: str, field: Any) -> str:
    if key in DEFAULT_TEXT:
        return DEFAULT_TEXT[key]
    if field.default is not PydanticUndefined:
        return "required" if field.is_required() else f"`{_yaml(field.default)}`"
    factory = field.default_factory
    if factory is None:
        return "required"
    if inspect.isclass(factory) and issubclass(factory, BaseModel):
        return f"see `{factory.__name__}`"
    return f"`{_yaml(factory())}`"


def _yaml(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=1000).strip()
    return text.removesuffix("\n...").removesuffix("...").strip()


def _example(key: str, name: str, field: Any) -> str:
    if key in EXAMPLES:
        value = EXAMPLES[key]
    elif field.default is not PydanticUndefined and field.default is not None:
        value = field.default
    else:
        return ""
    return f"`{name}: {_yaml(value)}`"


def _meaning(key: str, field: Any) -> str:
    return (
        " ".join((field.description or MEANINGS.get(key, "")).split()).replace("|", "\\|").replace("<", "\\<")
    )


def table(model: type[BaseModel], prefix: str) -> list[str]:
    """One markdown table row per field of ``model``."""
    lines = ["| field | type | default | meaning | example |", "|---|---|---|---|---|"]
    for name, field in model.model_fields.items():
        key = f"{prefix}.{name}"
        lines.append(
            f"| `{name}` | {type_name(field.annotation)} | {_default(key, field)} | {_meaning(key, field)} "
            f"| {_example(key, name, field)} |"
        )
    return lines


def _doc(model: type) -> str:
    return " ".join(inspect.cleandoc(model.__doc__ or "").split())


INTRO = """# Experiment and profile files: the reference

Generated from the models that read them (`kit/config.py`, `kit/strategies/options.py`) by
`python -m kit docs`; do not edit by hand (`tests/app/test_reference.py` fails when it is stale).
Every file is YAML; an unknown key anywhere is an error that names the key and the file, with the
closest known name ("did you mean ..."), before any run starts.

`--profile NAME|PATH` on `kit run` and `profile:` in an experiment take a profile name (a file of
`datasets/profiles/`) or a path to a profile file; a profile's `price_sheet:` takes a name of
`datasets/prices/` (or of a `prices/` folder beside the profile's folder) or a path. `kit run` can
override the matrix: `--tasks a,b --strategies x,y --repeats N`, `--api-base URL` (every tier to one
base URL), and `--dry-run` prints the matrix, the budget and the most it can spend, writing nothing.

The most a run can spend, as `--dry-run` gives it: over the tiers the experiment's strategies use, one
call costs at most a full `context_window` at the dearer of the input and cache-write prices plus
`max_output_tokens` at the output price; the budget is checked before each call, so a run ends at
most one call past it. The bound is the smallest of `max_usd` + one call, `max_tokens` at the dearest
per-token price + one call, and `max_model_calls` x one call (agents that run in parallel, as the
workflow's, may each have one call in flight when the budget runs out). Without any of the three the
spending is unbounded.

The experiment-wide cap, `limits.max_total_usd` (or `--max-total-usd USD` on `kit run`): a run starts
only if the experiment's spend so far (the run.json totals of its finished runs, the ones about to be
redone left out) plus that bound for every run in flight and for the new one stays within the cap.
Runs it does not start stay to do: `kit run` says how many and exits with status 3; the same command
with a higher cap runs them (the cap is not part of a run's settings, so kept runs stay kept). The
dry run shows the cap, the spend so far and how many of the runs to do can start. It needs one of the
three per-run budgets above: without a bound on one run, it is refused.
"""


def render() -> str:
    """The whole reference, as markdown."""
    parts = [INTRO]
    sections: list[tuple[str, type[BaseModel], str, str]] = [
        ("Experiment file (`experiments/NAME.yaml`)", Experiment, "Experiment", ""),
        ("`limits:` (in the experiment)", Limits, "Limits", ""),
        ("Profile file (`datasets/profiles/NAME.yaml`)", Profile, "Profile", ""),
        ("A tier's model (`tiers: {cheap: ...}` in the profile)", ModelSpec, "ModelSpec", ""),
        ("`retry:` (in the profile)", RetryPolicy, "RetryPolicy", ""),
        ("Price sheet (`datasets/prices/NAME.yaml`)", PriceSheet, "PriceSheet", ""),
        ("A price (`prices: {KEY: ...}` in the price sheet)", ModelPrice, "ModelPrice", ""),
    ]
    for title, model, prefix, _ in sections:
        parts += [f"## {title}", "", _doc(model), "", *table(model, prefix), ""]
    parts += [
        "## Strategy options (`strategy_options: {STRATEGY: {...}}` in the experiment)",
        "",
        "Each strategy takes only its own options; its roles are the keys of `tiers: {STRATEGY: {ROLE: "
        "TIER}}`, and its prompt names (the files of `kit/prompts/STRATEGY/`) the keys of "
        "`prompt_overrides: {STRATEGY/NAME: TEXT}`. What each option does in the loop: "
        "[strategies.md](strategies.md).",
        "",
    ]
    for strategy, model in option_models().items():
        roles = ", ".join(f"`{r}` ({t})" for r, t in DEFAULT_TIERS.get(strategy, {}).items())
        parts += [f"### {strategy}", "", _doc(model), "", f"Roles (default tier): {roles}.", ""]
        parts += [*table(model, strategy), ""]
    return "\n".join(parts).rstrip() + "\n"


def write(path: Path = REFERENCE) -> Path:
    path.write_text(render(), encoding="utf-8")
    return path


def is_current(path: Path = REFERENCE) -> bool:
    return path.is_file() and path.read_text(encoding="utf-8") == render()
