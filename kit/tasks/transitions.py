"""How a test's outcome on each side of a change counts: the one small vocabulary the importer
(:mod:`kit.importers.git`) and scoring share, decided here and nowhere else (after SWE-bench's
``grading.py``, with Multi-SWE-bench's none -> pass).

A test has an :class:`Outcome` on each side -- the **base** (the starting code) and the **change**
(the reference solution when a task is imported or validated, the agent's final tree when a run is
scored). The pair is a :class:`Transition`; :data:`MEANING` says what each counts as.

A skip or xfail is never a pass: a hidden test credits only with :data:`Outcome.PASSED` on the change
side, and :func:`is_hidden_test` needs a real failure at the base. An xpass (a test marked xfail that
passed) counts as a skip: it is never credited, and is neutral at the base.
"""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    PASSED = "passed"
    FAILED = "failed"  # an assertion, an error, a timeout: anything but a pass or a skip
    SKIPPED = "skipped"
    XFAILED = "xfailed"  # expected to fail and failed (pytest.mark.xfail, unittest.expectedFailure)
    XPASSED = "xpassed"  # marked xfail (not strict) and passed: pytest calls it passed, the kit a skip
    ABSENT = "absent"  # not collected on that side (the test does not exist there, or did not import)


class Transition(StrEnum):
    FAIL_TO_PASS = "fail->pass"
    PASS_TO_PASS = "pass->pass"
    PASS_TO_FAIL = "pass->fail"
    PASS_TO_NONE = "pass->none"
    PASS_TO_SKIP = "pass->skip"
    FAIL_TO_FAIL = "fail->fail"
    NONE_TO_PASS = "none->pass"
    NONE_TO_FAIL = "none->fail"
    NEUTRAL = "neutral"


#: What each transition counts as (docs/tasks.md shows this table).
MEANING: dict[Transition, str] = {
    Transition.FAIL_TO_PASS: "a hidden test (a requirement): fails at the base, passes with the change",
    Transition.PASS_TO_PASS: "an own test that must keep passing",
    Transition.PASS_TO_FAIL: "a regression",
    Transition.PASS_TO_NONE: "a regression: it ran at the base and no longer does (it does not collect)",
    Transition.PASS_TO_SKIP: "a regression: a passing test that now skips or xfails was switched off "
    "(code under test can raise SkipTest)",
    Transition.FAIL_TO_FAIL: "fails on both sides (or skips with the change): neither a requirement nor an own test",
    Transition.NONE_TO_PASS: "a new test (absent at the base) that passes: counted as a test added",
    Transition.NONE_TO_FAIL: "a new test that fails",
    Transition.NEUTRAL: "skipped, xfail or xpass at the base: says nothing either way (an own test skipped "
    "on this platform is no failure; a hidden test that skips is never credited)",
}

_SKIPS = (Outcome.SKIPPED, Outcome.XFAILED, Outcome.XPASSED)


def outcome_of(passed: bool | None, message: str = "") -> Outcome:
    """A test's outcome from what a scoring session reports for it: ``passed`` (None: not reported)
    and its message, which starts with ``skipped:`` / ``xfailed:`` for a skip / an expected failure."""
    if passed is None:
        return Outcome.ABSENT
    if passed:
        return Outcome.PASSED
    head = message.lstrip().lower()
    if head.startswith("xpass"):
        return Outcome.XPASSED
    if head.startswith("xfail"):
        return Outcome.XFAILED
    if head.startswith("skipped"):
        return Outcome.SKIPPED
    return Outcome.FAILED


def transition(base: Outcome, change: Outcome) -> Transition:
    """The transition of one test from its outcome at the base to its outcome with the change."""
    if base in _SKIPS:
        return Transition.NEUTRAL
    if base is Outcome.ABSENT:
        if change is Outcome.PASSED:
            return Transition.NONE_TO_PASS
        return Transition.NEUTRAL if change in _SKIPS or change is Outcome.ABSENT else Transition.NONE_TO_FAIL
    if base is Outcome.PASSED:
        if change is Outcome.PASSED:
            return Transition.PASS_TO_PASS
        if change in _SKIPS:
            return Transition.PASS_TO_SKIP
        return Transition.PASS_TO_NONE if change is Outcome.ABSENT else Transition.PASS_TO_FAIL
    # base FAILED
    return Transition.FAIL_TO_PASS if change is Outcome.PASSED else Transition.FAIL_TO_FAIL


def is_hidden_test(t: Transition) -> bool:
    """A test the importer keeps as a requirement: it fails at the base and passes with the change."""
    return t is Transition.FAIL_TO_PASS


def is_own_test(t: Transition) -> bool:
    """A base test that stays among the own tests: it passes on both sides."""
    return t is Transition.PASS_TO_PASS


def is_regression(t: Transition) -> bool:
    """A test that passed at the base and does not pass with the change (skipping counts: see above)."""
    return t in (Transition.PASS_TO_FAIL, Transition.PASS_TO_NONE, Transition.PASS_TO_SKIP)


def credits(change: Outcome) -> bool:
    """Whether a hidden test's outcome on the change side credits its requirement (a skip never does)."""
    return change is Outcome.PASSED
