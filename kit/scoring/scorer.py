"""Hidden acceptance tests -> :class:`kit.records.schema.Score`, in a way the code under test cannot rewrite.

Scoring never runs in the clone, and never in the process that reads the results:

1. **A clean copy of a snapshot.** :func:`score` works from a snapshot of the clone taken through the
   sandbox (:mod:`kit.tasks.snapshot`: regular files only, capped, what was dropped noted in
   ``Score.dropped_files``), never from the live clone; it is copied again
   (:func:`kit.scoring.clean_copy.copy_clean`), with the strategies' own working files as at the
   base (:func:`kit.paths.owned_paths`: whatever strategy ran, the tests see the same tree). A second
   copy gets the base commit's test files, conftests and pytest configuration
   (:func:`kit.scoring.clean_copy.use_base_tests`), read from the kit's cached base -- built from
   the task folder, sharing no object with any clone -- to judge regressions, and the test modules
   the agent added at new paths: those tests count as ``tests_added`` when they ran and passed there
   (:attr:`Evaluation.tests_added`).
2. **Fresh sandboxes** (:mod:`kit.sandbox.backends`; ``bwrap`` by default): the hidden acceptance tests, the
   kit's launcher and plugin live in a kit folder outside the copy, visible read-only. The interpreter
   starts isolated (``python -I``), so the repo cannot shadow pytest or the standard library; the repo
   goes on ``sys.path`` last (but the task's ``packages``, imported from the copy only:
   :mod:`kit.tasks.packages`). The acceptance run takes its pytest configuration from the kit only --
   or, in the ``repo`` layout (:mod:`kit.scoring.layout`), from the task's files laid in the
   copy; the three sessions: :mod:`kit.scoring.sessions`.
3. **A stream, not a report file**: the plugin sends each test's outcome through a pipe the kit reads
   as tests finish. Outcomes count only from a complete, verified session: a wrong or missing canary
   (two inside each acceptance module, calling the code under test like its tests do:
   :mod:`kit.scoring.inject`), a garbled stream, a forged exit status, an early exit, a hang
   until the timeout or an interrupted session marks the run ``tampered`` -- scored as every
   requirement failed and every own test regressed (:mod:`kit.scoring.session`).
4. **Sealed checks** (:mod:`kit.scoring.seal`): an equality whose expected value the kit can
   evaluate alone leaves the session's copy; the session sends a digest of the actual value and the
   kit compares it outside. A requirement is credited only if every sealed check of its test matched.
   **Must-fail twins** guard what stays in-process: each acceptance test runs beside a twin whose
   expectation nothing legitimate can meet (:mod:`kit.scoring.twins`). A requirement is
   credited only if it passes and its twin fails; a passing twin makes it ``gamed`` (failed). Tests
   with neither twin nor sealed check are counted ``unguarded``. An audit hook records the code under
   test reading the hidden tests or taking frames: the run is flagged ``suspicious`` (not
   re-scored). Only the agent's code is charged: what is as it was at the base is looked through
   (:mod:`kit.scoring.basecode`).
5. **Never unscored**: if scoring itself fails, :func:`score` still returns a Score with every
   requirement failed and ``unscored_reason`` saying why.

The base commit's own-test run is cached per (base commit, test command, sandbox, deselected own
tests, packages), and its tree per base commit (:mod:`kit.scoring.basetree`), so each scoring
runs two sandboxed pytest processes (acceptance, own tests) in parallel; the kit's own Python work
for them (writing their tests' canaries and twins, counting the lines changed) goes one piece at a
time, the longer session's first (:class:`kit.scoring.sessions.Turns`).

**Requirements.** Each test function in ``acceptance/`` is one requirement (a parametrized test is
one requirement that fails if any case fails). Its severity is declared with the pytest marker
``@pytest.mark.severity("critical" | "major" | "minor")`` on the function, its class, or the module
(``pytestmark = pytest.mark.severity("major")``). The kit reads the markers from the source (so a
test file that does not even import still yields its requirements, all failed) and registers the
markers itself through its plugin. ``@pytest.mark.baseline_pass`` marks a requirement that is allowed
to pass on the starting code.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from kit.paths import owned_paths
from kit.pyast import MAX_SOURCE_BYTES
from kit.records.schema import Score
from kit.sandbox import quota
from kit.scoring import basetree, verdicts
from kit.scoring.basecode import base_code, with_base_tests
from kit.scoring.basetree import base_tree
from kit.scoring.clean_copy import add_new_tests, as_at_base, copy_clean, copy_sparse, use_base_tests
from kit.scoring.diffstats import LineStats, line_stats
from kit.scoring.nodeids import without_case
from kit.scoring.session import PytestRun
from kit.scoring.sessions import Sessions
from kit.scoring.testcount import count_test_functions
from kit.scoring.usednames import names_to_avoid, reported
from kit.tasks.requirements import Requirement, read_requirements, test_files  # noqa: F401 - re-exported
from kit.tasks.snapshot import Snapshot, snapshot
from kit.tasks.task import Task
from kit.tasks.transitions import Outcome, is_regression, transition
from kit.tasks.workspace import Workspace

# --------------------------------------------------------------------------- the base commit


@dataclass
class _Base:
    own_passed: set[str]
    tests: int
    problem: str | None = None
    own_states: dict[str, str] = field(default_factory=dict)  # nodeid -> outcome at the base
    own_seconds: dict[str, float] = field(default_factory=dict)  # nodeid -> seconds it took at the base


_BASE_CACHE: dict[tuple[str, ...], _Base] = {}
_BASE_LOCK = threading.Lock()
#: how long each session of the last scoring took, per base (:func:`_base_key`): the longer one writes
#: its tests first (:class:`kit.scoring.sessions.Turns`); performance only, no verdict reads it
_WALLS: dict[tuple[str, ...], dict[str, float]] = {}


def clear_base_cache() -> None:
    """Forget the base commits' own-test results and trees kept in this process (the tests reset it)."""
    with _BASE_LOCK:
        _BASE_CACHE.clear()
        _WALLS.clear()
    basetree.forget()


