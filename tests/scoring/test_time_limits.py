"""A test that hangs in a scoring session costs its own time limit (``limits.test_timeout_s``), not
the session's: it is cut, recorded as failed with the reason, and the rest of the session -- the
other hidden tests, the own tests -- keeps its results. A hang the code under test causes never
ends as a pass: code that swallows the cut runs into the session's timeout (tampered, nothing
credited)."""

from __future__ import annotations

from kit.scoring.scorer import evaluate
from tests.tasks.taskmaker import make_task, workspace

STUB = """
def f(n):
    raise NotImplementedError


def g(n):
    return n
"""
SOLVED = """
import time


def f(n):
    if n == 2:
        time.sleep(1000)  # the hang: only for this input
    return n + 1


def g(n):
    while n == 5:  # a regression that hangs an own test
        pass
    return n
"""
SWALLOWS = """
import time


def f(n):
    while n == 2:
        try:
            time.sleep(1000)
        except BaseException:
            pass
    return n + 1


def g(n):
    return n
"""
HIDDEN = """
import pytest

from calc import f

pytestmark = pytest.mark.severity("major")


def test_one():
    assert f(1) == 2


def test_hangs():
    assert f(2) == 3


class TestMore:
    def test_three(self):
        assert f(3) == 4
"""
OWN = """
from calc import g


def test_g_one():
    assert g(1) == 1


def test_g_five():
    assert g(5) == 5
"""


def _evaluate(tmp_path, solution, session_s=40):
    limits = {"scoring_timeout_s": session_s, "test_timeout_s": 2}
    task = make_task(
        tmp_path / "task",
        {"calc.py": STUB, "tests/test_own.py": OWN},
        {"test_calc.py": HIDDEN},
        {"calc.py": solution},
        limits=limits,
    )
    ws = workspace(task, tmp_path)
    return evaluate(task, ws.root, ws)


def test_a_hanging_test_is_cut_at_its_own_limit_and_the_sessions_other_results_are_kept(tmp_path):
    ev = _evaluate(tmp_path, SOLVED)
    assert not ev.tampered, ev.tampered
    credited = {k for k, (ok, _) in ev.results.items() if ok}
    assert credited == {"test_calc.py::test_one", "test_calc.py::TestMore::test_three"}, ev.results
    ok, message = ev.results["test_calc.py::test_hangs"]
    assert not ok and "timed out" in message and "2 s" in message, message
    assert ev.own.state("tests/test_own.py::test_g_one").value == "passed"
    assert ev.regressed == ["tests/test_own.py::test_g_five"], ev.regressed
    assert "timed out" in ev.own.outcomes["tests/test_own.py::test_g_five"][1]


def test_a_hang_that_swallows_the_cut_is_never_credited(tmp_path):
    ev = _evaluate(tmp_path, SWALLOWS, session_s=12)
    assert not ev.results["test_calc.py::test_hangs"][0], ev.results
    assert ev.tampered or "timed out" in ev.results["test_calc.py::test_hangs"][1]
