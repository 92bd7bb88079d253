"""One run end to end: a fresh clone, the strategy on it, the hidden acceptance tests, the diff and
the records (``docs/records.md``: one section per file of the run folder).

A run is two phases, so an executor can give them different pools: :func:`play_run` (clone +
strategy: mostly waiting on models) and :func:`score_run` (acceptance tests: CPU-bound; then run.json,
written last, which marks the run done). :func:`run_one` does both in turn. A failure inside a run
never escapes it: it becomes outcome ``error`` with its message (``docs/strategies.md``, ``## Outcomes
and stop reasons``); only an OSError -- the records cannot be written -- propagates.
"""

from __future__ import annotations

import contextlib
import errno
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kit import strategies, trees
from kit.agent.budget import Budget
from kit.config import Experiment, PriceSheet, Profile, Tier
from kit.errors import Interrupted
from kit.importers.size import measure
from kit.model.gateway import Gateway
from kit.paths import owned_paths
from kit.prompts import PromptBook
from kit.records.recorder import Progress, RunRecorder
from kit.records.schema import DISK_QUOTA, RunRecord, TaskSize, utc_now
from kit.run.fingerprint import fingerprint, run_settings, write_prompts
from kit.run.plan import RunSpec, redacted
from kit.run.results import INTERRUPTED, free_room, hold_room
from kit.run.sandboxing import run_sandbox
from kit.run.spend import call_bounds
from kit.sandbox.base import SANDBOX_GID, SANDBOX_UID, drops_to_sandbox_user
from kit.sandbox.quota import Quota, drop_clone, provide, settle_clone, unmount
from kit.scoring import scorer as scoring
from kit.secrets import Redactor
from kit.strategies.context import RunContext
from kit.tasks.patch import capped_patch
from kit.tasks.snapshot import Snapshot, snapshot
from kit.tasks.task import TASK_FILE, Task
from kit.tasks.workspace import Workspace, create_workspace


@dataclass
class PlayedRun:
    """A run whose strategy phase has ended: what :func:`score_run` needs to finish it."""

    spec: RunSpec
    experiment: Experiment
    record: RunRecord
    recorder: RunRecorder
    workspace: Workspace | None
    started: float  # time.monotonic() when the run started
    quota: Quota | None = None  # the clone's disk quota, released once the run is recorded
    played: float = 0.0  # time.monotonic() when the strategy phase ended (0: not recorded)


def new_record(
    spec: RunSpec, experiment: Experiment, profile: Profile, sheet: PriceSheet, commit: str, **fields: Any
) -> RunRecord:
    """A run's record as it opens: identity, the kit commit, the price sheet and the (redacted)
    profile, the strategy's options and the sandbox, and the run's settings with their fingerprint
    (:mod:`kit.run.fingerprint`); ``fields`` fill in the rest."""
    settings = run_settings(spec, experiment, profile, sheet)
    box = run_sandbox(experiment, spec.task)
    return RunRecord(
        run_id=spec.run_id(profile.name),
        experiment=experiment.name,
        task=spec.task.id,
        strategy=spec.strategy,
        profile=profile.name,
        repeat=spec.repeat,
        project=spec.task.project,
        task_size=task_size(spec.task),
        kit_commit=commit,
        price_sheet=sheet.model_dump(mode="json"),
        profile_spec=redacted(profile),
        options=experiment.strategy_options.get(spec.strategy, {}),
        sandbox=box.backend,
        sandbox_image=box.image,
        sandbox_image_id=box.image_id,
        settings=settings,
        fingerprint=fingerprint(settings),
        **fields,
    )


def task_size(task: Task) -> TaskSize | None:
    """The task's measured size (:func:`kit.importers.size.measure`), kept per process while task.yaml is
    unchanged; None when it cannot be measured (the run goes on: the record says null)."""
    try:
        key = (str(task.path), (task.path / TASK_FILE).stat().st_mtime_ns)
        with _SIZES_LOCK:
            if key in _SIZES:
                return _SIZES[key]
        size = measure(task)
    except (OSError, ValueError, RecursionError, MemoryError):
        return None
    with _SIZES_LOCK:
        _SIZES[key] = size
    return size


_SIZES: dict[tuple[str, int], TaskSize] = {}
_SIZES_LOCK = threading.Lock()


def run_one(
    spec: RunSpec,
    experiment: Experiment,
    profile: Profile,
    sheet: PriceSheet,
    out: Path,
    commit: str = "",
    stop: threading.Event | None = None,
    on_progress: Callable[[Progress], None] | None = None,
) -> RunRecord:
    """Run one (task, strategy, repeat) start to end: clone, strategy, scoring, records. Never raises
    for a failure inside the run (that becomes outcome ``error`` with its message); an OSError means
    its records could not be written. ``on_progress`` is told the run's progress after each call and
    phase."""
    return score_run(play_run(spec, experiment, profile, sheet, out, commit, stop, on_progress))


