"""Sealed checks: the expected value of an equality assertion never enters the scoring session.

The end-to-end case is a report forger that tells the hidden tests, their twins and their canaries
apart from their source and marks every original test passed: on the code before sealed checks it
was credited every requirement (suspicious, but credited); now only what its code really meets.
"""

import ast
import datetime
import random
import shutil
import textwrap
from collections import OrderedDict, namedtuple
from enum import IntEnum
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kit.scoring.inject import inject_folder
from kit.scoring.observe import canonical
from kit.scoring.scorer import score
from kit.scoring.seal import module_names, seal_test
from kit.scoring.session import Expect, read_stream
from kit.tasks.task import load_task
from kit.tasks.workspace import create_workspace

FORGER = Path(__file__).with_name("forger_textkit.py")


def _seal(source: str) -> tuple[str, dict]:
    tree = ast.parse(textwrap.dedent(source))
    sites: dict = {}
    counter = [0]
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
            sites.update(seal_test(node, node.name, module_names(tree), "OBS", counter))
    return ast.unparse(tree), sites


def test_the_expected_value_and_the_local_that_held_it_leave_the_module():
    out, sites = _seal(
        """
        from datetime import date
        def test_a():
            expected = [(date(2024, 1, 1), 'x7431')]
            assert f() == expected
        def test_b():
            self.assertEqual({'k': -2.5}, g(1))
        """
    )
    assert "x7431" not in out and "2024" not in out and "-2.5" not in out and "expected" not in out
    assert "OBS('c1', f())" in out and "OBS('c2', g(1))" in out
    assert [s.required for s in sites.values()] == [True, True]


def test_what_is_not_sealed_stays_an_in_process_check():
    out, sites = _seal(
        """
        import pytest
        def test_a():
            expected = [1, 2]
            assert f(expected) == expected   # the value is an input too
            assert f() == g()                # no side the kit evaluates alone
            assert f() == pytest.approx(0.3)
            assert f() == 1j                 # no faithful canonical form
        """
    )
    assert sites == {}
    assert out.count("assert ") == 4


def test_a_check_the_test_does_not_always_reach_is_not_required():
    _, sites = _seal(
        """
        def test_a():
            with self.assertRaises(ValueError) as err:
                self.assertEqual(f(), 1)
            self.assertEqual(err.exception.args[0], 'bad')
            for x in range(3):
                assert f(x) == 2
            for row in f():
                assert row == 4
            with self.subTest(i=1):
                assert f() == 3
            if g():
                assert f() == 5
            try:
                assert f() == 6
            except KeyError:
                assert f() == 7
        """
    )
    # in a raises block, no; a loop over literal data, yes; over the code's output (may be empty),
    # an if, an except handler: no; a try body: yes
    assert [s.required for s in sites.values()] == [False, True, True, False, True, False, True, False]


def test_no_expected_value_of_a_task_is_in_the_session_copy(tmp_path):
    source = Path("datasets/tasks/exercism-forth/acceptance/forth_test.py")
    folder = tmp_path / "acc"
    shutil.copytree(source.parent, folder)
    found = inject_folder(folder, random.Random(5))
    sealed_copy = (folder / source.name).read_text()
    assert len(found.sealed) >= 50
    # forth's expected stacks, e.g. [1, 2, 3, 4, 5] after "1 2 3 4 5": gone from every test
    assert "[1, 2, 3, 4, 5]" in source.read_text() and "[1, 2, 3, 4, 5]" not in sealed_copy
    ast.parse(sealed_copy)


