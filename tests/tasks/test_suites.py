"""Suites: the shipped exercism-hard suite, `suite:<name>` in an experiment's tasks."""

from __future__ import annotations

import pytest

from kit.app import tasks_cli
from kit.config import Experiment
from kit.errors import ConfigError
from kit.tasks import task as tasks
from kit.tasks.requirements import read_requirements

HARD = [
    "exercism-sgf-parsing",
    "exercism-rest-api",
    "exercism-bowling",
    "exercism-paasio",
    "exercism-forth",
    "exercism-pov",
    "exercism-simple-linked-list",
    "exercism-go-counting",
    "exercism-connect",
    "exercism-food-chain",
    "exercism-two-bucket",
    "exercism-react",
]


def test_shipped_suite_is_the_documented_list_with_licence_and_severities():
    suite = tasks.load_suite("exercism-hard")
    assert suite.tasks == HARD and "9eb657d4507d91efef99f484e7f2a1f4074911b5" in suite.source
    readme = (tasks.SUITES_DIR / "README.md").read_text()
    assert all(t in readme for t in HARD) and "MIT" in (tasks.SUITES_DIR / "EXERCISM-LICENSE").read_text()
    for task_id in HARD:
        task = tasks.load_task(task_id)
        assert "Exercism" in (task.path / "LICENSE-exercism").read_text()
        reqs, problems = read_requirements(task.acceptance_dir)
        assert problems == [] and len(reqs) >= 9
        assert {r.severity for r in reqs} <= {"major", "minor"}
    react = read_requirements(tasks.load_task("exercism-react").acceptance_dir)[0]
    assert sum(r.baseline_pass for r in react) == 2


def test_expand_tasks_keeps_order_and_drops_repeats():
    assert tasks.expand_tasks(["micro-slugify", "suite:exercism-hard", "exercism-forth"]) == [
        "micro-slugify",
        *HARD,
    ]
    with pytest.raises(ConfigError, match=r"(?s)unknown suite .nope.*exercism-hard"):
        tasks.expand_tasks(["suite:nope"])


def test_a_suite_naming_an_unknown_task_fails_before_anything_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(tasks, "SUITES_DIR", tmp_path)
    (tmp_path / "mine.yaml").write_text("name: mine\ntasks: [micro-slugify, no-such-task]\n")
    with pytest.raises(ConfigError, match="unknown task 'no-such-task'"):
        tasks.load_suite("mine")
    (tmp_path / "other.yaml").write_text("name: mine\ntasks: [micro-slugify]\n")
    with pytest.raises(ConfigError, match="differs from the file name"):
        tasks.load_suite("other")
    (tmp_path / "bad.yaml").write_text("name: bad\ntask: [micro-slugify]\n")
    with pytest.raises(ConfigError, match="tasks"):
        tasks.load_suite("bad")


def test_runner_plan_expands_a_suite():
    from kit.config import load_experiment
    from kit.run.runner import plan

    shipped = plan(load_experiment("exercism-hard"))
    assert len(shipped) == 12 * 5 * 3 and shipped[0].task.id == HARD[0]

    exp = Experiment(
        name="x",
        tasks=["suite:exercism-hard", "micro-slugify"],
        strategies=["vibe"],
        profile="scripted",
        repeats=2,
    )
    specs = plan(exp)
    assert [s.task.id for s in specs[::2]] == [*HARD, "micro-slugify"] and len(specs) == 26


def test_validate_command_takes_a_suite_name(capsys):
    import argparse

    parser = argparse.ArgumentParser()
    tasks_cli.add_cli(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["tasks", "validate", "suite:nope"])
    assert args.func(args) == 1
    assert "unknown suite 'nope'" in capsys.readouterr().out
