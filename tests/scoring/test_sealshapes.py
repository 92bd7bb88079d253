"""Sealed checks beyond plain equality (kit/scoring/sealshapes.py): membership in a literal container,
identity with None/True/False, expected values computed from literals with arithmetic and string
formatting. Each shape: the session's copy holds nothing of the expected value; on plain values the
sealed check decides as the original assertion did; a value that lies in ``__eq__``, ``__hash__``,
``__contains__`` or ``__repr__`` fails it (where the original let some of them through)."""

import ast
import textwrap
import unittest

import pytest

from kit.scoring.observe import observer
from kit.scoring.seal import Site, module_names, seal_test
from kit.scoring.session import Expect, read_stream

LIARS = {
    "equal to anything": "class L:\n    def __eq__(self, o):\n        return True\n    __hash__ = object.__hash__\n",
    "a str equal to anything": (
        "class L(str):\n    def __eq__(self, o):\n        return True\n    __hash__ = str.__hash__\n"
        "    def __repr__(self):\n        return {want!r}\n"
    ),
    "an int equal to nothing": "class L(int):\n    def __eq__(self, o):\n        return False\n    __hash__ = int.__hash__\n",
}


def _seal(check: str) -> tuple[ast.Module, dict[str, Site]]:
    tree = ast.parse(f"def test_x(self):\n    {check}\n")
    return tree, seal_test(tree.body[0], "k", module_names(tree), "OBS", [0])


def _sealed_verdict(check: str, value_src: str, prelude: str = "") -> bool:
    """Run the sealed copy of ``check`` with ``f()`` returning ``value_src``; the kit's verdict."""
    tree, sites = _seal(check)
    assert sites, f"not sealed: {check}"
    sent: list[dict] = []
    space: dict = {"OBS": observer(lambda **msg: sent.append(msg))}
    exec(prelude + f"\ndef f():\n    return {value_src}\n", space)
    exec(compile(ast.fix_missing_locations(tree), "<sealed>", "exec"), space)
    space["test_x"](None)
    got = {m["site"]: m for m in sent}
    return all(s in got and check_.accepts(got[s]["digest"], got[s]["ident"]) for s, check_ in sites.items())


def _original_verdict(check: str, value_src: str, prelude: str = "") -> bool:
    space: dict = {}
    exec(prelude + f"\ndef f():\n    return {value_src}\n\ndef test_x(self):\n    {check}\n", space)
    try:
        space["test_x"](unittest.TestCase())
    except AssertionError:
        return False
    return True


#: check -> (values it holds for, values it does not, literals of the expected side)
SHAPES = {
    "in a tuple": (
        "assert f() in (1, 2.5, 'x9x')",
        ["1", "True", "2.5", "'x9x'"],
        ["3", "'x9'", "[1]", "None"],
    ),
    "in a dict's keys": ("assert f() in {'k7': 1, (2, 3): 4}", ["'k7'", "(2, 3)"], ["1", "(2,)", "'k'"]),
    "in a set": ("assert f() in {frozenset({1}), 'q'}", ["frozenset({1})", "{1}", "'q'"], ["1", "'Q'"]),
    "assertIn": ("self.assertIn(f(), ['a5', [1, 2]])", ["'a5'", "[1, 2]"], ["(1, 2)", "'a'"]),
    "not in": ("assert f() not in [77, 'q8q']", ["5", "'q'", "(77,)"], ["77", "77.0", "'q8q'"]),
    "assertNotIn": ("self.assertNotIn(f(), (0.5, 'z3'))", ["1", "'z'"], ["0.5", "'z3'"]),
    "is None": ("assert f() is None", ["None"], ["0", "False", "''", "[]"]),
    "assertIsNone": ("self.assertIsNone(f())", ["None"], ["0", "'None'"]),
    "is not None": ("assert f() is not None", ["0", "False", "''"], ["None"]),
    "assertIsNotNone": ("self.assertIsNotNone(f(), 'msg')", ["0"], ["None"]),
    "is True": ("assert f() is True", ["True"], ["1", "1.0", "'True'", "False"]),
    "assertIs False": ("self.assertIs(f(), False)", ["False"], ["0", "None", "True"]),
    "assertIsNot True": ("self.assertIsNot(True, f())", ["1", "False"], ["True"]),
    "arithmetic": ("assert f() == 3 * 7 ** 2 - 10 // 4 + 9 % 4", ["146", "146.0"], ["147", "145.5"]),
    "division": ("assert f() == 7 / 2", ["3.5"], ["3", "4"]),
    "a sequence times n": ("assert f() == ['ab' * 2] * 3", ["['abab'] * 3"], ["['abab'] * 2", "'abab' * 3"]),
    "an f-string": ("assert f() == f'{2.5:>6}|{\"x\"!r}|{7:03d}'", ["'   2.5|\\'x\\'|007'"], ["'2.5|x|7'"]),
    "str.format": ("assert f() == '{}-{n:.2f}'.format('a1', n=2)", ["'a1-2.00'"], ["'a1-2'"]),
    "range and sorted": (
        "assert f() == list(range(2, 9, 3)) + sorted({3, 1})",
        ["[2, 5, 8, 1, 3]"],
        ["range(2, 9, 3)"],
    ),
    "a literal string's methods": ("assert f() == '-'.join('a,b'.split(',')).upper()", ["'A-B'"], ["'a-b'"]),
    "%-formatting": ("self.assertEqual(f(), '%s=%d' % ('w', 42))", ["'w=42'"], ["'w=42.0'"]),
}


