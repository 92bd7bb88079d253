"""Profiles, price sheets and experiments: shipped files load, bad files fail naming file and field."""

from __future__ import annotations

import pytest

from kit.config import load_experiment, load_price_sheet, load_profile
from kit.errors import ConfigError
from kit.paths import EXPERIMENTS_DIR


@pytest.mark.parametrize("name", ["local", "scripted", "single", "tiered"])
def test_shipped_profiles_load_with_a_price_for_every_tier(name):
    profile, sheet = load_profile(name)
    for spec in profile.tiers.values():
        assert sheet.get(spec.price_key).output > 0


def test_local_profile_is_labelled_illustrative():
    profile, sheet = load_profile("local")
    assert sheet.illustrative and "ILLUSTRATIVE" in sheet.description
    assert {s.model for s in profile.tiers.values()} == {"embedded/smollm2-135m"}
    # illustrative prices still differ per tier so the tier economics have something to show
    assert len({sheet.get(s.price_key).input for s in profile.tiers.values()}) == 3


def test_tiered_profile_uses_three_models():
    profile, _ = load_profile("tiered")
    assert len({s.model for s in profile.tiers.values()}) == 3


def test_shipped_experiments_load():
    names = [p.stem for p in EXPERIMENTS_DIR.glob("*.yaml")]
    assert "default" in names
    for name in names:
        assert load_experiment(name).tasks


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


SHEET = "name: p\nprices:\n  m: {input: 1, output: 1, cache_read: 1, %s: 1}\n"
TIERS = "name: x\nprice_sheet: p\ntiers:\n  cheap: {model: m}\n  medium: {model: %s}\n  strong: {model: m}\n"


def profile_folder(tmp_path, sheet_field="cache_write", medium="m", extra_tiers=""):
    """profiles/x.yaml and prices/p.yaml under tmp_path; returns the profile's path."""
    (tmp_path / "profiles").mkdir(exist_ok=True)
    (tmp_path / "prices").mkdir(exist_ok=True)
    write(tmp_path / "prices", "p.yaml", SHEET % sheet_field)
    return write(tmp_path / "profiles", "x.yaml", TIERS % medium + extra_tiers)


def test_unknown_tier_is_named(tmp_path):
    path = profile_folder(tmp_path, extra_tiers="  huge: {model: m}\n")
    with pytest.raises(ConfigError) as info:
        load_profile(path)
    assert str(path) in str(info.value) and "tiers.huge" in str(info.value)


def test_unknown_field_and_missing_price_are_named(tmp_path):
    profile_folder(tmp_path, sheet_field="cache_wrte")
    with pytest.raises(ConfigError) as info:
        load_price_sheet(tmp_path / "prices" / "p.yaml")
    assert "prices.m.cache_wrte" in str(info.value)

    path = profile_folder(tmp_path, medium="other")
    with pytest.raises(ConfigError) as info:
        load_profile(path)
    assert "tiers.medium.price" in str(info.value) and "'other'" in str(info.value)


def test_unknown_profile_lists_the_valid_ones():
    with pytest.raises(ConfigError) as info:
        load_profile("nope")
    assert "local" in str(info.value) and "tiered" in str(info.value)


def test_malformed_experiment_yaml(tmp_path):
    path = write(tmp_path, "e.yaml", "name: e\ntasks: [a\n")
    with pytest.raises(ConfigError) as info:
        load_experiment(path)
    assert "not valid YAML" in str(info.value)
    path = write(tmp_path, "e.yaml", "name: e\ntasks: [a]\nstrategies: [vibe]\nprofile: local\nrepeats: 0\n")
    with pytest.raises(ConfigError) as info:
        load_experiment(path)
    assert "field `repeats`" in str(info.value)


# --------------------------------------------------------------------------- strict strategy settings


def test_every_shipped_experiment_and_profile_passes_the_strict_checks():
    from kit import strategies
    from kit.paths import PROFILES_DIR
    from tests.support.helpers import plan_shipped

    for path in sorted(PROFILES_DIR.glob("*.yaml")):
        load_profile(path)
    for path in sorted(EXPERIMENTS_DIR.glob("*.yaml")):
        exp = load_experiment(path)
        strategies.check_experiment(exp)  # options, prompt names, roles
        assert plan_shipped(exp), path


TYPOS = [
    (
        "workflow",
        "strategy_options: {workflow: {max_cycle: 3}}",
        "strategy_options.workflow.max_cycle",
        "max_cycles",
    ),
    (
        "pdca",
        "strategy_options: {pdca: {max_atempts: 3}}",
        "strategy_options.pdca.max_atempts",
        "max_attempts",
    ),
    ("linear", "strategy_options: {linear: {reviewer: 1}}", "strategy_options.linear.reviewer", "reviewers"),
    (
        "harness",
        "strategy_options: {harness: {max_session: 2}}",
        "strategy_options.harness.max_session",
        "max_sessions",
    ),
    ("vibe", "strategy_options: {vibee: {max_steps: 3}}", "strategy_options.vibee", "vibe"),
    ("pdca", 'prompt_overrides: {"pdca/auditr": "Audit."}', "prompt_overrides.pdca/auditr", "auditor"),
    (
        "workflow",
        'prompt_overrides: {"workflow/analyser": "x"}',
        "prompt_overrides.workflow/analyser",
        "analyzer",
    ),
    ("pdca", "tiers: {pdca: {excutor: cheap}}", "tiers.pdca.excutor", "executor"),
    (
        "vibe",
        'prompt_overrides: {"agent/observaton": "x"}',
        "prompt_overrides.agent/observaton",
        "observation",
    ),
]


@pytest.mark.parametrize(("strategy", "line", "key", "meant"), TYPOS, ids=[t[2] for t in TYPOS])
def test_a_typo_in_the_strategy_settings_stops_before_any_run(tmp_path, capsys, strategy, line, key, meant):
    from kit.app.cli import main

    exp = write(
        tmp_path,
        "typo.yaml",
        f"name: typo\ntasks: [micro-slugify]\nstrategies: [{strategy}]\nprofile: scripted\n"
        f"limits: {{max_model_calls: 1}}\n{line}\n",
    )
    assert main(["run", str(exp), "--results", str(tmp_path / "results"), "--quiet", "--no-report"]) == 2
    err = capsys.readouterr().err
    assert str(exp) in err and f"`{key}`" in err and f"(did you mean {meant}?)" in err
    assert err.count("error:") == 1 and "Traceback" not in err
    assert not (tmp_path / "results").exists()  # refused before any run


def test_a_wrong_option_type_is_named(tmp_path, capsys):
    from kit.app.cli import main

    exp = write(tmp_path, "t.yaml", "name: t\ntasks: [micro-slugify]\nstrategies: [workflow]\nprofile: scripted\n"
                "strategy_options: {workflow: {analyzers: many}}\n")  # fmt: skip
    assert main(["run", str(exp), "--results", str(tmp_path / "results"), "--quiet", "--no-report"]) == 2
    assert "`strategy_options.workflow.analyzers`" in capsys.readouterr().err
