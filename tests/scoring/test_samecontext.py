"""A value's ``__eq__`` cannot tell a requirement's ``assert a == b``, its twin's check and its shadow's
apart by the context it is called in (RT40b-1/3 and their variants): each comparison -- with the real
expected value or with a mirror -- is made by one helper, from the same frame, at the same depth, with
the operands held as often, in the same order; only the data compared differ. Checked here on the
module copy the kit writes (``inject_folder``, compiled with pytest's assertion rewriting as in a
scoring session): a probe value records, at each ``__eq__``, what it can see of its context."""

from __future__ import annotations

import ast
import random
import sys
import textwrap

import pytest
from _pytest.assertion.rewrite import rewrite_asserts

from kit.scoring.inject import inject_folder

#: ``area`` returns a probe: at each ``__eq__`` it notes its own references, the other side's, the
#: room left before a RecursionError (how deep it is called), whether the other side is of the
#: expected value's type, and then answers as a plain int
PROBE = """
import sys

SEEN = []


def room():
    n = 0

    def dive():
        nonlocal n
        n += 1
        dive()

    try:
        dive()
    except RecursionError:
        pass
    return n


class Probe(int):
    def __eq__(self, other):
        SEEN.append((sys.getrefcount(self), sys.getrefcount(other), room(), type(other).__name__))
        return int.__eq__(self, other)

    __hash__ = int.__hash__


def area(w, h):
    return Probe(w * h)
"""

#: the expected side: a large int computed in the test, on either side, or held in a name
HIDDEN = """
from probe import area


def test_large():
    w, h = 3000, 4000
    assert area(w, h) == w * h


def test_expected_first():
    w, h = 3000, 5000
    assert w * h == area(w, h)


def test_held_in_names():
    w, h = 2, 61728
    want = w * h
    got = area(w, h)
    assert got == want
"""


def _module(tmp_path, seed):
    """The kit's copy of HIDDEN, compiled as a scoring session does; -> (namespace, twins, shadows)."""
    (tmp_path / "test_it.py").write_text(textwrap.dedent(HIDDEN))
    found = inject_folder(tmp_path, random.Random(seed))
    source = (tmp_path / "test_it.py").read_text()
    tree = ast.parse(source)
    rewrite_asserts(tree, source.encode(), str(tmp_path / "test_it.py"), None)
    space: dict = {"__name__": "test_it"}
    exec(compile(tree, str(tmp_path / "test_it.py"), "exec"), space)
    return space, found


def _seen(space, name, probe):
    """What the probe saw while test ``name`` ran (its comparisons), and whether the test passed."""
    probe.SEEN.clear()
    try:
        space[name]()
        passed = True
    except AssertionError:
        passed = False
    return list(probe.SEEN), passed


@pytest.mark.parametrize("seed", range(6))
def test_a_value_sees_the_same_context_in_a_requirement_its_twin_and_its_shadow(tmp_path, seed, monkeypatch):
    """For each twinned test: the probe's ``__eq__`` calls in the requirement, twin and shadow see the
    same references (its own and the other side's), the same depth and the same types, in the same
    order -- the mirror's comparison and the real one alike (RT40b-1: ``getrefcount(self)``; its
    variant ``getrefcount(other)``; RT40b-3: a depth probe; the mirror's type). The requirement
    passes, the twin fails, the shadow passes. Fails on the code before: a requirement compared once,
    at another depth, its twin's mirror check in a helper further down holding more references."""
    (tmp_path / "probe.py").write_text(PROBE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "probe", raising=False)
    space, found = _module(tmp_path, seed)
    probe = sys.modules["probe"]
    shadow_of = {key: name for name, key in found.shadows.items()}
    assert len(found.twins) == 3
    for twin, key in found.twins.items():
        test = key.rsplit("::", 1)[-1]
        real, passed = _seen(space, test, probe)
        assert passed, key
        assert len(real) == 2, (key, real)  # the mirror's comparison and the real one
        assert real[0] == real[1], (key, real)  # nothing tells one from the other
        twinned, twin_passed = _seen(space, twin, probe)
        shadowed, shadow_passed = _seen(space, shadow_of[key], probe)
        assert (twinned, shadowed) == (real, real), key
        assert (twin_passed, shadow_passed) == (False, True), key


#: ``area`` implementations and how the test's ``assert area(w, h) == w * h`` must end with each
SEMANTICS = {
    "right": "def area(w, h):\n    return w * h\n",
    "wrong": "def area(w, h):\n    return [w, h]\n",
    "raises in __eq__": (
        "class V(int):\n    def __eq__(self, other):\n        raise ValueError('no eq')\n    __hash__ = int.__hash__\n"
        "def area(w, h):\n    return V(0)\n"
    ),
    "numpy-style result": (
        "class R:\n    def __bool__(self):\n        raise ValueError('ambiguous')\n"
        "class V(int):\n    def __eq__(self, other):\n        return R()\n    __hash__ = int.__hash__\n"
        "def area(w, h):\n    return V(0)\n"
    ),
    "truthy non-bool result": (
        "class V(int):\n    def __eq__(self, other):\n        return [1]\n    __hash__ = int.__hash__\n"
        "def area(w, h):\n    return V(0)\n"
    ),
    "reflected": (  # NotImplemented: Python asks the other side, which says equal to a 'twelve' string
        "class V:\n    def __eq__(self, other):\n        return NotImplemented\n"
        "class W(int):\n    def __eq__(self, other):\n        return isinstance(other, V)\n    __hash__ = int.__hash__\n"
        "def area(w, h):\n    return V()\n"
        "def want(n):\n    return W(n)\n"
    ),
}