# --------------------------------------------------------------------------- evaluation


@dataclass
class Evaluation:
    """Everything scoring found out; :func:`score` condenses it, ``tasks validate`` reads it all."""

    requirements: list[Requirement]
    results: dict[str, tuple[bool, str]]  # requirement key -> (passed, message)
    acceptance: PytestRun
    own: PytestRun
    own_passed_at_base: set[str]  # (xpassed ones too: pytest's "passed")
    problems: list[str]
    tests_at_base: int
    tests_now: int
    dropped: list[str] = field(default_factory=list)  # entries of the clone not copied, and why
    tampered: list[str] = field(default_factory=list)  # evidence; non-empty = the run is tampered
    unscored_reason: str | None = None  # the acceptance tests gave no result at all
    gamed: list[str] = field(default_factory=list)  # requirement keys that passed with a passing twin
    unguarded: list[str] = field(default_factory=list)  # requirement keys with neither twin nor seal
    sealed: list[str] = field(default_factory=list)  # requirement keys with a sealed check
    suspicious: list[str] = field(default_factory=list)  # introspection seen by the audit hook
    own_states_at_base: dict[str, str] = field(default_factory=dict)  # nodeid -> outcome at the base
    added_files: list[str] = field(default_factory=list)  # test modules the agent added (new paths)

    def _added(self, nodeid: str) -> bool:
        return nodeid.split("::", 1)[0] in self.added_files

    @property
    def tests_added(self) -> int:
        """Test functions of the agent's added test modules that ran in the own-tests session on the
        final tree and passed (every case of a parametrized one; a skip is no pass); none when that
        session was tampered with. Never counted from source: 200 tests that fail add nothing."""
        if self.tampered:
            return 0
        funcs: dict[str, bool] = {}
        for nodeid, (passed, _) in self.own.outcomes.items():
            if self._added(nodeid):
                func = without_case(nodeid)
                funcs[func] = funcs.get(func, True) and passed
        return sum(funcs.values())

    @property
    def failed_requirements(self) -> list[Requirement]:
        return [r for r in self.requirements if not self.results[r.key][0]]

    def _state_at_base(self, nodeid: str) -> Outcome:
        if nodeid in self.own_states_at_base:
            return Outcome(self.own_states_at_base[nodeid])
        return Outcome.PASSED if nodeid in self.own_passed_at_base else Outcome.ABSENT

    @property
    def regressed(self) -> list[str]:
        """Own tests that passed at the base and fail, error, skip or xfail now, or are gone
        (:func:`kit.tasks.transitions.is_regression`; an own test that was skipped, xfailed or
        xpassed at the base is neutral)."""
        if self.tampered:  # nothing the own tests said can be trusted
            return sorted(self.own_passed_at_base)
        return sorted(
            t
            for t in self.own_passed_at_base
            if is_regression(transition(self._state_at_base(t), self.own.state(t)))
        )

    @property
    def own_failed(self) -> list[str]:
        """Own tests that failed (a skip, xfail or xpass is neutral: not among them) and the session's
        errors."""
        failed = sorted(k for k in self.own.outcomes if self.own.state(k) is Outcome.FAILED)
        return failed + self.own.errors