@pytest.mark.parametrize("check, right, wrong", list(SHAPES.values()), ids=list(SHAPES))
def test_a_sealed_check_decides_as_the_original_on_plain_values(check, right, wrong):
    for value in right:
        assert _original_verdict(check, value), value  # (the table itself is right)
        assert _sealed_verdict(check, value), value
    for value in wrong:
        assert not _original_verdict(check, value), value
        assert not _sealed_verdict(check, value), value


@pytest.mark.parametrize("check", [c for c, _, _ in SHAPES.values() if "not" not in c.lower()], ids=str)
@pytest.mark.parametrize("liar", ["equal to anything", "a str equal to anything"], ids=str)
def test_a_value_that_lies_in_eq_or_repr_meets_no_sealed_check(check, liar):
    """(``not in``/``is not``: a value that is none of the elements passes them, lying or not)"""
    value = "L('')" if "str" in liar else "L()"
    assert not _sealed_verdict(check, value, LIARS[liar].format(want="x9x"))


def test_an_int_that_lies_it_is_equal_to_nothing_is_judged_by_its_value():
    prelude, check = LIARS["an int equal to nothing"], "assert f() not in [77, 'q8q']"
    assert _original_verdict(check, "L(77)", prelude)  # the original let it through
    assert not _sealed_verdict(check, "L(77)", prelude)
    assert not _sealed_verdict("assert f() == 3 * 7 ** 2 - 10 // 4 + 9 % 4", "L(145)", prelude)


@pytest.mark.parametrize(
    "check, secrets",
    [
        ("assert f() in (1, 2.5, 'x9x')", ["x9x", "2.5", " in "]),
        ("self.assertIn(f(), {'k7': 1})", ["k7", "assertIn"]),
        ("assert f() not in [77]", ["77", "not in"]),
        ("assert f() is None", ["None", " is "]),
        ("self.assertIs(f(), False)", ["False", "assertIs"]),
        ("want = 3 * 7 ** 2\n    assert f() == want", ["147", "7 ** 2", "want"]),
        ("assert f() == f'{5:>4}x'", ["   5x", "{5", ">4"]),
        ("assert f() == '{}-{n}'.format(12, n='zz')", ["zz", "12", "format"]),
        ("assert f() == ', '.join(sorted(['b7', 'a7']))", ["a7", "b7", "join", "sorted"]),
    ],
)
def test_nothing_of_the_expected_value_is_in_the_session_copy(check, secrets):
    tree, sites = _seal(check)
    out = ast.unparse(tree)
    assert len(sites) == 1 and "OBS('c1', f())" in out, out
    assert not [s for s in secrets if s in out], out


def test_what_is_left_unsealed():
    """A substring check, a string container (substring semantics), an unbounded computation, a
    container of a value with no canonical form, an identity with anything but a singleton."""
    for check in (
        "assert 'sub' in f()",
        "assert f() in 'abc'",
        "assert f() in ()",
        "assert f() == 2 ** 100000",
        "assert f() == 'ab' * 10 ** 6",
        "assert f() == 1 / 0",
        "assert f() in (1j, 2)",
        "assert f() is g()",
        "assert f() == '{0.real}'.format(3)",
        "assert f() == f'{[1]}'",
        "assert f() == range(3)",  # (no canonical form)
        "assert f() == list(range(10 ** 9))",
        "assert f() == 'x'.center(10 ** 9)",
        "assert f() == 'ab'.encode('rot13')",
        "assert f() == sorted([1, 'a'])",
    ):
        tree, sites = _seal(check)
        assert sites == {}, check
        assert textwrap.dedent(ast.unparse(tree)).count("assert") == 1, check


def test_an_identity_observation_is_read_from_the_stream_and_a_forged_one_is_tamper():
    is_none = Site("k", "", "None", True, kind="is", among=frozenset({"None"}))
    expect = Expect({}, {}, {"c1": is_none, "c2": "d2"})
    lines = [
        b'{"seq": 1, "kind": "start"}',
        b'{"seq": 2, "kind": "obs", "site": "c1", "digest": "x", "shown": "None", "ident": "None"}',
        b'{"seq": 3, "kind": "obs", "site": "c2", "digest": "d2", "shown": "1", "ident": ""}',
        b'{"seq": 4, "kind": "obs", "site": "c1", "digest": "x", "shown": "0", "ident": ""}',
        b'{"seq": 5, "kind": "obs", "site": "c1", "digest": "x", "shown": "0", "ident": ["None"]}',
        b'{"seq": 6, "kind": "end", "exitstatus": 0}',
    ]
    got = read_stream(b"\n".join(lines) + b"\n", expect, 1, False)
    assert got.observed == {"c1": (2, "0"), "c2": (1, None)}
    assert "report line 5 is a sealed check the kit did not write" in got.tamper
    assert not [t for t in got.tamper if "line 2" in t or "line 3" in t or "line 4" in t]