ONE = """
from probe import area, want


def test_one():
    w, h = 3000, 4000
    assert area(w, h) == want(w * h)
"""


def _ends(space, name):
    try:
        space[name]()
    except BaseException as exc:  # noqa: BLE001 -- how the test ended is what is compared
        return type(exc).__name__, str(exc).splitlines()[0] if str(exc) else ""
    return "passed", ""


@pytest.mark.parametrize("impl", sorted(SEMANTICS))
def test_a_requirement_ends_as_its_plain_assert_would(tmp_path, monkeypatch, impl):
    """The session's ``assert <check>(a, b, mode)`` passes, fails or raises exactly where the test's
    own ``assert a == b`` would (``NotImplemented`` and the reflected ``__eq__``, an exception from
    ``__eq__`` or from ``bool()`` of its result, a truthy non-bool result), with the same exception
    and, for a failure, the same first line (``assert [3000, 4000] == 12000000``), compiled with
    pytest's rewriting both."""
    source = SEMANTICS[impl] + ("" if "def want" in SEMANTICS[impl] else "def want(n):\n    return n\n")
    (tmp_path / "probe.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "probe", raising=False)
    tree = ast.parse(textwrap.dedent(ONE))  # the test as it is, rewritten by pytest
    rewrite_asserts(tree, textwrap.dedent(ONE).encode(), str(tmp_path / "plain_it.py"), None)
    original: dict = {"__name__": "plain_it"}
    exec(compile(tree, str(tmp_path / "plain_it.py"), "exec"), original)
    monkeypatch.setattr(sys.modules[__name__], "HIDDEN", ONE)
    space, found = _module(tmp_path, 1)
    assert list(found.twins.values()) == ["test_it.py::test_one"]
    assert _ends(space, "test_one") == _ends(original, "test_one")


#: expected values of types whose mirror was a bare sentinel object (told from a real expected value by
#: its type alone) and is now another value of the same type
TYPED = {
    "set": "{1, 2}",
    "frozenset": "frozenset({'a', 'b'})",
    "bools": "{True, False}",  # (its elements' mirrors are itself: one swapped for a sentinel)
    "complex": "complex(1, 2)",
    "Decimal": "__import__('decimal').Decimal('1.5')",
    "Fraction": "__import__('fractions').Fraction(1, 3)",
}


@pytest.mark.parametrize("kind", sorted(TYPED))
def test_a_value_true_to_its_type_alone_passes_its_twin(kind):
    """A value whose ``__eq__`` answers True to every value of the expected value's type, False to
    anything else (the kit's sentinel objects), passes a right test and -- now that the mirror of a
    set, frozenset, complex, Decimal or Fraction is another value of that type -- its twin (gamed); a
    right answer fails the twin. Fails on the code before (the mirror was a sentinel: not gamed)."""
    from tests.scoring.test_twins import _run

    want = TYPED[kind]
    liar = (
        f"WANT = {want}\n"
        "class Liar:\n    def __eq__(self, other):\n        return type(other) is type(WANT)\n"
        "    __hash__ = object.__hash__\n"
    )
    test = f"def f():\n    return {{}}\n\n\ndef test_f():\n    want = {want}\n    assert f() == want\n"
    assert _run(test.replace("return {}", f"return {want}")) == (True, False)
    assert _run(liar + test.replace("return {}", "return Liar()")) == (True, True)


GIVEN = """
from hypothesis import given, settings, strategies as st

from probe import area, want


@settings(max_examples=5)
@given(st.integers(1, 9))
def test_given(w):
    assert area(w, 2) == want(w * 2)


@settings(max_examples=5)
@given(h=st.integers(1, 9))
def test_given_by_name(h):
    assert area(3, h) == want(3 * h)
"""


def test_a_hypothesis_test_gets_no_twin_and_still_runs(tmp_path, monkeypatch):
    """hypothesis refuses a ``@given`` function with defaults: a twin's (or a requirement's) bound
    parameter broke the twin and its shadow (a must-pass canary failed: the reference solution
    ``tampered``). Such a test gets no twin (``unguarded``) and runs as written. Fails on the code
    before (each had a twin and a shadow)."""
    pytest.importorskip("hypothesis")
    (tmp_path / "probe.py").write_text(SEMANTICS["right"] + "def want(n):\n    return n\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "probe", raising=False)
    monkeypatch.setattr(sys.modules[__name__], "HIDDEN", GIVEN)
    space, found = _module(tmp_path, 2)
    assert not found.twins and not found.shadows
    assert sorted(found.unguarded) == ["test_it.py::test_given", "test_it.py::test_given_by_name"]
    assert _ends(space, "test_given") == _ends(space, "test_given_by_name") == ("passed", "")