def _base_key(session: Sessions, task: Task, ws: Workspace) -> tuple[str, ...]:
    return (
        ws.base_commit,
        task.test_command,
        getattr(session.sandbox, "spec", session.sandbox.name),  # (a container image: its own)
        *task.own_tests_deselect,
        "|",
        *task.packages,
    )


def _cached_base(session: Sessions, task: Task, ws: Workspace) -> _Base | None:
    with _BASE_LOCK:
        return _BASE_CACHE.get(_base_key(session, task, ws))


def _base_info(session: Sessions, task: Task, ws: Workspace, base_dir: Path, known: _Base | None) -> _Base:
    """The own tests that pass at the base commit (cached when the base run was clean): ``known``,
    else run in ``base_dir`` -- a tree of this scoring's own (the session writes there)."""
    if known is not None:
        return known
    cached = _cached_base(session, task, ws)
    if cached is not None:
        return cached
    tests = count_test_functions(base_dir, session.own_collecting(base_dir))
    run = session.own("base", base_dir, task.test_command)
    info = _Base(
        own_passed=run.passed,
        tests=tests,
        own_states={k: str(run.state(k)) for k in run.outcomes},
        own_seconds=run.seconds,
    )
    if run.tampered or not run.complete:
        info.problem = f"the repo's own tests did not run cleanly at the base: {run.errors + run.tampered}"
        return info  # not cached: a task problem (or a kit one) must show, not stick
    with _BASE_LOCK:
        _BASE_CACHE[_base_key(session, task, ws)] = info
    return info


def evaluate(
    task: Task,
    tree: Path,
    ws: Workspace,
    timeout_s: float | None = None,
    *,
    sandbox: str | None = None,
    dropped: list[str] | None = None,
    record_reads: bool = False,
    written: threading.Event | None = None,
    own_files: tuple[str, ...] | None = None,
) -> Evaluation:
    """Run acceptance and own tests on clean copies of ``tree`` in fresh sandboxes (``sandbox``: a
    :mod:`kit.sandbox.backends` backend name, default the platform's); ``ws`` gives the base commit.
    ``tree`` is a snapshot (:func:`score`) or a tree of the kit's own (``tasks validate``); ``dropped``:
    what the snapshot left out, reported first; ``record_reads``: the acceptance session reports the
    data files of the tree it reads (``Evaluation.acceptance.reads``: the importer's probes);
    ``written``: set once both sessions' test modules are written, or evaluation ended (work of this
    process that can wait for it waits: :func:`score`'s line count); ``own_files``: the strategies'
    working files, held as at the base (default: :func:`kit.paths.owned_paths`)."""
    timeout = timeout_s or task.limits.scoring_timeout_s
    requirements, problems = read_requirements(task.acceptance_dir, task.excluded)
    # a capped tmpfs where the kit is root: what the code under test writes while it is scored (a
    # deep tree, a disk's worth of files) neither fills the disk nor breaks the removal
    with quota.scratch("orchbench-score-") as tmp, contextlib.ExitStack() as stack:
        session = Sessions(task, sandbox, tmp / "kit", timeout)
        acc_dir, own_dir = tmp / "acc", tmp / "own"
        known = _cached_base(session, task, ws)  # (the first scoring runs the base beside its own ...
        # ... in a base tree of its own; the others read the process's one, kept: :mod:`.basetree`)
        base_dir = stack.enter_context(base_tree(ws, tmp / "base" if known is None else None))
        dropped = [*(dropped or []), *copy_clean(tree, acc_dir)]
        as_at_base(acc_dir, base_dir, owned_paths() if own_files is None else own_files)
        collecting = session.own_collecting(base_dir)  # (the base's configuration: the test side is)
        tests_now = count_test_functions(acc_dir, collecting)
        shutil.copytree(acc_dir, own_dir, copy_function=copy_sparse)
        use_base_tests(own_dir, base_dir)
        added_files = add_new_tests(own_dir, acc_dir, base_dir)  # (before any session writes in acc_dir)
        acc_code = base_code(acc_dir, base_dir)
        own_code = with_base_tests(acc_code, base_dir)
        timed, avoid = (known.own_seconds, reported(known.own_states)) if known is not None else (None, set())
        forms = session.collecting().forms()  # (:mod:`.usednames`; before any session writes)
        avoid = names_to_avoid(base_dir, acc_dir, avoid, forms)
        acc, own, base = _at_once(
            session,
            _base_key(session, task, ws),
            written,
            acceptance=functools.partial(session.acceptance, acc_dir, acc_code, record_reads, avoid),
            own=functools.partial(session.own, "own", own_dir, task.test_command, own_code, timed),
            base=functools.partial(_base_info, session, task, ws, base_dir, known),
        )
        added_files = _not_too_large(session.own_too_large, added_files, dropped)

    problems += _session_problems(base, session)
    tampered = [f"acceptance: {t}" for t in acc.tampered] + [f"own tests: {t}" for t in own.tampered]
    twinned = set(session.injected.twins.values())
    results, gamed = verdicts.results(requirements, acc, tampered, twinned, session.prefix)
    verdicts.sealed_checks(results, session.injected, acc)
    problems += _not_in_source(task, requirements, acc, session.prefix)
    unscored = None
    if not acc.complete and not acc.outcomes and not tampered:
        unscored = f"the acceptance tests gave no result: {'; '.join(acc.errors)[:300] or 'not run'}"
    return Evaluation(
        requirements=requirements,
        results=results,
        acceptance=acc,
        own=own,
        own_passed_at_base=base.own_passed,
        own_states_at_base=base.own_states,
        problems=problems,
        tests_at_base=base.tests,
        tests_now=tests_now,
        added_files=added_files,
        dropped=dropped,
        tampered=tampered[:20],
        unscored_reason=unscored,
        gamed=gamed,
        unguarded=list(session.injected.unguarded),
        sealed=sorted({check.key for check in session.injected.sealed.values()}),
        suspicious=[*acc.seen, *(f"own tests: {x}" for x in own.seen)],
    )


