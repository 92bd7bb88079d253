"""``kit run`` shaped from the command line: --tasks, --strategies, --repeats, --api-base, --dry-run
(which writes nothing), the spending bound it prints, and the refusal of a task whose hidden tests do
not collect, before any run."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from kit.app.cli import build_parser, main
from kit.config import Limits, load_experiment, load_profile
from kit.paths import TASKS_DIR
from kit.records.schema import read_jsonl
from tests.support.helpers import run_json


def test_dry_run_prints_the_matrix_budget_and_bound_and_writes_nothing(tmp_path, capsys):
    results = tmp_path / "results"
    argv = ["run", "full", "--profile", "tiered", "--tasks", "micro-slugify,csv-export-stream",
            "--strategies", "vibe,pdca", "--repeats", "2", "--results", str(results), "--dry-run"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "2 task(s) x 2 strategies x 2 repeat(s) = 8 runs, profile tiered" in out
    assert "tasks: micro-slugify, csv-export-stream" in out and "strategies: vibe, pdca" in out
    assert "max_model_calls 300, max_usd 5.0" in out
    assert (
        "most it can spend: $" in out and "for the 8 run(s) to do" in out and "max_usd $5 + one call" in out
    )
    assert "keep 0, redo 0 changed, run 8" in out
    assert not results.exists()  # no folder, no lock, no experiment.yaml


def test_spend_bound_takes_the_tightest_budget_at_the_dearest_tier():
    from kit.run.dryrun import spend_bound

    exp = load_experiment("full")
    profile, sheet = load_profile("tiered")
    call = max(
        (s.context_window * max(sheet.get(s.price_key).input, sheet.get(s.price_key).cache_write)
         + s.max_output_tokens * sheet.get(s.price_key).output) / 1e6
        for s in profile.tiers.values()
    )  # fmt: skip
    calls_only = exp.model_copy(update={"limits": Limits(max_model_calls=10)})
    bound, how = spend_bound(calls_only, profile, sheet)
    assert bound == pytest.approx(10 * call) and "max_model_calls 10" in how
    both = exp.model_copy(update={"limits": Limits(max_model_calls=10, max_usd=0.5)})
    assert spend_bound(both, profile, sheet)[0] == pytest.approx(0.5 + call)
    none = exp.model_copy(update={"limits": Limits()})
    assert spend_bound(none, profile, sheet) == (
        None,
        "no bound: the experiment sets no max_usd, max_tokens or max_model_calls",
    )


def test_help_says_profile_takes_a_name_or_a_path():
    run = build_parser()._subparsers._group_actions[0].choices["run"]
    help_text = run.format_help()
    assert "path to a profile file" in " ".join(help_text.split())
    for flag in ("--tasks", "--strategies", "--repeats", "--api-base", "--dry-run", "--redo-changed"):
        assert flag in help_text


def test_an_empty_list_is_one_error(tmp_path, capsys):
    assert main(["run", "scripted-smoke", "--tasks", ",", "--dry-run"]) == 2
    assert "--tasks is empty" in capsys.readouterr().err


def test_api_base_sends_every_tier_there(fake_anthropic, tmp_path, capsys):
    profile = {
        "name": "claude",
        "price_sheet": "anthropic",
        "tiers": {t: {"model": "anthropic/claude-sonnet-4-5", "extra": {"api_key": "test-key"}} for t in ("cheap", "medium", "strong")},
    }  # fmt: skip
    (tmp_path / "claude.yaml").write_text(yaml.safe_dump(profile))
    exp = tmp_path / "e.yaml"
    exp.write_text(yaml.safe_dump({"name": "e", "tasks": ["micro-slugify"], "strategies": ["vibe"],
                                   "profile": str(tmp_path / "claude.yaml"), "limits": {"max_model_calls": 2}}))  # fmt: skip
    argv = [
        "run",
        str(exp),
        "--results",
        str(tmp_path / "results"),
        "--api-base",
        fake_anthropic.url,
        "--quiet",
        "--no-report",
    ]
    assert main(argv) == 0, capsys.readouterr().err
    run_dir = tmp_path / "results" / "e" / "runs" / "micro-slugify__vibe__claude__r1"
    assert fake_anthropic.hits >= 1 and all(r["ok"] for r in read_jsonl(run_dir / "calls.jsonl"))
    assert run_json(run_dir)["settings"]["models"]["cheap"]["api_base"] == fake_anthropic.url


def broken_task(tmp_path: Path) -> Path:
    """micro-slugify whose hidden tests import a module that exists nowhere: they never collect."""
    task = tmp_path / "broken-slugify"
    shutil.copytree(TASKS_DIR / "micro-slugify", task)
    spec = yaml.safe_load((task / "task.yaml").read_text())
    (task / "task.yaml").write_text(yaml.safe_dump({**spec, "id": "broken-slugify"}))
    test = task / "acceptance" / "test_slugify.py"
    test.write_text("import no_such_module_anywhere  # noqa\n" + test.read_text())
    return task


def test_a_task_whose_hidden_tests_do_not_collect_is_refused_before_any_run(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ORCHBENCH_CACHE_DIR", str(tmp_path / "cache"))
    task = broken_task(tmp_path)
    exp = tmp_path / "b.yaml"
    exp.write_text(
        yaml.safe_dump({"name": "b", "tasks": [str(task)], "strategies": ["vibe"], "profile": "scripted"})
    )
    assert main(["run", str(exp), "--results", str(tmp_path / "results"), "--quiet", "--no-report"]) == 2
    err = capsys.readouterr().err
    assert (
        "task broken-slugify: its hidden tests would not give a score" in err
        and "no_such_module_anywhere" in err
    )
    assert not (tmp_path / "results" / "b").exists()  # not run, not paid for (only the clone cache)


def test_a_passing_collection_check_is_remembered_by_task_content(tmp_path, monkeypatch):
    from kit.importers import validate
    from kit.tasks.task import load_task

    monkeypatch.setenv("ORCHBENCH_CACHE_DIR", str(tmp_path / "cache"))
    task = load_task("micro-slugify")
    assert validate.collection_problems(task) == []
    calls = []
    monkeypatch.setattr(validate, "evaluate", lambda *a, **k: calls.append(a))
    assert validate.collection_problems(task) == [] and calls == []  # cached: not evaluated again


def test_dry_run_says_the_smallest_detectable_difference_and_what_a_chosen_one_needs(tmp_path, capsys):
    from kit import power

    argv = ["run", "full", "--profile", "tiered", "--tasks", "micro-slugify,csv-export-stream,bugfix-date-range",
            "--strategies", "vibe,pdca", "--repeats", "3", "--results", str(tmp_path), "--dry-run",
            "--detect", "30"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    mde = power.mde(3, 3)
    assert (f"3 task(s) in 3 clusters (no projects: each task its own) x 3 repeat(s) can tell apart a difference "
            f"of {mde * 100:.0f} points or more") in out  # fmt: skip
    assert "assumed (no pilot" in out and "correlation between repeats of a task 0.30" in out
    assert f"to detect 30 points: ~{power.tasks_needed(0.3, 3)} tasks at 3 repeat(s)" in out
    assert "only 3 clusters" in out


def test_dry_run_takes_the_variance_from_a_pilot(tmp_path, capsys):
    from tests.support.records import write_experiment

    pilot = write_experiment(tmp_path / "pilot", repeats=2, incomplete=False)
    argv = ["run", "full", "--profile", "tiered", "--tasks", "micro-slugify", "--strategies", "vibe,pdca",
            "--results", str(tmp_path / "results"), "--dry-run", "--pilot", str(pilot)]  # fmt: skip
    # the fixture's pairs: pdca solves both repeats, vibe neither -> every difference is +1: no variance
    assert main(argv) == 2
    assert "none differing: no variance to go on" in capsys.readouterr().err
    from kit.analysis import simulate

    runs = simulate.simulate_runs(simulate.NULL, projects=3, tasks_per_project=2, repeats=2, seed=4)
    varied = simulate.write_experiment(tmp_path / "pilot2", runs)
    assert main([*argv[:-1], str(varied)]) == 0
    out = capsys.readouterr().out
    assert "from the pilot (12 paired runs): variance of one paired solved difference" in out
