"""Red team 43: how a session's report is read -- which reported test is a canary, a twin, a shadow
or a suite test (``stream._Reader.test``, ``_split``, ``_placed``, ``check_canaries``) from the node
id and the ``__qualname__`` the plugin sends, and how requirements are credited from it
(``verdicts``). Each test asserts the SAFE behaviour; each failed on the code before its fix.

- 1, 5: a project's decorator without ``functools.wraps`` on a test whose class or module is
  collected again elsewhere (``from ... import *``, a subclass, a ``mock.patch``-ed unittest class):
  the must-fail canary copies its test *with its decorators*, so its ``__qualname__`` was
  ``noted.<locals>.call`` and each copy outside its scope was read as an own test that failed
  (``own_failed``: the importer refuses "own tests fail at the start"). Closed: the plugin looks
  through the wrappers' closures for the function of the test's name.
- 2: ``python_classes = *Tests``: a ``Test*`` helper class is never collected, its canaries were
  "missing" (``tampered``). Closed: such a class is excused as an uncollected module is.
- 2b: ``python_functions = check_*``: no canary (all named ``test_*``) was collected -- the reference
  solution's own tests ``tampered``. Closed: the kit's test names follow the session's configuration
  (``check_`` and the module's words: :mod:`kit.scoring.naming`).
- 3: a hidden test in a folder named with ``[``: ``requirement_key`` cut the node id there (every
  requirement "v") and ``verdicts.inherited`` raised on it -- the scoring crashed. 3b: a forger that
  renames its reports so turned ``tampered`` into a crash. 3c: ``inherited`` read whatever host file a
  reported node id named (``/abs/path``, ``../``). All closed.
- 4: hidden shapes (decorators with and without wraps, a staticmethod test, ids holding ``::``,
  ``.py::`` and ``[``, a nested class a subclass inherits): the inherited nested class was a problem,
  "run but not found in the source". Closed.
- 6: code under test forging every test's ``__qualname__`` and moving each report to a scope of its
  own, so that no kit report is read as the kit's: no effect (every kit test "missing": ``tampered``;
  the audit hook also sees the hidden functions touched: ``suspicious``).
"""

from __future__ import annotations

from kit.scoring import verdicts
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


# --------------------------------------------------------------------------- 2: python_classes / _functions

#: a project whose pytest configuration collects ``*Tests`` classes only: a ``Test*`` class is a
#: helper there, never collected -- the kit's canaries in it are never reported
OWN_CLASSES_CONFIGURED = """
import calc


class TestServer:
    def test_connection(self):
        assert calc.helper("up") == "up"


class HelperTests:
    def test_helper_two(self):
        TestServer().test_connection()
        assert calc.helper(2) == 2


def test_helper_one():
    assert calc.helper(1) == 1
"""


def test_rt43_2a_a_test_class_the_projects_configuration_does_not_collect(tmp_path):
    repo = {
        "calc.py": STUB,
        "pytest.ini": "[pytest]\npython_classes = *Tests\n",
        "tests/__init__.py": "",
        "tests/test_configured.py": OWN_CLASSES_CONFIGURED,
    }
    task = make_task(tmp_path / "task", repo, {"test_a.py": SHAPES["pytest-base-class-tests"]}, SOLVED)
    ws = workspace(task, tmp_path)
    ev = evaluate(task, ws.root, ws)
    _clean(ev)  # (before: "canary test that must pass (tests/test_configured.py::TestServer) is missing")
    assert sorted(ev.own.outcomes) == [
        "tests/test_configured.py::HelperTests::test_helper_two",
        "tests/test_configured.py::test_helper_one",
    ]


#: ``check_*`` functions only: ``test_*`` is a helper's name there -- and every canary's
OWN_FUNCTIONS_CONFIGURED = """
import calc


def test_data():
    return [1, 2]


def check_helper_one():
    assert calc.helper(test_data()[0]) == 1


class HelperTests:
    def check_helper_two(self):
        assert calc.helper(2) == 2
"""


