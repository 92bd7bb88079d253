"""No flaky requirement: the importer scores the reference solution three times in all (``kit tasks
validate``'s scoring and :data:`RUNS` - 1 more here, side by side, each on a fresh workspace); a hidden test or an
own test whose outcome is not the same every time is left out, with why -- as a test that runs away
at the base is (:mod:`.settle`). A test that passed by luck would otherwise decide a run."""

from __future__ import annotations

import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kit.scoring.scorer import Evaluation, evaluate
from kit.tasks.task import Task, apply_solution
from kit.tasks.transitions import outcome_of
from kit.tasks.workspace import create_workspace

#: How many times the reference solution is scored in all.
RUNS = 3


def _states(ev: Evaluation) -> dict[str, str]:
    hidden = {k: "passed" if ok else "failed" for k, (ok, _) in ev.results.items()}
    own = {k: str(outcome_of(ok, msg)) for k, (ok, msg) in ev.own.outcomes.items()}
    return {**hidden, **own}


def _score(task: Task, sandbox: str | None) -> dict[str, str]:
    """The reference solution scored once more, on a fresh workspace."""
    with tempfile.TemporaryDirectory(prefix="orchbench-flaky-") as tmp:
        ws = create_workspace(task, Path(tmp) / "repo")
        apply_solution(task, ws.root)
        return _states(evaluate(task, ws.root, ws, sandbox=sandbox))


def flaky_tests(task: Task, first: Evaluation, sandbox: str | None = None) -> dict[str, str]:
    """{hidden test key or own test node id: why} for the tests whose outcome with the reference
    solution differs between ``first`` (validation's scoring) and :data:`RUNS` - 1 more scorings."""
    with ThreadPoolExecutor(RUNS - 1) as pool:  # side by side: each is a few sandboxed processes
        later = list(pool.map(lambda _: _score(task, sandbox), range(RUNS - 1)))
    seen = [_states(first), *later]
    out = {}
    for key in sorted(set().union(*seen)):
        states = [s.get(key, "not run") for s in seen]
        if len(set(states)) > 1:
            out[key] = (
                f"flaky: with the reference solution its outcome differs between {RUNS} scorings "
                f"({', '.join(states)})"
            )
    return out
