"""Checking candidate tests through the kit's own scorer and sandbox -- never plain pytest -- so what
is imported is what a run is scored by.

Each changed test file is checked on its own: a probe task whose ``acceptance/`` holds that module,
cut down to its candidate tests (with :func:`~kit.importers.git.testfiles.tolerant_imports`), and the
files laid with it, is scored (:func:`kit.scoring.scorer.evaluate`) on the base tree and on the
base tree with the reference solution, under the time limit and the sandbox's memory limit. When a
file's session does not end cleanly -- a test ran away (a loop, a memory blow-up) or the process
died -- each candidate is scored alone, so one runaway test cannot decide for its neighbours. The
probes run no own tests (their test command is ``true``); the assembled task is checked with them.

All of an import's probe sessions share one time budget (``--probe-budget``, default
:data:`BUDGET_FACTOR` times the per-session ``--timeout``): a test file whose session runs away makes
each of its tests run alone on both sides -- 2N sessions, each up to the time limit -- so without it
a repository of slow tests could hold an import for hours. No session is given longer than the
budget has left; when it runs out the import stops with one error saying so and how to raise it.
The validation that follows is not counted against the budget; it is bounded by the time limit: at
most three rounds of ``kit tasks validate`` (two scorings each, the limit doubled once when a session
timed out), then two more scorings of the reference solution (:mod:`.flaky`), each scoring's sessions
under the limit.
"""

from __future__ import annotations

import itertools
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kit.errors import TaskError
from kit.importers.exercism.marks import mark_source
from kit.importers.git.testfiles import reduce_module, tolerant_imports
from kit.importers.validate import USAGE_HINT, usage_error
from kit.scoring.scorer import Evaluation, evaluate
from kit.tasks.task import Task
from kit.tasks.transitions import Outcome, Transition, outcome_of, transition
from kit.tasks.workspace import Workspace
from kit.untrusted.confine import confined

Progress = Callable[[str], None]
#: The probe sessions' time budget, by default: this many times the per-session time limit.
BUDGET_FACTOR = 10


@dataclass
class Side:
    """A test's outcome on one side, with the message scoring gave and whether it ran out of time."""

    outcome: Outcome
    message: str = ""
    timed_out: bool = False


@dataclass
class Verdict:
    key: str  # "<repo-relative file>::[Class::]name"
    base: Side
    change: Side

    @property
    def transition(self) -> Transition:
        return transition(self.base.outcome, self.change.outcome)

    def reason(self) -> str:
        """Why the test is not a hidden test (empty when it is one)."""
        t = self.transition
        if t is Transition.FAIL_TO_PASS:
            return ""
        if t is Transition.PASS_TO_PASS:
            return "passes at the base already"
        if t is Transition.NEUTRAL:
            return f"skips at the base ({self.base.message[:120]})"
        if self.change.outcome in (Outcome.SKIPPED, Outcome.XFAILED):
            return f"skips with the change ({self.change.message[:120]})"
        return f"fails with the change: {self.change.message[:300]}"


def marked(source: str, module: str, severities: dict[str, str]) -> str:
    """``source`` with ``@pytest.mark.severity(...)`` on each test keyed ``<module>::...`` in ``severities``."""
    marks = {k: [f'pytest.mark.severity("{s}")'] for k, s in severities.items()}
    return mark_source(source, module, marks)


def acceptance_module(source: str, module: str, severities: dict[str, str], packages: set[str]) -> str:
    """The hidden module as scoring runs it: cut to the tests keyed in ``severities``, names the code
    under test may lack imported tolerantly, each test marked with its severity."""
    keep = {k[len(module) + 2 :] for k in severities}
    return marked(tolerant_imports(reduce_module(source, keep), packages), module, severities)