def test_rt43_2b_a_project_whose_python_functions_is_not_test_star(tmp_path):
    repo = {
        "calc.py": STUB,
        # (``HelperTests`` is collected by ``python_classes = *Tests`` only: pytest's default is ``Test``)
        "pytest.ini": "[pytest]\npython_functions = check_*\npython_classes = *Tests\n",
        "tests/__init__.py": "",
        "tests/test_configured.py": OWN_FUNCTIONS_CONFIGURED,
    }
    task = make_task(tmp_path / "task", repo, {"test_a.py": SHAPES["pytest-base-class-tests"]}, SOLVED)
    ws = workspace(task, tmp_path)
    ev = evaluate(task, ws.root, ws)
    _clean(ev)
    assert sorted(ev.own.outcomes) == [
        "tests/test_configured.py::HelperTests::check_helper_two",
        "tests/test_configured.py::check_helper_one",
    ]


# --------------------------------------------------------------------------- 3: a bracket in a hidden path


def test_rt43_3_a_hidden_test_in_a_folder_named_with_a_bracket_is_credited(tmp_path):
    hidden = {
        "v[1]/test_a.py": SHAPES["pytest-base-class-tests"],
        "test_b.py": SHAPES["pytest-base-class-tests"],
    }
    task = make_task(tmp_path / "task", {"calc.py": STUB}, hidden, SOLVED)
    ws = workspace(task, tmp_path)
    ev = evaluate(task, ws.root, ws)
    _clean(ev)  # (before: each requirement of v[1]/test_a.py "not run", its cases read as "v")
    assert "v[1]/test_a.py::TestDerived::test_derived_parses" in ev.results
    assert len(ev.requirements) == 4


#: code under test that forges every report passed (tampering: the must-fail canaries pass) and
#: renames each one to a node id no test of a module has: the scorer crashed reading it
#: (``verdicts.inherited``: ValueError) -- the run an error, not ``tampered``
RENAMING_FORGER = """
import _pytest.reports

_init = _pytest.reports.TestReport.__init__


def _forged(self, nodeid, *args, **kwargs):
    _init(self, nodeid, *args, **kwargs)
    self.outcome, self.longrepr = "passed", None
    self.nodeid = "_acceptance/" + str(nodeid).rpartition("::")[2]


_pytest.reports.TestReport.__init__ = _forged
"""


def test_rt43_3b_a_report_renamed_to_no_modules_test_is_tampering_not_a_crash(tmp_path):
    task = make_task(tmp_path / "task", {"calc.py": STUB}, {"test_b.py": SHAPES["pytest-base-class-tests"]})
    ws = workspace(task, tmp_path, solved=False)
    (ws.root / "calc.py").write_text(STUB + RENAMING_FORGER, encoding="utf-8")
    ev = evaluate(task, ws.root, ws)  # (before: ValueError)
    assert ev.tampered
    assert not any(ok for ok, _ in ev.results.values())


def test_rt43_3c_a_reported_node_id_reads_no_file_outside_the_hidden_tests(tmp_path):
    """A report's node id is the session's word: ``inherited`` read the file its path named, wherever
    -- ``_acceptance//proc/kcore::T::m`` or ``../../`` -- on the host, with the scorer's rights (a
    file of any size read whole: memory; and a class it holds hid the "not found in the source"
    problem)."""
    outside = tmp_path / "outside.py"
    outside.write_text("class T:\n    pass\n", encoding="utf-8")
    acceptance = tmp_path / "task" / "acceptance"
    acceptance.mkdir(parents=True)
    (acceptance / "test_a.py").write_text("class T:\n    pass\n", encoding="utf-8")
    keys = {f"{outside}::T::m", "../../outside.py::T::m", "test_a.py::T::m"}
    assert verdicts.inherited(keys, acceptance) == {"test_a.py::T::m"}


# --------------------------------------------------------------------------- 4: hidden shapes

HIDDEN_SHAPES = """
import functools

import pytest

import calc

pytestmark = pytest.mark.severity("major")


def logged(func):
    def call(*args, **kwargs):
        return func(*args, **kwargs)

    return call


def wrapped(func):
    @functools.wraps(func)
    def call(*args, **kwargs):
        return func(*args, **kwargs)

    return call


class TestDouble:
    @logged
    def test_double_two(self):
        assert calc.double(2) == 4

    @wrapped
    def test_double_three(self):
        assert calc.double(3) == 6

    @staticmethod
    def test_parse_static():
        assert calc.parse("5") == 5

    @pytest.mark.parametrize("text", ["a.py::b[1]", "x::y"], ids=["m.py::T::t[0]", "::["])
    def test_parse_ids(self, text):
        assert calc.parse(" 7 ") == 7

    class TestInner:
        @logged
        def test_inner_parse(self):
            assert calc.parse("9") == 9


class TestDoubleAgain(TestDouble):
    def test_double_zero(self):
        assert calc.double(0) == 0
"""