def _session_problems(base: _Base, session: Sessions) -> list[str]:
    """The base run's problem, and each session that ran without canaries (its configuration collects
    no name the kit can give one: :mod:`.naming`)."""
    out = [base.problem] if base.problem else []
    return out + [f"{label} session: {why}" for label, why in sorted(session.unverified.items())]


def _not_in_source(task: Task, requirements: list[Requirement], acc: PytestRun, prefix: str) -> list[str]:
    """A problem for each acceptance test that ran but is no requirement of the source (nor inherited)."""
    by_req = {k for k in (verdicts.requirement_key(n, prefix) for n in acc.outcomes) if k is not None}
    known = {r.key for r in requirements}
    unknown = by_req - known - verdicts.inherited(by_req - known, task.acceptance_dir)
    return [
        f"acceptance test {key} was run but not found in the source (generated?)" for key in sorted(unknown)
    ]


def _not_too_large(too_large: list[str], added: list[str], dropped: list[str]) -> list[str]:
    """The added test modules less those too large to hold the kit's canaries (run as written: a
    forged report of theirs would go unseen, so their tests are not counted as added); each noted
    in ``dropped``, which the score shows."""
    for rel in too_large:
        dropped.append(
            f"{rel}: a test module over {MAX_SOURCE_BYTES:,} bytes once the kit's canaries are in it, or past what the kit can write: run as written, not counted in tests_added"
        )
    return [rel for rel in added if rel not in too_large]


def _at_once(
    session: Sessions, key: tuple[str, ...], written: threading.Event | None, **sessions: Callable
) -> list:
    """The results of the sessions (``acceptance``, ``own``, ``base``), run at once; ``written`` set
    once both scored sessions wrote their tests; how long each took is kept for the next scoring."""
    with _BASE_LOCK:
        walls = _WALLS.get(key, {})
    if walls.get("own", 0.0) > walls.get("acceptance", 0.0):
        session.first("own")  # (it took longer last time: it writes its tests first)
    started, took = time.monotonic(), {}
    with ThreadPoolExecutor(len(sessions)) as pool:
        futures = {name: pool.submit(run) for name, run in sessions.items()}
        for name in ("acceptance", "own"):
            futures[name].add_done_callback(lambda _, n=name: took.setdefault(n, time.monotonic() - started))
        try:
            session.turns.wait_all()
        finally:
            if written is not None:
                written.set()
        results = [f.result() for f in futures.values()]
    with _BASE_LOCK:
        _WALLS[key] = took
    return results


def _diff_stats(
    ws: Workspace,
    snap: Snapshot | None,
    after: threading.Event | None = None,
    own_files: tuple[str, ...] = (),
) -> dict:
    """The score's fields of the lines changed (:mod:`kit.scoring.diffstats`), counted ``after`` the
    event is set (if given); the strategies' ``own_files`` are not counted."""
    if after is not None:
        after.wait()
    stats = LineStats()
    if snap is not None:
        with contextlib.suppress(Exception):  # a diff that fails still leaves a score
            stats = line_stats(ws, snap, own_files)
    return {
        "files_touched": stats.files,
        "lines_added": stats.added,
        "lines_removed": stats.removed,
        "lines_counted_whole": stats.counted_whole,
    }