class Prober:
    """Scores probe tasks on the base tree and on the base tree with the reference solution."""

    def __init__(
        self,
        spec: dict,
        repo_dir: Path,
        support: dict[str, Path],
        packages: list[str],
        ws: Workspace,
        trees: dict[str, Path],
        scratch: Path,
        timeout_s: float,
        sandbox: str | None,
        progress: Progress,
        budget_s: float | None = None,
    ) -> None:
        self.spec = {**spec, "test_command": "true"}
        self.repo_dir = repo_dir  # the task's repo/ (the base tree)
        self.support = support  # repo-relative path -> the head's file
        self.packages = set(packages)
        self.ws = ws
        self.trees = trees  # "base" and "change" -> the tree scored
        self.scratch = scratch
        self.timeout_s = timeout_s
        self.sandbox = sandbox
        self.progress = progress
        self._ids = itertools.count()
        self.budget_s = BUDGET_FACTOR * timeout_s if budget_s is None else budget_s
        self._deadline = time.monotonic() + self.budget_s
        #: data files of the tree the hidden tests read with the change (path -> "test" / "code")
        self.reads: dict[str, set[str]] = {}

    def check(self, module: str, source: str, keys: list[str]) -> dict[str, Verdict]:
        """Each candidate of ``module`` (``keys``: ``Class::name``) on both sides."""
        base = self.side(module, source, keys, "base")
        change = self.side(module, source, keys, "change")
        return {f"{module}::{k}": Verdict(f"{module}::{k}", base[k], change[k]) for k in keys}

    def side(self, module: str, source: str, keys: list[str], side: str) -> dict[str, Side]:
        where = "at the base" if side == "base" else "with the change"
        ev = self._evaluate(module, source, keys, side)
        refused = usage_error(ev.acceptance.exit_code, ev.acceptance.output, bool(ev.acceptance.outcomes))
        if refused:
            raise TaskError(
                f"pytest refused to start checking {module} {where} (status 4, a usage error): {refused}",
                f"{USAGE_HINT}. Import from history whose configuration does without them: e.g. a branch "
                "at the base with the option removed in a commit, the fix cherry-picked on top, then "
                "--commit <that branch>",
            )
        broken = _session_trouble(ev)
        if not broken:
            return {k: _side_of(ev, f"{module}::{k}", side) for k in keys}
        if len(keys) == 1:
            return {keys[0]: _runaway(ev, broken, self.timeout_s)}
        self.progress(f"    {module} {where}: {broken}; checking its {len(keys)} tests one by one")
        out = {}
        for k in keys:
            out.update(self.side(module, source, [k], side))
        return out

    def _out_of_time(self, module: str) -> TaskError:
        return TaskError(
            f"the probe sessions ran out of their time budget of {self.budget_s:g} s (checking {module}, "
            f"after {next(self._ids)} sessions): its tests are too slow for the per-session limit of "
            f"{self.timeout_s:g} s, or a session ran away and its tests had to run one by one",
            f"raise the budget with --probe-budget S (default {BUDGET_FACTOR} x --timeout), or leave "
            "the slow tests out with --exclude-test NODE_ID REASON",
        )

    def _evaluate(self, module: str, source: str, keys: list[str], side: str) -> Evaluation:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise self._out_of_time(module)
        limit = min(self.timeout_s, left)
        folder = self.scratch / f"probe-{next(self._ids)}"
        acceptance = folder / "acceptance"
        acceptance.mkdir(parents=True)
        (folder / "repo").symlink_to(self.repo_dir)  # scoring finds the packages' import roots there
        for rel, src in self.support.items():
            dest = confined(acceptance, rel, "a file laid with the hidden tests")
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest)
        severities = {f"{module}::{k}": "major" for k in keys}
        dest = confined(acceptance, module, "a hidden test module")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(acceptance_module(source, module, severities, self.packages), encoding="utf-8")
        task = Task(**self.spec, path=folder)
        try:
            ev = evaluate(
                task,
                self.trees[side],
                self.ws,
                limit,
                sandbox=self.sandbox,
                record_reads=side == "change",
            )
            if ev.acceptance.timed_out and limit < self.timeout_s:  # cut short by the budget
                raise self._out_of_time(module)
            for path, by in ev.acceptance.reads.items():
                self.reads.setdefault(path, set()).update(by)
            return ev
        finally:
            shutil.rmtree(folder, ignore_errors=True)


def _session_trouble(ev: Evaluation) -> str:
    """Why a session's per-test results cannot be trusted ("" when they can)."""
    if ev.acceptance.timed_out:
        return "the session ran past its time limit (a test runs away)"
    if ev.tampered:
        return f"the session did not end cleanly ({ev.tampered[0][:160]})"
    if ev.unscored_reason:
        return ev.unscored_reason[:200]
    return ""


def _runaway(ev: Evaluation, why: str, timeout_s: float) -> Side:
    """The outcome of a test alone in a session that did not end cleanly."""
    if ev.acceptance.timed_out:
        return Side(Outcome.FAILED, f"timeout: ran past {timeout_s:g} s", timed_out=True)
    if "MemoryError" in ev.acceptance.output:
        return Side(Outcome.FAILED, f"MemoryError (the process ran out of memory): {why}")
    return Side(Outcome.FAILED, f"crash: {why}")


def _side_of(ev: Evaluation, key: str, side: str) -> Side:
    passed, message = ev.results.get(key, (False, "not run"))
    if message.startswith("gamed"):  # it passed, and so did its must-fail twin
        return Side(Outcome.PASSED, message) if side == "base" else Side(Outcome.FAILED, message)
    return Side(outcome_of(passed, message), message)
