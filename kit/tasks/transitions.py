"""How a test's outcome on each side of a change counts: one vocabulary, decided here and nowhere else
(cf. SWE-bench's ``swebench/harness/grading.py``). Scoring (:mod:`kit.tasks.scoring`) and the git
importer both use it.

An **outcome** is what one test did in one pytest session (:class:`Outcome`): ``passed``, ``failed``
(an error in setup or teardown too), ``skipped``, ``xfailed`` (marked ``xfail`` -- or
``pytest.xfail()`` -- and failed), ``xpassed`` (marked ``xfail`` and passed, not strict), or
``none`` (not in the session: not collected, or its module did not import).

A **transition** is a test's outcome before (the base commit) and after (the code under test, or the
change's head), :func:`transition`:

=============== ================================================================================
``fail->pass``  failed (or errored) before, passes after: a hidden test (a requirement) the change
                meets. Only a plain ``passed`` counts after: a test that skips, xfails or xpasses
                is never credited (:func:`credited`).
``none->pass``  absent before (a new test), passes after: a hidden test too, for the importer.
``pass->pass``  an own test the change keeps passing.
``pass->fail``  passed before, fails (or is gone) after: a **regression**.
``pass->skip``  passed before, skips or xfails after: a regression too -- the test, its
                configuration and its conftests are the base's, so only the code under test can
                have made it skip (an agent must not hide a regression behind ``pytest.skip``).
``fail->fail``  failed on both sides (``none->fail``: absent before, fails after).
``neutral``     skipped, xfailed or xpassed before (a known skip or known bug at the base): it
                neither counts as a failure nor as a regression, whatever it does after -- as
                SWE-bench's pass-to-pass leaves a skipped test out. An own test that skips or
                xfails at the base is never a failure of the task either (:func:`own_failure`).
=============== ================================================================================
"""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    XFAILED = "xfailed"
    XPASSED = "xpassed"
    NONE = "none"


class Transition(StrEnum):
    FAIL_TO_PASS = "fail->pass"
    NONE_TO_PASS = "none->pass"
    PASS_TO_PASS = "pass->pass"
    PASS_TO_FAIL = "pass->fail"
    PASS_TO_SKIP = "pass->skip"
    FAIL_TO_FAIL = "fail->fail"
    NONE_TO_FAIL = "none->fail"
    NEUTRAL = "neutral"


#: Outcomes that say nothing about the code: a skip, or a test that declares it is expected to fail.
NEUTRAL_OUTCOMES = frozenset({Outcome.SKIPPED, Outcome.XFAILED, Outcome.XPASSED})
#: Transitions that count as a regression of an own test.
REGRESSIONS = frozenset({Transition.PASS_TO_FAIL, Transition.PASS_TO_SKIP})
#: Transitions that make a test a hidden (fail -> pass) test of an imported task.
HIDDEN = frozenset({Transition.FAIL_TO_PASS, Transition.NONE_TO_PASS})


def outcome(value: object) -> Outcome:
    """``value`` (a string from a session's report, or None) as an :class:`Outcome`; anything else
    is ``none``."""
    try:
        return Outcome(value)
    except ValueError:
        return Outcome.NONE


def transition(before: Outcome | str | None, after: Outcome | str | None) -> Transition:
    """How a test that did ``before`` at the base and ``after`` now counts (the module docstring)."""
    before, after = outcome(before), outcome(after)
    if before in NEUTRAL_OUTCOMES:
        return Transition.NEUTRAL
    if before is Outcome.PASSED:
        if after in (Outcome.PASSED, Outcome.XPASSED):
            return Transition.PASS_TO_PASS
        return Transition.PASS_TO_SKIP if after in NEUTRAL_OUTCOMES else Transition.PASS_TO_FAIL
    if after is Outcome.PASSED:
        return Transition.NONE_TO_PASS if before is Outcome.NONE else Transition.FAIL_TO_PASS
    if after in NEUTRAL_OUTCOMES:
        return Transition.NEUTRAL
    return Transition.NONE_TO_FAIL if before is Outcome.NONE else Transition.FAIL_TO_FAIL


def is_regression(before: Outcome | str | None, after: Outcome | str | None) -> bool:
    """Does an own test that did ``before`` at the base and ``after`` now count as a regression?"""
    return transition(before, after) in REGRESSIONS


def is_hidden(before: Outcome | str | None, after: Outcome | str | None) -> bool:
    """Is a test that did ``before`` at the base and ``after`` with the change a hidden test?"""
    return transition(before, after) in HIDDEN


def credited(after: Outcome | str | None) -> bool:
    """Does a hidden test that did ``after`` meet its requirement? Only a plain pass does."""
    return outcome(after) is Outcome.PASSED


def own_failure(after: Outcome | str | None) -> bool:
    """Is an own test that did ``after`` a failure (of the task at its start, say)? Skips, xfails and
    xpasses are not; a test that is absent is not either (the session's errors say why)."""
    return outcome(after) is Outcome.FAILED