def play_run(
    spec: RunSpec,
    experiment: Experiment,
    profile: Profile,
    sheet: PriceSheet,
    out: Path,
    commit: str = "",
    stop: threading.Event | None = None,
    on_progress: Callable[[Progress], None] | None = None,
) -> PlayedRun:
    """The strategy phase: a fresh clone and the strategy on it. ``stop`` (Ctrl-C) makes the agents
    stop at their next step; the run is then ``interrupted``. ``on_progress`` (a live view) is told
    the run's calls, tokens, dollars, role and phase after each call and phase."""
    run_id = spec.run_id(profile.name)
    run_dir = out / "runs" / run_id
    if run_dir.exists():  # a torn or interrupted run: start it again from scratch
        _remove_run(run_dir)
    recorder = RunRecorder(run_dir, run_id, Redactor.for_profile(profile), on_progress)
    if on_progress is not None:
        on_progress(recorder.progress())  # the run shows as started before its first call
    write_prompts(run_dir, spec.strategy, experiment.prompt_overrides)  # the texts its settings hash
    hold_room(run_dir)  # room for its last records, whatever fills the disk meanwhile
    started_at, t0 = utc_now(), time.monotonic()
    tiers = strategies.role_tiers(spec.strategy, experiment.tiers.get(spec.strategy), profile)
    limits = experiment.limits
    call_usd, call_tokens = call_bounds(profile, sheet, tiers.values())  # a call in flight, at worst
    budget = Budget(
        recorder,
        limits.max_usd,
        limits.max_tokens,
        limits.max_model_calls,
        stop=stop,
        call_usd=call_usd,
        call_tokens=call_tokens,
    )
    record = new_record(
        spec,
        experiment,
        profile,
        sheet,
        commit,
        role_tiers=tiers,
        budget=budget.as_dict(),
        started_at=started_at,
    )
    workspace = quota = None
    ctx: RunContext | None = None  # its counters are recorded if the strategy raises
    try:
        quota = provide(run_dir / "repo", limits.disk_quota_mb * 2**20, limits.disk_quota_files, _owner())
        budget.disk = quota.over
        box = run_sandbox(experiment, spec.task).spec  # the backend, and the image pinned by its id
        workspace = create_workspace(spec.task, run_dir / "repo", sandbox=box)
        record.base_commit = workspace.base_commit
        ctx = _context(spec, experiment, profile, sheet, out, recorder, workspace, budget, tiers)
        result = strategies.get(spec.strategy)(ctx)
        record.outcome = result.outcome
        record.stop_reason = str(result.stop_reason or result.counters.get("stop_reason") or "")
        record.claimed_done = result.claimed_done
        record.counters = {**result.counters, "permission_denials": recorder.denials}
    except OSError as exc:
        if not _records_disk_full(exc, quota):
            _failed_in_strategy(record, recorder, ctx, exc)
        else:  # the results disk is full: the run is torn (no run.json), redone by the next kit run
            if quota is not None:
                drop_clone(quota)
            recorder.close()
            free_room(run_dir)
            raise
    except Interrupted as exc:
        record.outcome = INTERRUPTED
        record.error = str(exc)
        record.counters = {**(ctx.counters if ctx else {}), "permission_denials": recorder.denials}
    except Exception as exc:  # noqa: BLE001 - one broken run must not stop the experiment
        _failed_in_strategy(record, recorder, ctx, exc)
    _settle_interrupt(record, recorder, budget)
    _settle_disk_quota(record, recorder, budget, quota)
    return PlayedRun(spec, experiment, record, recorder, workspace, t0, quota, time.monotonic())


def _failed_in_strategy(
    record: RunRecord, recorder: RunRecorder, ctx: RunContext | None, exc: BaseException
) -> None:
    """The strategy raised: outcome ``error``, its message and traceback, its counters so far."""
    record.outcome = "error"
    record.error = f"{type(exc).__name__}: {exc}"
    recorder.event("note", "", "error", traceback.format_exc()[-2000:], ok=False)
    record.counters = {**(ctx.counters if ctx else {}), "permission_denials": recorder.denials}
    record.stop_reason = str(record.counters.get("stop_reason") or "")  # what the strategy had reached


def _records_disk_full(exc: OSError, quota: Quota | None) -> bool:
    """Whether ``exc`` is the results disk being full (not the clone's own quota, which ends the run
    as ``disk-quota``): its records cannot be written, so the run cannot finish."""
    if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
        return False
    return quota is None or not quota.over()


