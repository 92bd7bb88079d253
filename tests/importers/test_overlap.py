"""Overlapping tasks (issue 37, item 5): tasks whose commit sets intersect -- a fix commit inside a
release span -- are listed as overlapping by ``kit tasks list suite:NAME``, with each task's project,
size and excluded tests."""

from __future__ import annotations

import yaml

from kit.app.cli import main
from kit.importers.overlap import overlaps
from kit.tasks import task as tasks
from tests.tasks.taskmaker import make_task

HIDDEN = "import pytest\n\n\n@pytest.mark.severity('major')\ndef test_x():\n    assert False\n"


def _source(base: str, commits: list[str]) -> dict:
    return {"kind": "git", "base": base, "head": commits[-1], "commits": commits}


def test_a_fix_inside_a_span_overlaps_it_and_the_suite_listing_says_so(tmp_path, monkeypatch, capsys):
    built = tmp_path / "built"
    monkeypatch.setenv("ORCHBENCH_BUILT_DIR", str(built))
    made = [
        make_task(built / "span", {"a.py": ""}, {"test_a.py": HIDDEN}, project="lib",
                  source=_source("c0", ["c1", "c2", "c3"])),
        make_task(built / "fix", {"a.py": ""}, {"test_a.py": HIDDEN}, project="lib", source=_source("c1", ["c2"]),
                  exclude_tests=[{"test": "test_a.py::test_y", "reason": "pins whitespace"}]),
        make_task(built / "other", {"a.py": ""}, {"test_a.py": HIDDEN}, project="app",
                  source=_source("c3", ["c4"])),
    ]  # fmt: skip
    assert overlaps(made) == [("span", "fix", 1)]
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "mine.yaml").write_text(
        yaml.safe_dump({"name": "mine", "tasks": ["span", "fix", "other", "gone"]})
    )
    monkeypatch.setattr(tasks, "SUITES_DIR", suites)
    assert main(["tasks", "list", "suite:mine"]) == 0
    out = capsys.readouterr().out
    assert "suite suite:mine: 4 tasks, 3 built, 2 project(s): app, lib, 0 long by the kit's measure" in out
    assert "overlapping tasks (1 pair(s)" in out and "span ∩ fix: 1 commit(s) shared" in out
    assert "excluded: test_a.py::test_y: pins whitespace" in out and "project: lib" in out
    assert "not built: gone" in out
