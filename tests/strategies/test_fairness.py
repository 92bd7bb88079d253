"""Fairness as a setting (docs/strategies.md, ``## Fair comparison``): one run budget for every
strategy, explicit role -> tier maps in the experiment (source-faithful and equal-tier), recorded in
run.json and printed in the report."""

from __future__ import annotations

import pytest

from kit.agent.budget import Budget
from kit.analysis.report import report_text
from kit.config import Limits, ModelSpec, Profile, load_experiment
from kit.errors import BudgetExceeded, ConfigError
from kit.model import scripted
from kit.paths import EXPERIMENTS_DIR
from kit.records.schema import CALLS, load_run, read_jsonl
from kit.run.runner import plan, run_experiment
from kit.strategies import (
    DEFAULT_TIERS,
    STRATEGIES,
    experiment_tiers,
    linear,
    pdca,
    role_tiers,
    vibe,
    workflow,
)
from kit.strategies.context import RunContext
from tests.support.helpers import experiment, write_profile


def profile_with_roles(roles: dict[str, str]) -> Profile:
    spec = ModelSpec(model="scripted/x", price="p")
    return Profile(
        name="r", price_sheet="p", tiers=dict.fromkeys(("cheap", "medium", "strong"), spec), roles=roles
    )


def test_the_default_tier_maps_are_the_modules_own_defaults():
    assert DEFAULT_TIERS["workflow"] == workflow.TIERS
    assert DEFAULT_TIERS["pdca"] == {role: tier for role, (tier, _) in pdca.ROLES.items()}
    assert DEFAULT_TIERS["vibe"] == {vibe.ROLE: vibe.TIER}
    assert DEFAULT_TIERS["linear"] == {linear.ROLE: linear.TIER, linear.REVIEWER: linear.REVIEWER_TIER}
    assert set(DEFAULT_TIERS) == set(STRATEGIES)


def test_the_experiment_map_wins_then_the_profile_then_the_default():
    prof = profile_with_roles({"analyzer": "strong", "editor": "medium"})
    tiers = role_tiers("workflow", {"analyzer": "cheap"}, prof)
    assert tiers == {"implementer": "cheap", "analyzer": "cheap", "refuter": "medium", "editor": "medium"}
    assert role_tiers("workflow", "strong", prof) == dict.fromkeys(DEFAULT_TIERS["workflow"], "strong")
    ctx = RunContext(task=None, workspace=None, gateway=None, recorder=None, profile=prof, prompts=None,
                     tiers=tiers)  # fmt: skip
    assert ctx.tier("analyzer", "medium") == "cheap" and ctx.tier("refuter", "medium") == "medium"
    assert ctx.tier("unlisted", "strong") == "strong"


@pytest.mark.parametrize(
    ("chosen", "message"),
    [({"workflow": {"auditor": "cheap"}}, "unknown role"), ({"workflow": "huge"}, "unknown tier"),
     ({"harness": "cheap"}, "not among the experiment's strategies")],
)  # fmt: skip
def test_a_bad_tier_map_fails_up_front_naming_what_is_wrong(chosen, message):
    with pytest.raises(ConfigError, match=message):
        experiment_tiers(["workflow"], chosen)


def test_a_bad_tier_map_fails_before_any_run(tmp_path):
    exp = experiment("bad", "x", ["micro-slugify"], ["vibe"], tiers={"vibe": {"coderr": "cheap"}})
    with pytest.raises(ConfigError, match="coderr"):
        plan(exp)


def test_the_call_budget_is_counted_atomically_and_stops_with_a_hint():
    budget = Budget(max_model_calls=2)
    budget.start_call()
    budget.add_calls(1)
    assert budget.remaining_calls() == 0
    with pytest.raises(BudgetExceeded, match="2 model calls") as info:
        budget.start_call()
    assert "limits.max_model_calls" in str(info.value) and budget.model_calls == 2


def test_shipped_experiments_have_explicit_maps_one_budget_and_equal_tier_variants():
    names = {p.stem for p in EXPERIMENTS_DIR.glob("*.yaml")}
    for name in names:
        exp = load_experiment(name)
        assert set(exp.tiers) == set(exp.strategies), f"{name}: every strategy's map must be explicit"
        experiment_tiers(exp.strategies, exp.tiers)
    for name in ("default", "full", "exercism-hard", "real-repos"):
        faithful, equal = load_experiment(name), load_experiment(f"{name}-equal-tier")
        assert (faithful.tasks, faithful.strategies, faithful.limits) == (
            equal.tasks,
            equal.strategies,
            equal.limits,
        )
        assert faithful.limits.max_model_calls is not None  # one run budget for every strategy
        maps = experiment_tiers(equal.strategies, equal.tiers)
        assert {tier for roles in maps.values() for tier in roles.values()} == {"cheap"}
        assert experiment_tiers(faithful.strategies, faithful.tiers) == {
            s: DEFAULT_TIERS[s] for s in faithful.strategies
        }
    wf = load_experiment("default").strategy_options["workflow"]
    assert wf["max_cycles"] >= 2 * 2  # an issues cycle, a fix, then two clean passes in a row
    assert "max_agent_calls" not in wf  # the run budget bounds it, as every strategy


@pytest.mark.slow
def test_run_json_and_the_report_show_each_strategys_map_and_budget(tmp_path):
    def done(request):
        from kit.model.actions import FINISH, render

        return render(request.context.get("action_mode") or "native", FINISH, {"summary": "ok"}, "Done.")

    profile = write_profile(tmp_path, scripted.register(done, name="fair-done"), "native")
    exp = experiment(
        "fair", profile, ["micro-slugify"], ["vibe", "linear"],
        limits=Limits(max_steps=5, max_model_calls=30, max_usd=2.5),
        tiers={"vibe": "medium", "linear": {"reviewer": "strong"}},
        strategy_options={"linear": {"gate_commands": ["true"]}},
    )  # fmt: skip
    out = run_experiment(exp, results_dir=tmp_path / "results", progress=False)
    vibe_run = load_run(out / "runs" / "micro-slugify__vibe__scripted-test__r1")
    linear_run = load_run(out / "runs" / "micro-slugify__linear__scripted-test__r1")
    assert vibe_run.role_tiers == {"coder": "medium"}
    assert linear_run.role_tiers == {"coder": "cheap", "reviewer": "strong"}
    assert vibe_run.budget == {"max_model_calls": 30, "max_usd": 2.5, "max_tokens": None}
    calls = read_jsonl(out / "runs" / "micro-slugify__linear__scripted-test__r1" / CALLS)
    assert {(c["role"], c["tier"]) for c in calls} == {("coder", "cheap"), ("reviewer", "strong")}
    text = report_text(out)
    assert "Role → tier map and run budget per strategy" in text
    assert "vibe    coder=medium | budget: 30 model calls, $2.5, no token cap" in text
    assert "linear  coder=cheap reviewer=strong | budget: 30 model calls" in text
