"""``--profile oracle`` (kit/model/oracle.py) and the fake server that plays the same over the wire: a task
the test builds -- not a shipped one, with a file the change deletes and an own test it deselects --
runs under all five strategies and every run ends done and solved; the report and the summary call
it a pipeline check."""

from __future__ import annotations

from pathlib import Path

import pytest

from kit.analysis import load, report, summary
from kit.app.cli import main
from kit.records.schema import load_run
from tests.support.fake_providers import FakeAnthropic
from tests.support.fake_server import Responder
from tests.tasks.taskmaker import make_task

STRATEGIES = "vibe,linear,pdca,workflow,harness"


def build_task(root: Path) -> Path:
    """A small project with a bug: ``shapes.area`` lacks triangles, ``shapes/legacy.py`` must go, and an
    own test that pins the old behaviour (deselected: it fails with the reference change)."""
    folder = root / "my-tasks" / "shapes-triangle"
    make_task(
        folder,
        repo={
            "pytest.ini": "[pytest]\ntestpaths = tests\n",
            "shapes/__init__.py": "",
            "shapes/area.py": """
                def area(kind, a, b=0.0):
                    if kind == "square":
                        return a * a
                    if kind == "rectangle":
                        return a * b
                    raise ValueError(kind)
                """,
            "shapes/legacy.py": "OLD = True\n",
            "tests/test_area.py": """
                import pytest
                from shapes.area import area


                def test_square():
                    assert area("square", 3) == 9


                def test_triangle_was_unknown():
                    with pytest.raises(ValueError):
                        area("triangle", 2, 3)
                """,
        },
        acceptance={
            "test_hidden.py": """
                import importlib.util

                import pytest
                from shapes.area import area


                @pytest.mark.severity("critical")
                def test_triangle():
                    assert area("triangle", 4, 3) == 6


                @pytest.mark.severity("major")
                def test_legacy_module_is_gone():
                    assert importlib.util.find_spec("shapes.legacy") is None


                @pytest.mark.severity("minor")
                def test_rectangle_kept():
                    assert area("rectangle", 2, 5) == 10
                """,
        },
        solution={
            "shapes/area.py": """
                def area(kind, a, b=0.0):
                    if kind == "square":
                        return a * a
                    if kind == "rectangle":
                        return a * b
                    if kind == "triangle":
                        return a * b / 2
                    raise ValueError(kind)
                """,
            "shapes/helpers.py": "HALF = 0.5\n",
            "DELETED.txt": "# the change removes the old module\nshapes/legacy.py\n",
        },
        prompt="Add triangles to shapes.area.area (base a, height b) and remove shapes/legacy.py.",
        test_command="python -m pytest -q",
        own_tests_deselect=["tests/test_area.py::test_triangle_was_unknown"],
        limits={"max_steps": 30, "scoring_timeout_s": 60},
    )
    return folder


def _check_all_solved(results: Path) -> None:
    runs = [load_run(d) for d in sorted((results / "full" / "runs").iterdir())]
    assert sorted(r.strategy for r in runs) == sorted(STRATEGIES.split(","))
    for r in runs:
        assert r.outcome == "done", (r.strategy, r.outcome, r.stop_reason, r.error)
        assert r.score and r.score.requirements_failed == 0 and r.score.regressions == 0, (
            r.strategy,
            r.score,
        )


@pytest.mark.slow
def test_the_oracle_profile_solves_a_task_the_user_built_under_every_strategy(tmp_path, capsys):
    task = build_task(tmp_path)
    argv = ["run", "full", "--profile", "oracle", "--tasks", str(task), "--strategies", STRATEGIES,
            "--repeats", "1", "--results", str(tmp_path / "results"), "--quiet"]  # fmt: skip
    assert main(argv) == 0
    _check_all_solved(tmp_path / "results")
    printed = " ".join(capsys.readouterr().out.split())  # the report printed at the end, unwrapped
    assert report.ORACLE_LABEL in printed and "Summary (pipeline check, not a benchmark" in printed
    records = load(tmp_path / "results" / "full")
    assert report.ORACLE_LABEL in report.describe(records)
    assert summary.summary_lines(records)[0].startswith("Summary (pipeline check")


@pytest.mark.slow
def test_the_fake_server_plays_the_same_on_a_task_it_was_given(tmp_path, monkeypatch):
    task = build_task(tmp_path)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "any")
    with FakeAnthropic(Responder([task.parent])) as server:
        argv = ["run", "full", "--profile", "tiered", "--api-base", server.url, "--tasks", str(task),
                "--strategies", STRATEGIES, "--repeats", "1", "--results", str(tmp_path / "results"),
                "--quiet", "--no-report"]  # fmt: skip
        assert main(argv) == 0
    _check_all_solved(tmp_path / "results")