def failed_run(
    spec: RunSpec,
    experiment: Experiment,
    profile: Profile,
    sheet: PriceSheet,
    out: Path,
    commit: str,
    error: str,
    why: str,
    fresh: bool = True,
) -> RunRecord:
    """Record a run that failed outside the strategy (a Ray task, a kit bug in play or scoring):
    outcome ``error``, ``why`` and the error's last line in run.json, the error in a note. ``fresh``
    starts the run folder again; otherwise what the run recorded so far is kept."""
    run_id = spec.run_id(profile.name)
    run_dir = out / "runs" / run_id
    if fresh and run_dir.exists():
        _remove_run(run_dir)
    free_room(run_dir)  # (a run that broke before it was scored held it)
    recorder = RunRecorder(run_dir, run_id, Redactor.for_profile(profile))  # the error text is masked too
    recorder.event("note", "", "error", error[-2000:], ok=False)
    now = utc_now()
    record = new_record(
        spec,
        experiment,
        profile,
        sheet,
        commit,
        started_at=now,
        finished_at=now,
        outcome="error",
        error=f"{why}: {error.strip().splitlines()[-1] if error.strip() else 'unknown error'}",
    )
    recorder.finalize(record)
    return record


def _context(
    spec: RunSpec,
    experiment: Experiment,
    profile: Profile,
    sheet: PriceSheet,
    out: Path,
    recorder: RunRecorder,
    workspace: Workspace,
    budget: Budget,
    tiers: dict[str, Tier],
) -> RunContext:
    """What the strategy gets: the clone, a gateway that records into this run, its prompts, limits,
    options, budget and role tiers (``docs/strategies.md``, ``## Where the kit chooses``)."""
    gateway = Gateway(
        profile,
        sheet,
        recorder,
        context={
            "run_id": spec.run_id(profile.name),
            "task": spec.task.id,
            "task_path": str(spec.task.path),
            "test_command": spec.task.test_command,
            "workspace": str(workspace.root),
            "strategy": spec.strategy,
        },
    )
    return RunContext(
        task=spec.task,
        workspace=workspace,
        gateway=gateway,
        recorder=recorder,
        profile=profile,
        prompts=PromptBook(spec.strategy, experiment.prompt_overrides),
        limits=experiment.limits,
        options=experiment.strategy_options.get(spec.strategy, {}),
        budget=budget,
        journal_dir=out / "journals",
        sandbox=workspace.sandbox or experiment.sandbox,
        tiers=tiers,
    )


def _owner() -> tuple[int, int] | None:
    """Who the clone's file system belongs to: the sandbox user, when commands run as it."""
    return (SANDBOX_UID, SANDBOX_GID) if drops_to_sandbox_user() else None


def _remove_run(run_dir: Path) -> None:
    """Remove a run folder to redo the run: its clone's quota mount first (a kit killed mid-run
    leaves one), then every file, whatever the agent made (:func:`kit.trees.remove_tree`)."""
    unmount(run_dir / "repo")
    trees.remove_tree(run_dir)


def _settle_disk_quota(record: RunRecord, recorder: RunRecorder, budget: Budget, quota: Quota | None) -> None:
    """A run that reached its clone's disk quota ends with outcome ``budget`` and stop reason
    ``disk-quota`` -- also when the full disk made the strategy fail (``error``) or when it swallowed
    the budget's stop -- and is scored on what it has (docs/strategies.md)."""
    if record.outcome == INTERRUPTED:
        return
    why = budget.disk_full or (quota.over() if quota is not None and record.outcome == "error" else None)
    if not why:
        return
    if record.outcome == "error":
        recorder.event(
            "note", "", "error", f"after the disk quota was reached: {record.error}"[:2000], ok=False
        )
        record.error = None
    record.outcome, record.stop_reason = "budget", DISK_QUOTA
    recorder.event("note", "", DISK_QUOTA, why, ok=False)


def _settle_interrupt(record: RunRecord, recorder: RunRecorder, budget: Budget) -> None:
    """A run the stop reached is ``interrupted`` even when its strategy swallowed the stop and
    reported another outcome; an interrupted run gets a note in events.jsonl."""
    if budget.interrupted and record.outcome != INTERRUPTED:  # a strategy swallowed the stop
        record.error = f"interrupted (the strategy had reached outcome {record.outcome!r})"
        record.outcome = INTERRUPTED
    if record.outcome == INTERRUPTED:
        recorder.event("note", "", "interrupted", "Ctrl-C: stopped at the next step", ok=False)


