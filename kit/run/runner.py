"""The experiment runner: expand the matrix, run each (task, strategy, profile, repeat) in its own
clone, score it, and write its records.

Resume: a run whose run.json exists is skipped; a run folder without a readable run.json is a torn run
and is redone from scratch (no partial or duplicate records survive), and so is a run recorded as
``interrupted`` (Ctrl-C). ``retry_errors`` also redoes runs whose outcome was ``error``.

One run is two phases: :func:`play_run` (clone + strategy: mostly waiting on models) and
:func:`score_run` (hidden acceptance tests: CPU-bound; then run.json). :func:`run_one` does both in
turn -- the unit any executor can run. The thread executor in :func:`run_experiment` plays up to
``concurrency`` runs at once and scores finished ones on a separate pool sized to the cores, so
agents waiting on models never hold back scoring and a burst of finished runs never oversubscribes
the CPU. Around it: one writer per results folder (:class:`kit.run.control.ResultsLock`) and Ctrl-C
(:class:`kit.run.control.Interrupts`).
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import threading
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from tqdm.auto import tqdm

from kit import strategies
from kit.agent.budget import Budget
from kit.config import Experiment, PriceSheet, Profile, format_errors, load_experiment, load_profile
from kit.errors import ConfigError, Interrupted, ResultsError
from kit.model.gateway import Gateway
from kit.paths import REPO_ROOT, results_root
from kit.prompts import PromptBook
from kit.records.schema import RunRecord, RunRecorder, load_run, utc_now
from kit.run.control import Interrupts, ResultsLock
from kit.sandbox.backends import check_available
from kit.sandbox.commands import is_secret_env
from kit.secrets import Redactor, looks_secret
from kit.strategies.context import RunContext
from kit.tasks.scoring import scorer as scoring
from kit.tasks.task import Task, expand_tasks, load_task
from kit.tasks.workspace import Workspace, create_workspace, diff

EXPERIMENT_COPY = "experiment.yaml"
PRICE_SHEET_COPY = "price_sheet.yaml"
INTERRUPTED = "interrupted"  # outcome of a run stopped by Ctrl-C: redone by the next run


@dataclass(frozen=True)
class RunSpec:
    task: Task
    strategy: str
    repeat: int

    def run_id(self, profile: str) -> str:
        return f"{self.task.id}__{self.strategy}__{profile}__r{self.repeat}"


def kit_commit() -> str:
    """The kit's git commit (``+dirty`` when the work tree has changes), or '' outside git."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
    return f"{head}+dirty" if head and dirty else head