def test_rt43_4_hidden_shapes_decorators_staticmethods_nested_and_odd_ids(tmp_path):
    hidden = {"test_shapes.py": HIDDEN_SHAPES}
    task = make_task(tmp_path / "task", {"calc.py": STUB}, hidden, SOLVED)
    ws = workspace(task, tmp_path)
    ev = evaluate(task, ws.root, ws)
    _clean(ev)
    assert ev.results["test_shapes.py::TestDouble::test_double_two"][0]
    stub = workspace(task, tmp_path / "stub", solved=False)
    ev = evaluate(task, stub.root, stub)
    assert not ev.tampered and not ev.gamed and not ev.suspicious, (ev.tampered, ev.suspicious)
    assert all(not ok for ok, _ in ev.results.values())


# --------------------------------------------------------------------------- 5: own shapes, reused

OWN_SHAPES = """
import unittest
from unittest import mock

import calc


def noted(func):
    def call(*args, **kwargs):
        return func(*args, **kwargs)

    return call


@mock.patch("calc.double", side_effect=lambda n: 2 * n)
class TestPatched(unittest.TestCase):
    def test_patched_helper(self, double):
        self.assertEqual(calc.helper(4), 4)

    @noted
    def test_noted_helper(self, double):
        self.assertEqual(calc.helper(5), 5)


class TestOuter:
    @staticmethod
    def test_static_helper():
        assert calc.helper(6) == 6

    class TestInner:
        @noted
        def test_inner_helper(self):
            assert calc.helper(7) == 7
"""
OWN_SHAPES_REUSED = """
from tests.test_shapes import TestOuter, TestPatched

Inner = TestOuter.TestInner


class TestPatchedAgain(TestPatched):
    pass


class TestOuterAgain(TestOuter):
    pass
"""


def test_rt43_5_own_shapes_collected_again_in_another_module(tmp_path):
    repo = {
        "calc.py": STUB,
        "tests/__init__.py": "",
        "tests/test_shapes.py": OWN_SHAPES,
        "tests/test_shapes_again.py": OWN_SHAPES_REUSED,
    }
    task = make_task(tmp_path / "task", repo, {"test_a.py": SHAPES["pytest-base-class-tests"]}, SOLVED)
    ws = workspace(task, tmp_path)
    ev = evaluate(task, ws.root, ws)
    _clean(ev)
    assert ev.own_failed == []
    assert len(ev.own.outcomes) == 12, sorted(ev.own.outcomes)  # (4 there, 8 here: ``Inner`` is no Test*)


# --------------------------------------------------------------------------- 6: a forged __qualname__

#: code under test that gives every collected test a forged ``__qualname__``, reports each one
#: passed and moves it to a scope of its own (``::Z::``): no report sits where the kit put its test,
#: and none is a copy of the kit's function -- every kit report read as a suite test
QUALNAME_FORGER = """
import _pytest.python
import _pytest.reports

_item = _pytest.python.Function.__init__
_report = _pytest.reports.TestReport.__init__


def _forged_item(self, *args, **kwargs):
    _item(self, *args, **kwargs)
    try:
        getattr(self.obj, "__func__", self.obj).__qualname__ = "forged"
    except Exception:
        pass


def _forged_report(self, nodeid, *args, **kwargs):
    _report(self, nodeid, *args, **kwargs)
    scope, _, name = str(nodeid).rpartition("::")
    self.outcome, self.longrepr, self.nodeid = "passed", None, scope + "::Z::" + name


_pytest.python.Function.__init__ = _forged_item
_pytest.reports.TestReport.__init__ = _forged_report
"""


def test_rt43_6_a_forged_qualname_and_moved_reports_are_missing_kit_tests(tmp_path):
    task = make_task(tmp_path / "task", {"calc.py": STUB}, {"test_b.py": SHAPES["pytest-base-class-tests"]})
    ws = workspace(task, tmp_path, solved=False)
    (ws.root / "calc.py").write_text(STUB + QUALNAME_FORGER, encoding="utf-8")
    ev = evaluate(task, ws.root, ws)
    assert any("missing from the report" in t for t in ev.tampered), ev.tampered
    assert not any(ok for ok, _ in ev.results.values())
