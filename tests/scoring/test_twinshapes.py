"""Twins of ``in``, ``startswith``, tolerances, orderings and ``all(...)``: the expected side mirrored
(kit/scoring/twinshapes.py). A right answer fails the twin -- edge cases where a careless mirror
would be met legitimately included -- and a value true to everything passes it (gamed)."""

import pytest

from tests.scoring.test_twins import _run

#: a value true to every check the shapes make
ANY = """
class A(str):
    def __eq__(self, other):
        return True

    __hash__ = str.__hash__

    def __contains__(self, part):
        return True

    def startswith(self, *args):
        return True

    endswith = startswith

    def __sub__(self, other):
        return self

    __rsub__ = __sub__

    def __abs__(self):
        return self

    def __lt__(self, other):
        return True

    __le__ = __gt__ = __ge__ = __lt__


def f(*args):
    return A("")
"""

CHECKS = {
    "in a literal tuple": ("8", "assert f() in (1, 8)"),  # 1's mirror is 8: left out
    "a substring of a literal": ("''", 'assert f() in "abc"'),  # '' is in every string
    "a literal in the result": ("'three'", 'assert "three" in f(3)'),
    "a literal in a result list": ("[1, 8]", "assert 1 in f()"),
    "a name bound to a literal": ("'b'", "want = ('a', 'b')\n    assert f() in want"),
    "startswith a tuple": ("'bar'", 'assert f().startswith(("a", "b"))'),
    "endswith": ("b'xyz'", 'assert f().endswith(b"z")'),
    "a tolerance": ("0.7", "assert abs(f() - 0.5) <= 0.25"),
    "a tolerance, expected first": ("0.7", "assert 0.25 > abs(0.5 - f())"),
    "greater than a literal": ("float('inf')", "assert f() > 0"),
    "at most a literal": ("-3", "assert 5 >= f()"),
    "all of equalities": ("2", "assert all(f(n) == w for n, w in ((1, 2), (3, 2)))"),
    "all of memberships": ("2", "assert all(f(n) in (2, 3) for n in range(3))"),
}


@pytest.mark.parametrize("value, check", list(CHECKS.values()), ids=list(CHECKS))
def test_a_right_answer_fails_the_twin(value, check):
    assert _run(f"def f(*args):\n    return {value}\n\n\ndef test_x():\n    {check}\n") == (True, False)


@pytest.mark.parametrize("value, check", list(CHECKS.values()), ids=list(CHECKS))
def test_a_value_true_to_everything_passes_the_twin(value, check):
    assert _run(ANY + f"\n\ndef test_x():\n    {check}\n") == (True, True)


def test_shapes_with_nothing_to_mirror_keep_the_inverted_check():
    """``not in`` and comparisons of two computed values: a right answer fails the twin as before."""
    for check in ("assert f() not in (1, 2)", "assert f() < f() + 1", "assert 'x' not in str(f())"):
        assert _run(f"def f(*args):\n    return 0\n\n\ndef test_x():\n    {check}\n") == (True, False)
