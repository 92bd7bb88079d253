"""import-git and a task a strategy can be judged on fairly (issue 37): a test the manifest leaves out
(``--exclude-test``) is dropped with its reason and recorded in task.yaml; a hidden or own test whose
outcome with the reference solution differs between three scorings is left out as flaky; the task's
size, project and specification gaps are recorded and printed. One small repository the test builds."""

from __future__ import annotations

import pytest
import yaml

from kit.importers.git import flaky
from kit.importers.git.importer import Options, import_git
from kit.importers.git.report import import_summary
from kit.tasks.task import load_task
from tests.support.gitrepos import make_repo

#: The hidden and the own flaky test read this file of the scored tree: the stand-in for a clock or
#: a counter outside the test -- the kit writes 1, then 2 before its extra scorings (odd: pass).
FLIP = (
    "import pathlib\n\nimport shapes\n\n\ndef flipped():\n"
    "    p = pathlib.Path(shapes.__file__).parent.parent / 'flip.txt'\n"
    "    return p.is_file() and int(p.read_text()) % 2 == 0\n"
)
BASE = {
    "LICENSE": "MIT\n",
    "shapes/__init__.py": "def area(w, h):\n    return w + h\n",
    "tests/__init__.py": "",
    "tests/flip.py": FLIP,
    "tests/test_own.py": (
        "from shapes import area\nfrom tests.flip import flipped\n\n\ndef test_own_flips():\n"
        "    assert not flipped()\n\n\ndef test_area_takes_two_numbers():\n    assert area(1, 2) in (2, 3)\n"
    ),
}
FIX = {
    "shapes/__init__.py": (
        "import random\n\n\ndef area(w, h):\n    return w * h\n\n\n"
        "def sample(n):\n    return [random.randrange(10) for _ in range(n)]\n"
    ),
    "tests/test_area.py": (
        "import random\n\nfrom shapes import area, sample\nfrom tests.flip import flipped\n\n\n"
        "def test_area():\n    assert area(2, 3) == 6\n\n\n"
        "def test_area_pinned_to_a_seed():\n    random.seed(0)\n    assert sample(3) == [6, 6, 0]\n\n\n"
        "def test_area_flips():\n    assert area(1, 1) == 1 and not flipped()\n"
    ),
}


@pytest.mark.slow
def test_an_excluded_test_and_a_flaky_one_are_left_out_with_why(tmp_path, monkeypatch):
    make_repo(tmp_path / "shapes", [("Start", BASE), ("area multiplies; add sample", FIX)])
    real, count = flaky.evaluate, [0]

    def flipping(task, tree, *args, **kwargs):  # the outcome-changing outside world
        count[0] += 1
        (tree / "flip.txt").write_text(str(count[0]))
        return real(task, tree, *args, **kwargs)

    monkeypatch.setattr(flaky, "evaluate", flipping)
    pinned = "tests/test_area.py::test_area_pinned_to_a_seed"
    r = import_git(
        Options(
            repo=tmp_path / "shapes",
            commit="HEAD",
            out=tmp_path / "tasks",
            timeout_s=60,
            exclude={pinned: "pinned to random.seed(0): incidental order"},
        )
    )
    assert r.ok, (r.problems, r.notes)
    assert list(r.hidden) == ["tests/test_area.py::test_area"]
    assert r.dropped[pinned] == "excluded: pinned to random.seed(0): incidental order"
    flips = r.dropped["tests/test_area.py::test_area_flips"]
    assert flips.startswith("flaky: with the reference solution its outcome differs between 3 scorings")
    assert "failed: " in flips, flips  # (with why: a failure one scoring alone saw is explained)
    assert r.deselected["tests/test_own.py::test_own_flips"].startswith("flaky:")
    task = load_task(r.task_dir)
    assert [(e.test, e.reason) for e in task.exclude_tests] == [
        (pinned, "pinned to random.seed(0): incidental order")
    ]
    assert "tests/test_own.py::test_own_flips" in task.own_tests_deselect
    assert task.project == "shapes" and task.long is False
    assert (r.size.code_lines, r.size.files, r.size.hidden_tests) == (
        5,
        1,
        1,
    )  # w + h -> w * h counts 2; import, def, return
    spec = yaml.safe_load((r.task_dir / "task.yaml").read_text())
    assert spec["spec_gaps"] == {}
    text = import_summary(r)
    assert "size: 5 code lines, 1 files, 1 hidden tests" in text and "long: no" in text
    assert "specification audit (kit tasks audit)" in text and (
        "unexplained gaps: 0" in text or "no gaps" in text
    )
