"""Red team 45: the own tests' canary budget (:func:`kit.scoring.testcost.left_bare`) and the
injected modules written once by ``ast.unparse``'s own writer (:mod:`kit.scoring.padding`), attacked
from outside first. Each test asserts the SAFE outcome; a trick that works and is not fixed is marked
``xfail(strict=True)`` and says what happens instead.

Worked: 1 a test module the agent adds that ``ast.unparse`` cannot write (a sum of 400 terms, an int
literal of over 4,300 digits written in hex) ended the scoring of an honest run unscored -- every
requirement failed (closed: the module runs as written, as one too large).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kit.scoring.scorer import score
from tests.scoring.test_real_shapes import SHAPES, SOLVED, STUB
from tests.tasks.taskmaker import make_task, workspace

HIDDEN = {"test_a.py": SHAPES["pytest-base-class-tests"]}
OWN = "import calc\n\n\ndef test_helper():\n    assert calc.helper(3) == 3\n"


def _task(tmp_path: Path, repo: dict[str, str] | None = None, **fields):
    task = make_task(
        tmp_path / "task", repo or {"calc.py": STUB, "tests/test_own.py": OWN}, HIDDEN, SOLVED, **fields
    )
    return task, workspace(task, tmp_path, solved=True)


# ------------------------------------------------------- 1: a module ast.unparse cannot write


@pytest.mark.parametrize(
    "body",
    [
        "assert " + " + ".join(["calc.helper(1)"] * 400) + " == 400",  # the writer's recursion
        "assert " + " + ".join(["calc.helper(1)"] * 900) + " == 900",  # the kit's walk of the tree
        "assert calc.helper(0x" + "f" * 4000 + ") > 0",  # repr() of an int over 4,300 digits
    ],
    ids=["sum-400", "sum-900", "hex-int"],
)
def test_rt45_1_an_added_test_module_the_writer_cannot_write(tmp_path, body):
    """An honest solution (the reference) whose agent added a test module of valid Python that
    ``ast.unparse`` cannot write: the scoring ended unscored (``RecursionError``, ``ValueError``:
    every requirement failed). Now the module runs as written, like one too large: noted in
    ``dropped_files``, not counted in ``tests_added``."""
    task, ws = _task(tmp_path)
    (ws.root / "tests" / "test_extra.py").write_text(f"import calc\n\n\ndef test_extra():\n    {body}\n")
    s = score(task, ws, True)
    assert s.unscored_reason is None, s.unscored_reason
    assert not s.failed and not s.tampered and not s.suspicious and s.regressions == 0, s
    assert s.tests_added == 0
    assert any("tests/test_extra.py" in d and "past what the kit can write" in d for d in s.dropped_files), s
