"""Skipped and xfail tests count as real test suites count them (kit/tasks/transitions.py): neutral for
own tests at the base, never credited as a hidden pass; a regression cannot hide behind a skip."""

import pytest

from kit.importers.validate import validate_task
from kit.scoring.scorer import score
from kit.tasks.requirements import read_requirements
from tests.tasks.taskmaker import make_task, workspace

LIB = """
def double(x):
    return x * 2


def triple(x):
    raise NotImplementedError
"""
OWN_TESTS = """
import sys

import pytest

import lib


def test_double():
    assert lib.double(2) == 4


@pytest.mark.skip(reason="needs a network")
def test_skipped():
    assert False


@pytest.mark.skipif(sys.platform != "nowhere", reason="another platform")
def test_skipped_if():
    assert False


@pytest.mark.xfail(reason="a known bug")
def test_known_bug():
    assert lib.double("a") == 2


def test_skips_itself():
    pytest.skip("not here")
"""
HIDDEN = """
import pytest

import lib


@pytest.mark.severity("major")
def test_triple():
    assert lib.triple(2) == 6
"""


def _task(tmp_path, acceptance=HIDDEN):
    return make_task(
        tmp_path / "skips",
        {"lib.py": LIB, "tests/test_lib.py": OWN_TESTS},
        {"test_triple.py": acceptance},
        {"lib.py": LIB.replace("raise NotImplementedError", "return x * 3")},
    )


def test_skipped_and_xfail_own_tests_are_neither_failures_nor_regressions(tmp_path):
    # before: validate said "own tests fail at the start: tests/test_lib.py::test_known_bug, ..."
    task = _task(tmp_path)
    report = validate_task(task)
    assert report.ok, report.problems
    s = score(task, workspace(task, tmp_path), claimed_done=True)
    assert s.regressions == 0 and s.requirements_failed == 0 and s.own_tests_total == 5


def test_a_regression_hidden_behind_a_skip_is_still_a_regression(tmp_path):
    task = _task(tmp_path)
    ws = workspace(task, tmp_path)
    lib = ws.root / "lib.py"
    lib.write_text(
        "import pytest\n\n" + lib.read_text().replace("return x * 2", "pytest.skip('later')"),
        encoding="utf-8",
    )
    s = score(task, ws, claimed_done=True)
    assert s.regressed_tests == ["tests/test_lib.py::test_double"]


def test_a_hidden_test_that_skips_or_xfails_is_not_credited(tmp_path):
    acceptance = (
        HIDDEN
        + """

@pytest.mark.severity("major")
def test_skips():
    if lib.triple(1) == 3:
        pytest.skip("met")


@pytest.mark.severity("major")
def test_xfails():
    if lib.triple(1) == 3:
        pytest.xfail("met")
"""
    )
    task = _task(tmp_path, acceptance)
    s = score(task, workspace(task, tmp_path), claimed_done=True)
    failed = {f.test: f.message for f in s.failed}
    assert sorted(failed) == ["test_triple.py::test_skips", "test_triple.py::test_xfails"], failed
    assert failed["test_triple.py::test_skips"].startswith("skipped")
    assert failed["test_triple.py::test_xfails"].startswith("xfailed")
    assert not s.tampered and s.requirements_total == 3


@pytest.mark.parametrize("mark", ["xfail", "skip", "skipif(True, reason='x')"])
def test_a_hidden_test_marked_xfail_or_skip_is_a_task_problem(tmp_path, mark):
    # it could never be credited (before: an xpassed one was, and a must-fail canary copied with the
    # mark did not fail the session: the run was tampered)
    acceptance = HIDDEN.replace("def test_triple", f"@pytest.mark.{mark}\ndef test_triple")
    task = _task(tmp_path, acceptance)
    (req,), _ = read_requirements(task.acceptance_dir)
    assert req.skip_mark == mark.split("(")[0]
    assert (
        f"acceptance test test_triple.py::test_triple is marked {req.skip_mark}: a hidden test is "
        "credited only when it plainly passes"
    ) in validate_task(task).problems


def test_a_hidden_test_skipped_only_elsewhere_is_a_requirement(tmp_path):
    # tomlkit 0.15.1's `skipif(sys.implementation.name != "cpython")`: it runs (and is credited) here;
    # the import of that release was refused for it
    mark = "skipif(sys.implementation.name != 'cpython', reason='CPython only')"
    acceptance = "import sys\n" + HIDDEN.replace("def test_triple", f"@pytest.mark.{mark}\ndef test_triple")
    task = _task(tmp_path, acceptance)
    (req,), _ = read_requirements(task.acceptance_dir)
    assert req.skip_mark is None
    assert validate_task(task).problems == []