PLAIN = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, width=64)
    | st.sampled_from([0, 1, 1.0, -0.0, True, 2**53, float(2**53), 0.5, float("inf"), -float("inf")])
    | st.fractions(max_denominator=8)
    | st.decimals(allow_nan=False, places=2)
    | st.text(max_size=4)
    | st.binary(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.frozensets(st.integers(-3, 3) | st.text(max_size=2), max_size=3)
        | st.dictionaries(st.integers(-3, 3) | st.text(max_size=2), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=400, deadline=None)
@given(PLAIN, PLAIN)
def test_two_plain_values_have_one_canonical_form_exactly_when_they_are_equal(a, b):
    assert (canonical(a) == canonical(b)) == (a == b)
    assert canonical(a) == canonical(a)


def test_subclasses_of_plain_types_compare_as_their_bases_contents():
    Point = namedtuple("Point", "x y")

    class Level(IntEnum):
        HIGH = 3

    class Rigged(str):
        def __eq__(self, other):
            return True

        __hash__ = str.__hash__

    assert canonical(Point(1, 2)) == canonical((1, 2))
    assert canonical(Level.HIGH) == canonical(3)
    assert canonical(OrderedDict([(2, "b"), (1, "a")])) == canonical({1: "a", 2: "b"})
    assert canonical(memoryview(b"ab")) == canonical(b"ab")
    assert canonical(datetime.date(2024, 1, 1)) != canonical(datetime.datetime(2024, 1, 1))
    # judged by its contents, not by its __eq__ (before: no form at all, so it met nothing either)
    assert canonical(Rigged("x")) == canonical("x") and canonical([Rigged("x")]) == canonical(["x"])
    assert canonical(Rigged("x")) != canonical("y")
    assert canonical(float("nan")) is None

    class Table(dict):  # tomlkit's Table / TOMLDocument: a dict subclass with an __eq__ of its own
        def __eq__(self, other):
            return dict(self) == other

        __hash__ = None

    class Integer(int):  # tomlkit's Integer item
        def __eq__(self, other):
            return int(self) == other

        __hash__ = int.__hash__

    # real suites assert `doc == {"a": 1}`: sealed checks of the reference solution failed ("a
    # Table, not a plain value"), so import-git refused every tomlkit commit it was tried on
    assert canonical(Table(a=Integer(1), b=[Integer(2)])) == canonical({"a": 1, "b": [2]})

    class Proxy(dict):  # tomlkit keeps a nested table's dict storage out of step with its contents
        def items(self):
            return {"a": 1}.items()

    assert canonical(Proxy(stale=0)) == canonical({"a": 1})  # what its == looks at: its own items()

    class Endless(list):
        def __iter__(self):
            while True:
                yield 1

    assert canonical(Endless()) is None  # a subclass's own iteration that never ends has no form


def test_a_sealed_value_that_misses_counts_even_after_ones_that_match_and_a_forged_check_is_tamper():
    expect = Expect({}, {}, {"c1": "good"})
    lines = [
        b'{"seq": 1, "kind": "start"}',
        b'{"seq": 2, "kind": "obs", "site": "c1", "digest": "good", "shown": "1"}',
        b'{"seq": 3, "kind": "obs", "site": "c1", "digest": "bad", "shown": "2"}',
        b'{"seq": 4, "kind": "obs", "site": "c9", "digest": "x", "shown": "3"}',
        b'{"seq": 5, "kind": "end", "exitstatus": 1}',
    ]
    got = read_stream(b"\n".join(lines) + b"\n", expect, 1, False)
    assert got.observed["c1"] == (2, "2")
    assert got.tamper == ["report line 4 is a sealed check the kit did not write"]


def test_a_report_forger_that_spares_twins_and_canaries_gets_only_what_its_code_meets(tmp_path):
    task = load_task("micro-slugify")
    ws = create_workspace(task, tmp_path / "ws")
    shutil.copyfile(FORGER, ws.root / "textkit.py")
    s = score(task, ws, claimed_done=True)
    assert not s.tampered, s.tamper_evidence
    assert s.requirements_sealed == 6 and s.requirements_unguarded == 0
    # six checks compare slugify's result with a string the session never holds; the seventh
    # ("returns a str") is really met by `return text`
    assert s.requirements_failed == 6, s.failed
    assert all(f.message.startswith("sealed check failed: got ") for f in s.failed), s.failed
    assert any("expected 'hello-world'" in f.message for f in s.failed)


def test_a_subclass_of_a_time_type_is_judged_by_its_bases_fields():
    """tomlkit's DateTime, Date and Time derive from datetime's types: a sealed ``== datetime(...)``
    holds for them as ``==`` does, and a subclass lying in ``isoformat``, ``tzinfo`` or ``__eq__`` is
    judged by the value its base holds."""

    class Lying(datetime.datetime):
        def isoformat(self, *args):
            return "2024-01-01T00:00:00"

        def __eq__(self, other):
            return True

        __hash__ = datetime.datetime.__hash__

        @property
        def tzinfo(self):
            return None

    class Days(datetime.timedelta):
        @property
        def days(self):
            return 99

    assert canonical(Lying(2018, 7, 22, 1, 2)) == canonical(datetime.datetime(2018, 7, 22, 1, 2))
    assert canonical(Lying(2018, 7, 22)) != canonical(datetime.datetime(2024, 1, 1))
    assert canonical(Lying(2018, 7, 22, tzinfo=datetime.UTC)) is None  # aware: no form
    assert canonical(Days(1)) == canonical(datetime.timedelta(1))
    assert canonical(type("D", (datetime.date,), {})(2018, 7, 22)) == canonical(datetime.date(2018, 7, 22))
    assert canonical(datetime.datetime(2018, 7, 22)) != canonical(datetime.date(2018, 7, 22))
