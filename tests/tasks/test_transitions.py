"""The shared vocabulary of test transitions (kit/tasks/transitions.py)."""

import pytest

from kit.tasks.transitions import (
    Outcome,
    Transition,
    credits,
    is_hidden_test,
    is_own_test,
    is_regression,
    outcome_of,
    transition,
)

P, F, S, X, A = Outcome.PASSED, Outcome.FAILED, Outcome.SKIPPED, Outcome.XFAILED, Outcome.ABSENT
XP = Outcome.XPASSED


def test_outcome_of_the_stream():
    assert outcome_of(True) is P
    assert outcome_of(False, "assert 1 == 2") is F
    assert outcome_of(False, "skipped: needs windows") is S
    assert outcome_of(False, "xfailed: known bug") is X
    assert outcome_of(None) is A
    assert outcome_of(False, "xpassed (marked xfail)") is XP


@pytest.mark.parametrize(
    ("base", "change", "expected"),
    [
        (F, P, Transition.FAIL_TO_PASS),
        (P, P, Transition.PASS_TO_PASS),
        (P, F, Transition.PASS_TO_FAIL),
        (P, A, Transition.PASS_TO_NONE),
        (P, S, Transition.PASS_TO_SKIP),
        (P, X, Transition.PASS_TO_SKIP),
        (F, F, Transition.FAIL_TO_FAIL),
        (F, S, Transition.FAIL_TO_FAIL),
        (A, P, Transition.NONE_TO_PASS),
        (A, F, Transition.NONE_TO_FAIL),
        (S, F, Transition.NEUTRAL),
        (S, P, Transition.NEUTRAL),
        (X, P, Transition.NEUTRAL),
        (A, S, Transition.NEUTRAL),
        (XP, F, Transition.NEUTRAL),
        (P, XP, Transition.PASS_TO_SKIP),
    ],
)
def test_transition_table(base, change, expected):
    assert transition(base, change) is expected


def test_what_each_transition_counts_as():
    hidden = {t for t in Transition if is_hidden_test(t)}
    own = {t for t in Transition if is_own_test(t)}
    regressions = {t for t in Transition if is_regression(t)}
    assert hidden == {Transition.FAIL_TO_PASS}
    assert own == {Transition.PASS_TO_PASS}
    assert regressions == {Transition.PASS_TO_FAIL, Transition.PASS_TO_NONE, Transition.PASS_TO_SKIP}
    assert Transition.NEUTRAL not in hidden | own | regressions  # a skip at the base says nothing
    assert credits(P) and not credits(S) and not credits(X) and not credits(F) and not credits(XP)
