"""Red team 43: how a session's report is read -- which reported test is a canary, a twin, a shadow
or a suite test (``stream._Reader.test``, ``_split``, ``_placed``, ``check_canaries``) from the node
id and the ``__qualname__`` the plugin sends. Each test asserts the SAFE behaviour.
"""

from __future__ import annotations

from kit.scoring.scorer import evaluate
from tests.scoring.test_real_shapes import SHAPES, SOLVED, STUB
from tests.tasks.taskmaker import make_task, workspace


def _clean(ev) -> None:
    assert not ev.tampered, ev.tampered
    assert not ev.problems, ev.problems
    assert not ev.failed_requirements and not ev.gamed, ev.results
    assert not ev.suspicious, ev.suspicious


# --------------------------------------------------------------------------- 1: decorators without wraps

#: a project's own decorator that does not use functools.wraps: the function pytest collects is
#: ``retry.<locals>.again``, not ``TestHelper.test_...`` -- and the failing canary in its test's scope
#: is the test's copy *with its decorators*
OWN_DECORATED = """
import pytest

import calc


def retry(func):
    def again(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except OSError:
            return func(*args, **kwargs)

    return again


class TestHelper:
    @retry
    def test_helper_one(self):
        assert calc.helper(1) == 1

    @retry
    def test_helper_two(self):
        assert calc.helper(2) == 2


@pytest.mark.parametrize("where", ["lib.py::main[0]", "a::b"])
class TestWhere:
    def test_where(self, where):
        assert calc.helper(where) == where


@retry
def test_module_level():
    assert calc.helper(3) == 3
"""
OWN_REUSING = """
from tests.test_helper import *  # noqa: F403 -- the classes and functions, collected here too
from tests.test_helper import TestHelper


class TestHelperAgain(TestHelper):
    def test_again(self):
        assert True
"""


def test_rt43_1_a_decorator_without_wraps_on_a_test_reused_in_another_module(tmp_path):
    repo = {
        "calc.py": STUB,
        "tests/__init__.py": "",
        "tests/test_helper.py": OWN_DECORATED,
        "tests/test_reuse.py": OWN_REUSING,
    }
    task = make_task(tmp_path / "task", repo, {"test_a.py": SHAPES["pytest-base-class-tests"]}, SOLVED)
    ws = workspace(task, tmp_path)
    ev = evaluate(task, ws.root, ws)
    _clean(ev)
    # (before: each copy of the must-fail canary outside its class or module was read as an own
    # test that failed -- ``own_failed``, which the importer refuses as "own tests fail at the start")
    assert ev.own_failed == []
    classes = ["TestHelper::test_helper_one", "TestHelper::test_helper_two"]
    where = ["TestWhere::test_where[a::b]", "TestWhere::test_where[lib.py::main[0]]", "test_module_level"]
    assert sorted(ev.own.outcomes) == sorted(
        [f"tests/test_helper.py::{t}" for t in classes + where]
        + [f"tests/test_reuse.py::{t}" for t in classes + where]
        + [f"tests/test_reuse.py::TestHelperAgain::{t.split('::')[1]}" for t in classes]
        + ["tests/test_reuse.py::TestHelperAgain::test_again"]
    )