def _masked(value: Any, key: str = "") -> Any:
    if is_secret_env(key) or looks_secret(key):
        return "***"
    if isinstance(value, dict):  # e.g. extra_headers: {"x-api-key": ...}
        return {str(k): _masked(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_masked(v) for v in value]
    return value if isinstance(value, str | int | float | bool | None) else repr(value)


def redacted(profile: Profile) -> dict[str, Any]:
    """The profile as stored in run.json: secrets a user put under a tier's ``extra`` (nested dicts
    such as ``extra_headers`` included) are masked by name; the recorder masks them by value too."""
    data = profile.model_dump(mode="json", exclude={"tiers": {t: {"extra"} for t in profile.tiers}})
    for tier, spec in profile.tiers.items():
        data["tiers"][tier]["extra"] = {k: _masked(v, k) for k, v in spec.extra.items()}
    return data


def plan(experiment: Experiment) -> list[RunSpec]:
    """The matrix, validated up front: unknown tasks, strategies or roles fail before anything runs."""
    tasks = [load_task(t) for t in expand_tasks(experiment.tasks)]  # `suite:<name>` -> its tasks
    for name in experiment.strategies:
        strategies.get(name)
    strategies.experiment_tiers(experiment.strategies, experiment.tiers)
    return [
        RunSpec(task, strategy, repeat)
        for task in tasks
        for strategy in experiment.strategies
        for repeat in range(1, experiment.repeats + 1)
    ]


def _cores() -> int:
    """CPUs this process may use (the scoring pool's size)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def prepare_results(results_dir: str | Path | None, name: str) -> Path:
    """``<results>/<name>`` as an absolute path (a relative ``results_dir`` is taken from the current
    folder), created with its ``runs/`` folder; one ResultsError when it cannot be used."""
    root = Path(results_dir or results_root()).expanduser().resolve()
    out = root / name
    for p in (*reversed(out.parents), out, out / "runs"):
        if p.exists() and not p.is_dir():
            raise ResultsError(
                f"results path {p} is a file, not a folder", "pass --results a folder (or move the file away)"
            )
    try:
        (out / "runs").mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ResultsError(
            f"cannot create the results folder {out}: {e.strerror or e}",
            "pick a writable folder with --results (or fix its permissions)",
        ) from None
    return out


def run_experiment(
    experiment: Experiment | str | Path,
    *,
    results_dir: Path | None = None,
    progress: bool = True,
    overrides: dict[str, Any] | None = None,
    retry_errors: bool = False,
    grace_s: float = 30.0,
    executor: str = "thread",
    address: str | None = None,
) -> Path:
    """Run every run of ``experiment`` not yet done; returns ``<results>/<experiment name>``.

    With ``retry_errors``, runs that ended with outcome ``error`` are run again too. ``executor``
    "thread" runs them in this process; "ray" as Ray tasks (kit.run.ray_executor; ``address``: the
    cluster). Ctrl-C (thread executor): see :mod:`kit.run.control` (``grace_s`` is the grace period of
    runs in flight); once the runs in flight have stopped, KeyboardInterrupt is raised. A failure to
    write the records (disk full, folder gone read-only) stops the experiment with one ResultsError.
    """
    if executor not in EXECUTORS:
        raise ConfigError(f"unknown executor {executor!r}", f"pick one of: {', '.join(EXECUTORS)}")
    if address and executor != "ray":
        raise ConfigError("--address is for the Ray executor", "add --executor ray, or drop --address")
    if not isinstance(experiment, Experiment):
        experiment = load_experiment(experiment)
    if overrides:
        try:
            experiment = Experiment.model_validate({**experiment.model_dump(), **overrides})
        except ValidationError as e:
            raise ConfigError(
                f"invalid override of experiment {experiment.name!r}:\n{format_errors(e)}"
            ) from None
    profile, sheet = load_profile(experiment.profile)
    specs = plan(experiment)
    check_available(experiment.sandbox)  # bwrap that cannot start fails here, saying how to opt out
    out = prepare_results(results_dir, experiment.name)
    with ResultsLock(out):  # one writer per results folder
        try:
            (out / EXPERIMENT_COPY).write_text(
                yaml.safe_dump(experiment.model_dump(mode="json"), sort_keys=False), encoding="utf-8"
            )
            (out / PRICE_SHEET_COPY).write_text(
                yaml.safe_dump(sheet.model_dump(mode="json"), sort_keys=False), encoding="utf-8"
            )
        except OSError as e:
            raise _storage_error(out, e) from None
        todo = [s for s in specs if not _finished(out / "runs" / s.run_id(profile.name), retry_errors)]
        if todo:
            Gateway(profile, sheet).preflight()  # a missing key fails here, once, before any run
        if executor == "ray":
            _run_on_ray(specs, todo, experiment, profile, sheet, out, progress, address)
        else:
            _run_threads(specs, todo, experiment, profile, sheet, out, progress, grace_s)
    return out


EXECUTORS = ("thread", "ray")


def _progress_bar(specs: list[RunSpec], todo: list[RunSpec], name: str, progress: bool) -> Any:
    bar = tqdm(
        total=len(specs),
        initial=len(specs) - len(todo),
        desc=name,
        unit="run",
        disable=not progress,
        dynamic_ncols=True,
    )
    bar.set_postfix_str("$0.0000")
    return bar


def _run_on_ray(
    specs: list[RunSpec],
    todo: list[RunSpec],
    experiment: Experiment,
    profile: Profile,
    sheet: PriceSheet,
    out: Path,
    progress: bool,
    address: str | None,
) -> None:
    """The Ray executor (kit.run.ray_executor): each run a Ray task; the driver writes the records."""
    from kit.run.ray_executor import run_on_ray

    spent, bar = 0.0, _progress_bar(specs, todo, experiment.name, progress)
    try:
        for record in run_on_ray(todo, experiment, profile, sheet, out, kit_commit(), address=address):
            spent += record.totals.cost_usd
            bar.update(1)
            bar.set_postfix_str(f"${spent:.4f} last: {record.strategy}/{record.task} {record.outcome}")
    finally:
        bar.close()


def _run_threads(
    specs: list[RunSpec],
    todo: list[RunSpec],
    experiment: Experiment,
    profile: Profile,
    sheet: PriceSheet,
    out: Path,
    progress: bool,
    grace_s: float,
) -> None:
    """The thread executor: play up to ``concurrency`` runs at once, score finished ones on a pool of
    one worker per core, collect the records. Raises KeyboardInterrupt after a Ctrl-C and
    ResultsError when records could not be written."""
    commit = kit_commit()
    spent, bar = 0.0, _progress_bar(specs, todo, experiment.name, progress)
    storage: list[tuple[str, OSError]] = []
    agents = ThreadPoolExecutor(max_workers=experiment.concurrency, thread_name_prefix="run")
    scorers = ThreadPoolExecutor(max_workers=_cores(), thread_name_prefix="score")
    hard_stop = False
    with Interrupts(grace_s) as ctl:

        def play(spec: RunSpec) -> PlayedRun | None:
            if ctl.draining.is_set():  # interrupted before this run could start: it never starts
                return None
            return play_run(spec, experiment, profile, sheet, out, commit, ctl.stop)

        playing: dict[Future, RunSpec] = {agents.submit(play, s): s for s in todo}
        scoring: dict[Future, RunSpec] = {}
        try:
            while playing or scoring:
                done, _ = wait([*playing, *scoring], timeout=0.2, return_when=FIRST_COMPLETED)
                ctl.tick()
                if ctl.draining.is_set():
                    for fut in playing:
                        fut.cancel()  # a run not started yet never starts (queued scorings still run)
                for fut in done:
                    spec = playing.pop(fut, None) or scoring.pop(fut)
                    if fut.cancelled():
                        continue
                    try:
                        result = fut.result()
                    except OSError as e:  # the run's records could not be written
                        storage.append((spec.run_id(profile.name), e))
                        ctl.drain(grace_s=0)  # no run can be recorded: stop them all now
                        continue
                    if isinstance(result, PlayedRun):
                        scoring[scorers.submit(score_run, result)] = spec
                    elif isinstance(result, RunRecord):
                        spent += result.totals.cost_usd
                        bar.update(1)
                        bar.set_postfix_str(
                            f"${spent:.4f} last: {result.strategy}/{result.task} {result.outcome}"
                        )
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
        raise _storage_error(out, err, f"{len(storage)} run(s) could not be recorded (first: {run_id})")
    if ctl.interrupted:
        raise KeyboardInterrupt


def _storage_error(out: Path, err: OSError, detail: str = "") -> ResultsError:
    what = "the disk is full" if err.errno in (errno.ENOSPC, errno.EDQUOT) else (err.strerror or str(err))
    where = f" ({err.filename})" if err.filename else ""
    return ResultsError(
        f"cannot write records under {out}: {what}{where}" + (f"; {detail}" if detail else ""),
        "free space (or fix the folder's permissions), then run the same command again: finished runs "
        "are kept, the others are redone",
    )


def _finished(run_dir: Path, retry_errors: bool) -> bool:
    """A run to skip: its run.json is readable and it was not interrupted (nor an error being retried)."""
    record = load_run(run_dir)
    if record is None or record.outcome == INTERRUPTED:
        return False
    return not (retry_errors and record.outcome in ("error", "unscored"))


def outcome_counts(out: Path) -> dict[str, int]:
    """How many runs of the experiment folder ``out`` ended in each outcome (readable run.json only)."""
    counts: dict[str, int] = {}
    runs = Path(out) / "runs"
    for run_dir in sorted(runs.iterdir()) if runs.is_dir() else []:
        record = load_run(run_dir)
        if record is not None:
            counts[record.outcome] = counts.get(record.outcome, 0) + 1
    return counts


@dataclass
class PlayedRun:
    """A run whose strategy phase has ended: what :func:`score_run` needs to finish it."""

    spec: RunSpec
    experiment: Experiment
    record: RunRecord
    recorder: RunRecorder
    workspace: Workspace | None
    started: float  # time.monotonic() when the run started


def new_record(
    spec: RunSpec, experiment: Experiment, profile: Profile, sheet: PriceSheet, commit: str, **fields: Any
) -> RunRecord:
    """A run's record as it opens: identity, the kit commit, the price sheet and the (redacted)
    profile, the strategy's options and the sandbox; ``fields`` fill in the rest."""
    return RunRecord(
        run_id=spec.run_id(profile.name),
        experiment=experiment.name,
        task=spec.task.id,
        strategy=spec.strategy,
        profile=profile.name,
        repeat=spec.repeat,
        kit_commit=commit,
        price_sheet=sheet.model_dump(mode="json"),
        profile_spec=redacted(profile),
        options=experiment.strategy_options.get(spec.strategy, {}),
        sandbox=experiment.sandbox,
        **fields,
    )


def run_one(
    spec: RunSpec,
    experiment: Experiment,
    profile: Profile,
    sheet: PriceSheet,
    out: Path,
    commit: str = "",
    stop: threading.Event | None = None,
) -> RunRecord:
    """Run one (task, strategy, repeat) start to end: clone, strategy, scoring, records. Never raises
    for a failure inside the run (that becomes outcome ``error`` with its message); an OSError means
    its records could not be written."""
    return score_run(play_run(spec, experiment, profile, sheet, out, commit, stop))


def play_run(
    spec: RunSpec,
    experiment: Experiment,
    profile: Profile,
    sheet: PriceSheet,
    out: Path,
    commit: str = "",
    stop: threading.Event | None = None,
) -> PlayedRun:
    """The strategy phase: a fresh clone and the strategy on it. ``stop`` (Ctrl-C) makes the agents
    stop at their next step; the run is then ``interrupted``."""
    run_id = spec.run_id(profile.name)
    run_dir = out / "runs" / run_id
    if run_dir.exists():  # a torn or interrupted run: start it again from scratch
        shutil.rmtree(run_dir)
    recorder = RunRecorder(run_dir, run_id, Redactor.for_profile(profile))
    started_at, t0 = utc_now(), time.monotonic()
    options = experiment.strategy_options.get(spec.strategy, {})
    tiers = strategies.role_tiers(spec.strategy, experiment.tiers.get(spec.strategy), profile)
    limits = experiment.limits
    budget = Budget(recorder, limits.max_usd, limits.max_tokens, limits.max_model_calls, stop=stop)
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
    workspace = None
    ctx: RunContext | None = None  # its counters are recorded if the strategy raises
    try:
        workspace = create_workspace(spec.task, run_dir / "repo")
        record.base_commit = workspace.base_commit
        gateway = Gateway(
            profile,
            sheet,
            recorder,
            context={
                "run_id": run_id,
                "task": spec.task.id,
                "task_path": str(spec.task.path),
                "test_command": spec.task.test_command,
                "workspace": str(workspace.root),
                "strategy": spec.strategy,
            },
        )
        ctx = RunContext(
            task=spec.task,
            workspace=workspace,
            gateway=gateway,
            recorder=recorder,
            profile=profile,
            prompts=PromptBook(spec.strategy, experiment.prompt_overrides),
            limits=experiment.limits,
            options=options,
            budget=budget,
            journal_dir=out / "journals",
            sandbox=experiment.sandbox,
            tiers=tiers,
        )
        result = strategies.get(spec.strategy)(ctx)
        record.outcome = result.outcome
        record.claimed_done = result.claimed_done
        record.counters = {**result.counters, "permission_denials": recorder.denials}
    except Interrupted as exc:
        record.outcome = INTERRUPTED
        record.error = str(exc)
        record.counters = {**(ctx.counters if ctx else {}), "permission_denials": recorder.denials}
    except Exception as exc:  # noqa: BLE001 - one broken run must not stop the experiment
        record.outcome = "error"
        record.error = f"{type(exc).__name__}: {exc}"
        recorder.event("note", "", "error", traceback.format_exc()[-2000:], ok=False)
        record.counters = {**(ctx.counters if ctx else {}), "permission_denials": recorder.denials}
    if budget.interrupted and record.outcome != INTERRUPTED:  # a strategy swallowed the stop
        record.error = f"interrupted (the strategy had reached outcome {record.outcome!r})"
        record.outcome = INTERRUPTED
    if record.outcome == INTERRUPTED:
        recorder.event("note", "", "interrupted", "Ctrl-C: stopped at the next step", ok=False)
    return PlayedRun(spec, experiment, record, recorder, workspace, t0)


def score_run(played: PlayedRun) -> RunRecord:
    """The scoring phase: hidden acceptance tests on the clone (not for an interrupted run), the diff,
    then run.json -- written last, it marks the run done."""
    record, recorder, workspace = played.record, played.recorder, played.workspace
    if workspace is not None:
        if record.outcome == INTERRUPTED:
            _write_diff(record, workspace, recorder)
        else:
            try:
                _score(record, played.spec, workspace, recorder, played.experiment)
            except OSError:
                raise  # the records cannot be written: the runner stops
            except Exception as exc:  # noqa: BLE001 - a bug in scoring must not stop the experiment
                record.error = (record.error + "; " if record.error else "") + f"scoring failed: {exc}"
                record.outcome = "error"
    record.finished_at = utc_now()
    record.wall_s = round(time.monotonic() - played.started, 3)
    record.model_s = round(recorder.model_s, 3)
    record.tool_s = round(recorder.tool_s, 3)
    record.totals = recorder.totals
    record.calls = recorder.calls
    try:
        recorder.finalize(record)
    finally:
        recorder.close()
    return record


def _score(
    record: RunRecord, spec: RunSpec, workspace: Workspace, recorder: RunRecorder, experiment: Experiment
) -> None:
    """Score the clone (never leaves the run without a score: a scoring failure gives every requirement
    failed, outcome ``unscored``); a tampered report gives outcome ``tampered``."""
    record.score = scoring.score(spec.task, workspace, record.claimed_done, sandbox=experiment.sandbox)
    if record.score.unscored_reason:
        record.error = (record.error + "; " if record.error else "") + record.score.unscored_reason
        record.outcome = "unscored"
    elif record.score.tampered:
        record.outcome = "tampered"
    _write_diff(record, workspace, recorder)


def _write_diff(record: RunRecord, workspace: Workspace, recorder: RunRecorder) -> None:
    """The clone's final diff into the run folder. A clone whose git state is broken gets a note in
    ``error``; an OSError writing the file propagates (the records cannot be written)."""
    try:
        text = diff(workspace)
    except Exception as exc:  # noqa: BLE001 - a clone whose git state is broken still has its score
        record.error = (record.error + "; " if record.error else "") + f"diff failed: {exc}"
        return
    recorder.write_diff(text)