def score_run(played: PlayedRun) -> RunRecord:
    """The scoring phase, on a snapshot of the clone taken through the sandbox (the kit never reads
    the live clone after the agent's last step): hidden acceptance tests (not for an interrupted run),
    the diff, then run.json -- written last, it marks the run done."""
    record, recorder = played.record, played.recorder
    scoring_started = time.monotonic()  # a wait for a scoring worker before this is not the run's time
    try:
        _score_and_diff(played)
    finally:
        if played.quota is not None:  # the clone stays as its image, repo.img -- unless it is large
            removed = settle_clone(played.quota)
            if removed:
                recorder.event("note", "", "clone-removed", removed)
    free_room(recorder.run_dir)
    record.finished_at = utc_now()
    waited = max(0.0, scoring_started - played.played) if played.played else 0.0
    record.wall_s = round(time.monotonic() - played.started - waited, 3)
    record.model_s = round(recorder.model_s, 3)
    record.tool_s = round(recorder.tool_s, 3)
    record.totals = recorder.totals
    record.calls = recorder.calls
    try:
        _finalize(record, recorder)
    finally:
        recorder.close()
    return record


def _score_and_diff(played: PlayedRun) -> None:
    """Scoring (not for an interrupted run) and the diff, from one snapshot of the clone."""
    record, recorder, workspace = played.record, played.recorder, played.workspace
    if workspace is not None:
        with contextlib.ExitStack() as stack:
            snap = _snapshot(record, workspace, stack)
            if record.outcome == INTERRUPTED:
                _write_diff(record, workspace, recorder, snap)
            else:
                try:
                    _score(record, played.spec, workspace, recorder, played.experiment, snap)
                except OSError:
                    raise  # the records cannot be written: the runner stops
                except Exception as exc:  # noqa: BLE001 - a bug in scoring must not stop the experiment
                    record.error = (record.error + "; " if record.error else "") + f"scoring failed: {exc}"
                    record.outcome = "error"


def _finalize(record: RunRecord, recorder: RunRecorder) -> None:
    """run.json, written last; when it cannot be serialised (a kit bug, never the disk), the run is
    recorded ``error`` with its score dropped and the reason, so one run never stops the experiment."""
    try:
        recorder.finalize(record)
    except OSError:
        raise  # the records cannot be written: the runner stops
    except Exception as exc:  # noqa: BLE001 - one broken record must not stop the experiment
        why = f"run.json could not be written ({type(exc).__name__}: {exc})"[:2000]
        record.error = (record.error + "; " if record.error else "") + why
        record.outcome, record.score = "error", None
        recorder.finalize(record)


def _snapshot(record: RunRecord, workspace: Workspace, stack: contextlib.ExitStack) -> Snapshot | None:
    """The clone's snapshot (removed when ``stack`` closes); None, with a note in ``error``, when it
    could not be taken (scoring then takes its own, and says why it failed)."""
    try:
        return stack.enter_context(snapshot(workspace.root, workspace.sandbox))
    except Exception as exc:  # noqa: BLE001 - scoring still runs and reports the failure
        record.error = (record.error + "; " if record.error else "") + f"snapshot failed: {exc}"[:2000]
        return None


def _score(
    record: RunRecord,
    spec: RunSpec,
    workspace: Workspace,
    recorder: RunRecorder,
    experiment: Experiment,
    snap: Snapshot | None,
) -> None:
    """Score the snapshot (never leaves the run without a score: a scoring failure gives every
    requirement failed, outcome ``unscored``); a tampered report gives outcome ``tampered``. Every
    strategy's working files are left out (:func:`kit.paths.owned_paths`), at the paths the experiment's
    options give them: the same for each run of the experiment, whatever its strategy."""
    record.score = scoring.score(
        spec.task,
        workspace,
        record.claimed_done,
        sandbox=workspace.sandbox or experiment.sandbox,
        snap=snap,
        own_files=owned_paths(experiment.strategy_options),
    )
    if record.score.unscored_reason:
        record.error = (record.error + "; " if record.error else "") + record.score.unscored_reason
        record.outcome = "unscored"
    elif record.score.tampered:
        record.outcome = "tampered"
    _write_diff(record, workspace, recorder, snap)


def _write_diff(
    record: RunRecord, workspace: Workspace, recorder: RunRecorder, snap: Snapshot | None
) -> None:
    """The snapshot's diff against the base into the run folder, binary-safe and capped
    (``docs/records.md``, ``## diff.patch``; what was left out in ``diff_omitted``): always
    written -- when no diff can be made, the file says why (and so does ``error``). An OSError
    writing the file propagates."""
    try:
        if snap is None:
            raise RuntimeError("no snapshot of the clone")
        capped = capped_patch(workspace, snap)
        record.diff_omitted = capped.omitted
        patch = capped.with_trailer()
    except Exception as exc:  # noqa: BLE001 - the run keeps its score; the record says what failed
        record.error = (record.error + "; " if record.error else "") + f"diff failed: {exc}"[:2000]
        patch = f"# orchbench: no diff could be made: {exc}\n".encode()
    free_room(recorder.run_dir)  # the room the run held is the diff's and run.json's now
    recorder.write_diff(patch)
