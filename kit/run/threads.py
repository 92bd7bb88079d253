"""The thread executor: the runs of an experiment in this process.

Up to ``concurrency`` runs play at once (:func:`kit.run.single.play_run`: mostly waiting on models);
each finished one is scored on a separate pool of one worker per core
(:func:`kit.run.single.score_run`: CPU-bound), so agents waiting on models never hold back scoring
and a burst of finished runs never oversubscribes the CPU. Ctrl-C: :class:`kit.run.control.Interrupts`.
"""

from __future__ import annotations

import contextlib
import os
import threading
import warnings
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from traceback import format_exc

from kit.config import Experiment, PriceSheet, Profile
from kit.records.schema import RunRecord
from kit.run.control import Interrupts
from kit.run.plan import RunSpec, kit_commit
from kit.run.progress import ExperimentState, progress_bar, refresh
from kit.run.results import storage_error
from kit.run.single import PlayedRun, failed_run, play_run, score_run
from kit.sandbox.quota import release


def _cores() -> int:
    """CPUs this process may use (the scoring pool's size)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _failed(
    spec: RunSpec,
    experiment: Experiment,
    profile: Profile,
    sheet: PriceSheet,
    out: Path,
    commit: str,
    error: str,
) -> RunRecord | None:
    """A run a kit bug broke, recorded ``error`` (what it had recorded kept); None, with a warning, when
    even that fails (it has no run.json then: the next ``kit run`` redoes it)."""
    try:
        return failed_run(
            spec, experiment, profile, sheet, out, commit, error, "the run failed in the kit", False
        )
    except Exception as exc:  # noqa: BLE001 - the other runs go on
        warnings.warn(
            f"run {spec.run_id(profile.name)} failed and was not recorded: {exc!r}\n{error}", stacklevel=2
        )
        return None


def _scored(played: PlayedRun) -> RunRecord:
    """:func:`score_run`, and the run's clone released whatever it raised: a kit bug before scoring's
    own release left the clone's file system mounted until the kit exited."""
    try:
        return score_run(played)
    except BaseException:
        if played.quota is not None:
            with contextlib.suppress(Exception):
                release(played.quota)
        raise


class CloneSlots:
    """How many runs may hold a clone at once: a run takes a slot before it starts and gives it back
    once it is scored (its clone released, or removed) -- so runs that play faster than they are
    scored wait, rather than pile full clones on the results disk past what the pre-run space check
    counted (:func:`kit.run.results.space_needed`: two per playing slot)."""

    def __init__(self, n: int) -> None:
        self._sem = threading.Semaphore(n)

    def take(self, draining: threading.Event) -> bool:
        """Wait for a slot; False (no slot taken) once ``draining`` is set."""
        while not self._sem.acquire(timeout=0.2):
            if draining.is_set():
                return False
        return True

    def give(self) -> None:
        """Give a slot back (None, for ``return``)."""
        self._sem.release()


def run_threads(
    specs: list[RunSpec],
    todo: list[RunSpec],
    experiment: Experiment,
    profile: Profile,
    sheet: PriceSheet,
    out: Path,
    progress: bool,
    grace_s: float,
    state: ExperimentState,
) -> None:
    """The thread executor: play up to ``concurrency`` runs at once, score finished ones on a pool of
    one worker per core, collect the records. ``state`` counts each phase in flight until it ends
    (one still executing after a second Ctrl-C stays counted). Raises KeyboardInterrupt after a
    Ctrl-C and ResultsError when records could not be written. Long because the three gates a run
    passes before it plays (a clone slot, Ctrl-C, the spend cap) and the play/score loop read best in
    one place."""
    commit = kit_commit()
    bar = progress_bar(specs, todo, experiment.name, progress, state)
    storage: list[tuple[str, OSError]] = []
    agents = ThreadPoolExecutor(max_workers=experiment.concurrency, thread_name_prefix="run")
    scorers = ThreadPoolExecutor(max_workers=_cores(), thread_name_prefix="score")
    hard_stop = False
    clones = CloneSlots(2 * experiment.concurrency)  # as kit.run.results.space_needed counts them
    with Interrupts(grace_s) as ctl:

        def play(spec: RunSpec) -> PlayedRun | None:
            if not clones.take(ctl.draining):  # interrupted before this run could start: it never starts
                return None
            try:  # interrupted, or the experiment's spend cap: not started
                run_id = spec.run_id(profile.name)
                if ctl.draining.is_set() or not state.cap.start(run_id, ctl.draining):
                    return clones.give()  # (the cap waits while runs in flight hold the room it needs)
                played = play_run(spec, experiment, profile, sheet, out, commit, ctl.stop, state.update)
                state.cap.ended(run_id, played.recorder.totals.cost_usd)  # scoring spends nothing: room back
                return played
            except BaseException:
                clones.give()
                raise

        playing: dict[Future, RunSpec] = {state.track(agents.submit(play, s)): s for s in todo}
        scoring: dict[Future, RunSpec] = {}
        try:
            while playing or scoring:
                done, _ = wait([*playing, *scoring], timeout=0.2, return_when=FIRST_COMPLETED)
                ctl.tick()
                refresh(bar, state)  # the runs in flight: calls, tokens, dollars, role, phase
                if ctl.draining.is_set():
                    for fut in playing:
                        fut.cancel()  # a run not started yet never starts (queued scorings still run)
                for fut in done:
                    if (spec := playing.pop(fut, None)) is None:
                        spec = scoring.pop(fut)
                        clones.give()  # scored: its clone released (or removed), the next run may start
                    if fut.cancelled():
                        continue
                    try:
                        result = fut.result()
                    except OSError as e:  # the run's records could not be written
                        storage.append((spec.run_id(profile.name), e))
                        ctl.drain(grace_s=0)  # no run can be recorded: stop them all now
                        continue
                    except Exception:  # noqa: BLE001 - a kit bug in one run must not stop the others
                        result = _failed(spec, experiment, profile, sheet, out, commit, format_exc())
                    if isinstance(result, PlayedRun):
                        scoring[state.track(scorers.submit(_scored, result))] = spec
                    elif isinstance(result, RunRecord):
                        state.recorded(result)
                        bar.update(1)
                        refresh(bar, state)
        except BaseException:  # the second Ctrl-C, or a bug in the runner: stop without waiting
            ctl.stop.set()
            hard_stop = True
            raise
        finally:
            bar.close()
            agents.shutdown(wait=not hard_stop, cancel_futures=True)
            scorers.shutdown(wait=not hard_stop, cancel_futures=True)
    if storage:
        run_id, err = storage[0]
        raise storage_error(out, err, f"{len(storage)} run(s) could not be recorded (first: {run_id})")
    if ctl.interrupted:
        raise KeyboardInterrupt
