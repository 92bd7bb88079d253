"""The importer lays the data files the hidden tests actually read, wherever they live and whatever
their names are made of -- seen in its probes with the change -- not only those a string literal of
a test file names under a tests/ folder (attack-scoring-1: 10, a golden file outside any test folder
was left to the solution side, so the agent wrote its own). A small repository built here."""

from __future__ import annotations

import pytest

from kit.importers.git.importer import Options, import_git
from kit.scoring.scorer import score
from tests.support.gitrepos import make_repo
from tests.tasks.taskmaker import workspace

BASE = {
    "LICENSE": "MIT License\n",
    "shapes.py": "def render(kind):\n    raise NotImplementedError\n",
    "tests/test_shapes.py": "import shapes\n\n\ndef test_module():\n    assert shapes.render\n",
}
HIDDEN = """
import pathlib

from shapes import render

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_render_matches_the_golden_file():
    assert render("rect") == (ROOT / "golden" / "rect.txt").read_text().strip()


def test_render_matches_the_cases():
    folder = pathlib.Path(__file__).parent / "".join(["ca", "ses"])
    for kind in ("dot", "line"):
        assert render(kind) == (folder / (kind + ".out")).read_text().strip()
"""
CHANGE = {
    "shapes.py": 'def render(kind):\n    return "<" + kind + ">"\n',
    "golden/rect.txt": "<rect>\n",
    "tests/cases/dot.out": "<dot>\n",
    "tests/cases/line.out": "<line>\n",
    "tests/test_render.py": HIDDEN,
}


@pytest.mark.slow
def test_the_data_files_the_hidden_tests_read_are_laid_wherever_they_are(tmp_path, monkeypatch):
    monkeypatch.setenv("ORCHBENCH_RESULTS_DIR", str(tmp_path / "results"))
    shas = make_repo(tmp_path / "shapes", [("start", BASE), ("Add render()", CHANGE)])
    r = import_git(Options(repo=tmp_path / "shapes", commit=shas[1], out=tmp_path / "tasks", timeout_s=60))
    assert r.ok, (r.problems, r.notes)
    laid = sorted(
        p.relative_to(r.task_dir / "acceptance").as_posix()
        for p in (r.task_dir / "acceptance").rglob("*")
        if p.is_file()
    )
    # before: neither golden/rect.txt (no test folder) nor tests/cases/*.out (no literal names them)
    assert {"golden/rect.txt", "tests/cases/dot.out", "tests/cases/line.out"} <= set(laid), laid

    # an agent whose stub renders "X" and writes golden files that say "X" is not credited
    from kit.tasks.task import load_task

    task = load_task(r.task_dir)
    ws = workspace(task, tmp_path / "run", solved=False)
    (ws.root / "shapes.py").write_text('def render(kind):\n    return "X"\n')
    for rel in ("golden/rect.txt", "tests/cases/dot.out", "tests/cases/line.out"):
        (ws.root / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws.root / rel).write_text("X\n")
    s = score(task, ws, claimed_done=True)
    assert s.requirements_failed == s.requirements_total == 2, s
