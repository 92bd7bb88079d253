"""Settling an assembled task from what ``kit tasks validate`` shows of it: which own tests and
hidden tests to leave out (each with why) before it is validated again."""

from __future__ import annotations

from kit.importers.git.result import ImportResult, drop
from kit.scoring.scorer import Evaluation
from kit.tasks.transitions import Outcome, is_regression, outcome_of, transition


def runaways(start: Evaluation, result: ImportResult) -> bool:
    """Today's scoring has no per-test time limit: a hidden test that runs away at the base stops
    the whole session, which would make every unsolved run tampered. When the base's session
    hangs, the tests that ran past the limit in their probes are left out."""
    hangs = [k for k, kind in result.kinds.items() if kind == "hang"]
    if not (start.acceptance.timed_out and hangs):
        return False
    for key in hangs:
        drop(
            result,
            key,
            "runs past the time limit at the base, and the kit's scoring then stops the whole "
            "session (no per-test time limit): every unsolved run would count as tampered",
        )
    return True


def own_failures(start: Evaluation, end: Evaluation, result: ImportResult) -> bool:
    """Leave out own tests that fail at the base, or pass there and not with the reference solution."""
    before_count = len(result.deselected)
    for nodeid, (ok, message) in sorted(start.own.outcomes.items()):
        before = outcome_of(ok, message)
        ok2, message2 = end.own.outcomes.get(nodeid, (None, "not run"))
        if before is Outcome.FAILED:
            result.deselected[nodeid] = f"fails at the base: {message[:120]}"
        elif is_regression(transition(before, outcome_of(ok2, message2))):
            result.deselected[nodeid] = f"fails with the reference solution: {message2[:120]}"
    return len(result.deselected) > before_count


def not_fail_to_pass(start: Evaluation, end: Evaluation, result: ImportResult) -> bool:
    """Leave out hidden tests that pass at the base or fail with the solution in the assembled task."""
    dropped = False
    for key in list(result.hidden):
        ok_base, _ = start.results.get(key, (False, ""))
        ok_change, message = end.results.get(key, (False, "not run"))
        if ok_base or not ok_change:
            why = "passes at the base" if ok_base else message[:120]
            drop(result, key, f"in the assembled task: {why}")
            dropped = True
    return dropped


def uncollected(start: Evaluation, end: Evaluation | None, result: ImportResult) -> bool:
    """Own test modules that do not even collect at the base or with the reference solution (a data
    file from a submodule, a module the change deletes): ``--ignore``d, which ``own_tests_deselect``
    (test ids) cannot do."""
    before = len(result.ignored)
    for where, ev in (("at the base", start), ("with the reference solution", end)):
        for error in ev.own.errors if ev is not None else []:
            path, _, why = error.partition(": ")
            path = path.split("::")[0]
            if path.endswith(".py") and path not in result.ignored:
                result.ignored[path] = f"does not collect {where}: {why[:120]}"
    return len(result.ignored) > before