def _claimed_but_failed(claimed_done: bool, defects: dict[str, int]) -> bool:
    return bool(claimed_done and (defects["critical"] or defects["major"]))


def to_score(
    ev: Evaluation,
    ws: Workspace,
    claimed_done: bool,
    scoring_s: float,
    snap: Snapshot | None = None,
    diff: dict | None = None,
) -> Score:
    """``ev`` as a score; ``diff``: :func:`_diff_stats`, when it was counted already."""
    tally = verdicts.tally(
        ev.requirements, ev.failed_requirements, {k: m for k, (_, m) in ev.results.items()}
    )
    regressed = ev.regressed
    baseline = {r.key for r in ev.requirements if r.baseline_pass}
    return Score(
        **tally,
        own_tests_total=sum(1 for t in ev.own.outcomes if not ev._added(t)),
        regressions=len(regressed),
        regressed_tests=regressed,
        tests_added=ev.tests_added,
        **(diff if diff is not None else _diff_stats(ws, snap, own_files=owned_paths())),
        claimed_done_but_failed=_claimed_but_failed(claimed_done, tally["defects"]),
        scoring_s=round(scoring_s, 3),
        tampered=bool(ev.tampered),
        tamper_evidence=ev.tampered,
        requirements_gamed=len(counted_gamed := [k for k in ev.gamed if k not in baseline]),
        gamed_tests=counted_gamed,
        requirements_unguarded=sum(k not in baseline for k in ev.unguarded),
        requirements_sealed=len({k for k in ev.sealed if k not in baseline}),
        suspicious=bool(ev.suspicious),
        suspicious_evidence=ev.suspicious,
        unscored_reason=ev.unscored_reason,
        dropped_files=ev.dropped,
    )


def unscored(
    task: Task,
    ws: Workspace,
    claimed_done: bool,
    reason: str,
    scoring_s: float,
    snap: Snapshot | None = None,
    own_files: tuple[str, ...] | None = None,
) -> Score:
    """The score of a run whose scoring failed: every requirement failed, with the reason."""
    try:
        requirements, _ = read_requirements(task.acceptance_dir, task.excluded)
    except Exception:  # noqa: BLE001
        requirements = []
    message = f"not scored: {reason}"[:300]
    tally = verdicts.tally(requirements, requirements, {r.key: message for r in requirements})
    return Score(
        **tally,
        **_diff_stats(ws, snap, own_files=owned_paths() if own_files is None else own_files),
        claimed_done_but_failed=_claimed_but_failed(claimed_done, tally["defects"]),
        scoring_s=round(scoring_s, 3),
        unscored_reason=reason[:2000],
    )


def score(
    task: Task,
    ws: Workspace,
    claimed_done: bool,
    timeout_s: float | None = None,
    *,
    sandbox: str | None = None,
    snap: Snapshot | None = None,
    own_files: tuple[str, ...] | None = None,
) -> Score:
    """Score the clone against the task's hidden acceptance tests, from ``snap`` -- a snapshot of it
    (:mod:`kit.tasks.snapshot`) -- or from one taken here through ``sandbox``: the live clone is never
    read by the kit. Never raises for a failure of scoring itself: that gives a score with every
    requirement failed and the reason. ``own_files``: the strategies' working files (default: every
    strategy's own, :func:`kit.paths.owned_paths`), neither tested nor counted as lines changed."""
    own_files = owned_paths() if own_files is None else own_files
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        try:
            if snap is None:
                snap = stack.enter_context(snapshot(ws.root, sandbox or ws.sandbox))
            written = threading.Event()
            with ThreadPoolExecutor(1) as pool:  # git counts the lines while the tests run (not while
                # their modules are written: both are the kit's Python, one at a time)
                diff = pool.submit(_diff_stats, ws, snap, written, own_files)
                try:
                    ev = evaluate(
                        task,
                        snap.tree,
                        ws,
                        timeout_s,
                        sandbox=sandbox,
                        dropped=snap.dropped,
                        written=written,
                        own_files=own_files,
                    )
                finally:
                    written.set()
                return to_score(ev, ws, claimed_done, time.monotonic() - started, snap, diff.result())
        except Exception as exc:  # noqa: BLE001 - a run is never left unscored
            reason = f"scoring failed: {type(exc).__name__}: {exc}"
            return unscored(task, ws, claimed_done, reason, time.monotonic() - started, snap, own_files)
