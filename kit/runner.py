"""The experiment runner: expand the matrix, run each (task, strategy, profile, repeat) in its own
clone, score it, and write its records. A run whose run.json exists is skipped, so an interrupted
experiment resumes where it stopped; a run folder without run.json is a torn run and is redone from
scratch (no partial or duplicate records survive).
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
import traceback
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from tqdm.auto import tqdm

from kit import scoring, strategies
from kit.agent import Budget
from kit.commands import is_secret_env
from kit.config import Experiment, PriceSheet, Profile, load_experiment, load_profile
from kit.context import RunContext
from kit.errors import ConfigError
from kit.gateway import Gateway
from kit.paths import REPO_ROOT, results_root
from kit.prompts import PromptBook
from kit.records import RunRecord, RunRecorder, load_run, utc_now
from kit.sandbox import check_available
from kit.secrets import Redactor, looks_secret
from kit.tasks import Task, expand_tasks, load_task
from kit.workspace import Workspace, create_workspace, diff

EXPERIMENT_COPY = "experiment.yaml"
PRICE_SHEET_COPY = "price_sheet.yaml"


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


def run_experiment(
    experiment: Experiment | str | Path,
    *,
    results_dir: Path | None = None,
    progress: bool = True,
    overrides: dict[str, Any] | None = None,
    retry_errors: bool = False,
    executor: str = "thread",
    address: str | None = None,
) -> Path:
    """Run every run of ``experiment`` not yet done; returns ``<results>/<experiment name>``.
    With ``retry_errors``, runs that ended with outcome ``error`` are run again too. ``executor``
    "thread" runs them in this process; "ray" as Ray tasks (kit.ray_executor; ``address``: the cluster)."""
    if executor not in EXECUTORS:
        raise ConfigError(f"unknown executor {executor!r}", f"pick one of: {', '.join(EXECUTORS)}")
    if address and executor != "ray":
        raise ConfigError("--address is for the Ray executor", "add --executor ray, or drop --address")
    if not isinstance(experiment, Experiment):
        experiment = load_experiment(experiment)
    if overrides:
        experiment = Experiment.model_validate({**experiment.model_dump(), **overrides})
    profile, sheet = load_profile(experiment.profile)
    specs = plan(experiment)
    check_available(experiment.sandbox)  # bwrap that cannot start fails here, saying how to opt out
    out = Path(results_dir or results_root()) / experiment.name
    (out / "runs").mkdir(parents=True, exist_ok=True)
    (out / EXPERIMENT_COPY).write_text(yaml.safe_dump(experiment.model_dump(mode="json"), sort_keys=False))
    (out / PRICE_SHEET_COPY).write_text(yaml.safe_dump(sheet.model_dump(mode="json"), sort_keys=False))

    todo = [s for s in specs if not _finished(out / "runs" / s.run_id(profile.name), retry_errors)]
    if todo:
        Gateway(profile, sheet).preflight()  # a missing key fails here, once, before any run
    commit = kit_commit()
    spent = _Spend()
    bar = tqdm(
        total=len(specs),
        initial=len(specs) - len(todo),
        desc=experiment.name,
        unit="run",
        disable=not progress,
        dynamic_ncols=True,
    )
    bar.set_postfix_str(f"${spent.usd:.4f}")

    def one(spec: RunSpec) -> RunRecord:
        return run_one(spec, experiment, profile, sheet, out, commit)

    for record in _execute(executor, address, todo, one, experiment, profile, sheet, out, commit):
        spent.add(record.totals.cost_usd)
        bar.update(1)
        bar.set_postfix_str(f"${spent.usd:.4f} last: {record.strategy}/{record.task} {record.outcome}")
    bar.close()
    return out


EXECUTORS = ("thread", "ray")


def _execute(
    executor: str, address: str | None, todo: list[RunSpec], one: Any, *job: Any
) -> Iterator[RunRecord]:
    """The seam between the runner and where runs execute: each finished run's record, as it finishes."""
    if executor == "ray":
        from kit.ray_executor import run_on_ray

        yield from run_on_ray(todo, *job, address=address)
        return
    with ThreadPoolExecutor(max_workers=job[0].concurrency) as pool:
        futures = [pool.submit(one, s) for s in todo]
        for fut in as_completed(futures):
            yield fut.result()


def _finished(run_dir: Path, retry_errors: bool) -> bool:
    record = load_run(run_dir)
    return record is not None and not (retry_errors and record.outcome in ("error", "unscored"))


class _Spend:
    def __init__(self) -> None:
        self.usd = 0.0
        self._lock = threading.Lock()

    def add(self, usd: float) -> None:
        with self._lock:
            self.usd += usd


def run_one(
    spec: RunSpec,
    experiment: Experiment,
    profile: Profile,
    sheet: PriceSheet,
    out: Path,
    commit: str = "",
) -> RunRecord:
    """Run one (task, strategy, repeat): clone, strategy, scoring, records. Never raises for a
    failure inside the run: that becomes outcome ``error`` with its message."""
    run_id = spec.run_id(profile.name)
    run_dir = out / "runs" / run_id
    if run_dir.exists():  # a torn run from an interrupted experiment: start it again from scratch
        shutil.rmtree(run_dir)
    recorder = RunRecorder(run_dir, run_id, Redactor.for_profile(profile))
    started_at, t0 = utc_now(), time.monotonic()
    options = experiment.strategy_options.get(spec.strategy, {})
    tiers = strategies.role_tiers(spec.strategy, experiment.tiers.get(spec.strategy), profile)
    limits = experiment.limits
    budget = Budget(recorder, limits.max_usd, limits.max_tokens, limits.max_model_calls)
    record = RunRecord(
        run_id=run_id,
        experiment=experiment.name,
        task=spec.task.id,
        strategy=spec.strategy,
        profile=profile.name,
        repeat=spec.repeat,
        kit_commit=commit,
        price_sheet=sheet.model_dump(mode="json"),
        profile_spec=redacted(profile),
        options=options,
        role_tiers=tiers,
        budget=budget.as_dict(),
        started_at=started_at,
        sandbox=experiment.sandbox,
    )
    workspace = None
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
    except Exception as exc:  # noqa: BLE001 - one broken run must not stop the experiment
        record.outcome = "error"
        record.error = f"{type(exc).__name__}: {exc}"
        recorder.event("note", "", "error", traceback.format_exc()[-2000:], ok=False)
        record.counters = {**getattr(exc, "counters", {}), "permission_denials": recorder.denials}
    if workspace is not None:
        _score(record, spec, workspace, recorder, experiment)
    record.finished_at = utc_now()
    record.wall_s = round(time.monotonic() - t0, 3)
    record.model_s = round(recorder.model_s, 3)
    record.tool_s = round(recorder.tool_s, 3)
    record.totals = recorder.totals
    record.calls = recorder.calls
    recorder.finalize(record)
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
    try:
        recorder.write_diff(diff(workspace))
    except Exception as exc:  # noqa: BLE001 - a clone whose git state is broken still has its score
        record.error = (record.error + "; " if record.error else "") + f"diff failed: {exc}"
