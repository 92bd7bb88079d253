"""issue 21, item 3: every shipped experiment is valid and fair (docs/strategies.md, ``## Fair
comparison``). Each file in experiments/ loads, plans, and its strategy options are ones its strategies
know; and with a perfect scripted model each of its strategies reaches its own success end (outcome
``done``) within the experiment's limits -- otherwise the experiment measures its budget, not the
strategy. The perfect model (tests/support/perfect.py) plays micro-slugify, the smallest task, so this
is the floor every shipped budget must clear. Pipeline validation, never a benchmark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kit.config import Experiment, load_experiment
from kit.model import scripted
from kit.paths import EXPERIMENTS_DIR
from kit.prompts import PromptBook
from kit.records.schema import STOP_REASONS, load_run, normalise_outcome, stop_reason_key
from kit.run.runner import run_experiment
from kit.strategies import experiment_tiers, harness
from kit.strategies.context import RunContext
from kit.strategies.pdca.settings import PdcaSettings
from kit.strategies.workflow import WorkflowSettings
from kit.tasks.task import load_task
from tests.support.helpers import plan_shipped, write_profile
from tests.support.perfect import Perfect

FILES = sorted(
    EXPERIMENTS_DIR.glob("*.yaml"), key=lambda p: (p.stem.endswith("-equal-tier"), p.stem)
)  # faithful first
TASK = "micro-slugify"


class ReadingContext(RunContext):
    """A RunContext that notes which options the strategy's settings read."""

    read: set[str]

    def option(self, name, default):
        self.read.add(name)
        return super().option(name, default)


def read_settings(strategy: str, experiment: Experiment, task_id: str) -> tuple[set[str], set[str]]:
    """Build ``strategy``'s settings from the experiment (as a run would); (options given, options read).
    pdca's settings reject an unknown or removed option themselves (ValueError)."""
    given = dict(experiment.strategy_options.get(strategy, {}))
    ctx = ReadingContext(
        task=load_task(task_id), workspace=None, gateway=None, recorder=None, profile=None,
        prompts=PromptBook(strategy, experiment.prompt_overrides), limits=experiment.limits,
        options=given, tiers=experiment_tiers(experiment.strategies, experiment.tiers)[strategy],
    )  # fmt: skip
    ctx.read = set()
    readers = {
        "pdca": PdcaSettings.from_ctx,
        "workflow": WorkflowSettings.from_context,
        "harness": harness._params,
    }
    if strategy in readers:
        readers[strategy](ctx)
    else:  # vibe and linear read their options inside run(); the option models check them at plan
        ctx.read = set(given)
    return set(given), ctx.read


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_every_shipped_experiment_loads_plans_and_knows_its_options(path):
    """default-equal-tier.yaml set pdca's removed max_revisions: every pdca run of it ended `error`."""
    experiment = load_experiment(path)
    specs = plan_shipped(experiment)  # a suite built from clones first: its one error, then micro-slugify
    assert {s.strategy for s in specs} == set(experiment.strategies)
    for strategy in experiment.strategies:
        given, read = read_settings(strategy, experiment, specs[0].task.id)
        assert given <= read, f"{path.name}: {strategy} does not know the option(s) {sorted(given - read)}"


@pytest.mark.parametrize("name", ["default", "full", "exercism-hard", "real-repos"])
def test_an_equal_tier_variant_differs_from_its_faithful_experiment_in_the_tier_map_only(name):
    faithful, equal = load_experiment(name), load_experiment(f"{name}-equal-tier")
    same = ("tasks", "strategies", "limits", "strategy_options", "prompt_overrides", "repeats", "profile")
    for field in same:
        assert getattr(faithful, field) == getattr(equal, field), f"{name}-equal-tier: {field} differs"


# --------------------------------------------------------------------------- each reaches done


def cases() -> list:
    """One case per distinct (strategy, limits, options) over the shipped experiments: an equal-tier
    variant runs the same loop under the same caps (the scripted model is the same on every tier).
    Limits at least as generous, cap by cap, as a case's with the same strategy and options add no
    case (real-repos' bigger budget: a perfect run that ends within the smaller caps ends within them)."""
    covered: dict[str, list[dict]] = {}
    out = []
    for path in FILES:
        experiment = load_experiment(path)
        for strategy in experiment.strategies:
            key = json.dumps([strategy, experiment.strategy_options.get(strategy, {})], sort_keys=True)
            limits = experiment.limits.model_dump()
            if any(_at_least(limits, seen) for seen in covered.get(key, [])):
                continue
            covered.setdefault(key, []).append(limits)
            out.append(pytest.param(path.stem, strategy, id=f"{path.stem}-{strategy}"))
    return out


def _at_least(limits: dict, other: dict) -> bool:
    """Every cap of ``limits`` is at least ``other``'s (None: no cap)."""
    return all(a is None or (b is not None and a >= b) for a, b in ((limits[k], other[k]) for k in limits))


@pytest.mark.slow
@pytest.mark.parametrize(("name", "strategy"), cases())
def test_a_perfect_model_reaches_done_within_each_shipped_experiments_limits(tmp_path, name, strategy):
    shipped = load_experiment(name)
    model = scripted.register(Perfect())
    experiment = shipped.model_copy(
        update={
            "name": f"perfect-{name}-{strategy}",
            "tasks": [TASK],
            "strategies": [strategy],
            "repeats": 1,
            "concurrency": 1,
            "profile": str(write_profile(tmp_path, model, "native")),
            "tiers": {strategy: shipped.tiers[strategy]} if strategy in shipped.tiers else {},
        }
    )
    out = run_experiment(experiment, results_dir=tmp_path / "results", progress=False)
    (run_dir,) = (out / "runs").iterdir()
    record = load_run(run_dir)
    assert record is not None and record.error is None, record and record.error
    outcome, stop_reason = normalise_outcome(strategy, record.outcome, record.stop_reason)
    assert outcome == "done", f"{name}/{strategy}: {record.outcome} ({stop_reason}); {record.counters}"
    assert record.claimed_done
    assert STOP_REASONS[strategy][stop_reason_key(stop_reason)] == "done"  # run.json's own stop_reason
    cap = shipped.limits.max_model_calls
    assert cap is None or record.calls <= cap
    assert Path(run_dir / "diff.patch").is_file()
