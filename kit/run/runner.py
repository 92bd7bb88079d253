"""The experiment runner's entry point: :func:`run_experiment` loads and checks an experiment, takes
the results folder, and hands the runs not yet done to an executor.

The pieces live in their own modules -- the plan (:mod:`kit.run.plan`), the results folder and resume
(:mod:`kit.run.results`), one run end to end (:mod:`kit.run.single`), the thread executor
(:mod:`kit.run.threads`), the Ray executor (:mod:`kit.run.ray_executor`), the lock and Ctrl-C
(:mod:`kit.run.control`). Their public names are importable from here too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from kit import strategies
from kit.config import (
    Experiment,
    PriceSheet,
    Profile,
    describe_validation_errors,
    load_experiment,
    load_profile,
)
from kit.errors import ConfigError, TaskError
from kit.importers.validate import collection_problems
from kit.model.check import with_api_base
from kit.model.gateway import Gateway
from kit.paths import EXPERIMENTS_DIR, PATH_OPTIONS
from kit.run.control import ResultsLock
from kit.run.plan import RunSpec, kit_commit, plan, redacted
from kit.run.progress import ExperimentState
from kit.run.results import (
    EXPERIMENT_COPY,
    INTERRUPTED,
    PRICE_SHEET_COPY,
    check_free_space,
    outcome_counts,
    prepare_results,
    storage_error,
)
from kit.run.resume import resume_plan, settle
from kit.run.sandboxing import run_sandbox
from kit.run.single import PlayedRun, new_record, play_run, run_one, score_run
from kit.run.spend import SpendCap, spend_bound, spent_so_far
from kit.run.threads import run_threads
from kit.sandbox.backends import check_available

__all__ = [
    "EXECUTORS",
    "EXPERIMENT_COPY",
    "ExperimentState",
    "INTERRUPTED",
    "PRICE_SHEET_COPY",
    "PlayedRun",
    "RunSpec",
    "kit_commit",
    "new_record",
    "outcome_counts",
    "plan",
    "play_run",
    "prepare_results",
    "redacted",
    "run_experiment",
    "run_one",
    "score_run",
]

EXECUTORS = ("thread", "ray")


@dataclass
class Loaded:
    """An experiment ready to run: ``experiment`` (the runs to do), ``full`` (the same with the file's
    strategies and their options, prompts and tiers too, when ``--strategies`` narrowed the matrix: what
    the folder's other runs are checked against and what its experiment.yaml records), the profile,
    the price sheet and the plan."""

    experiment: Experiment
    full: Experiment
    profile: Profile
    sheet: PriceSheet
    specs: list[RunSpec]


def _narrowed(experiment: Experiment, overrides: dict[str, Any]) -> tuple[Experiment, Experiment]:
    """(to run, full): ``overrides`` applied; a --strategies list narrows the run's strategies and their
    options, prompt overrides and tiers, while ``full`` keeps the file's strategies (and adds the new)."""
    chosen = overrides.get("strategies")
    rest = {k: v for k, v in overrides.items() if k != "strategies"}
    if "limits" in rest:  # a limit from the command line (--max-total-usd) joins the file's limits
        rest["limits"] = {**experiment.limits.model_dump(), **rest["limits"]}
    try:
        full = Experiment.model_validate({**experiment.model_dump(), **rest})
        if chosen is None:
            return full, full
        full = full.model_copy(
            update={"strategies": full.strategies + [c for c in chosen if c not in full.strategies]}
        )
        run = Experiment.model_validate(
            {
                **full.model_dump(),
                "strategies": chosen,
                "strategy_options": {k: v for k, v in full.strategy_options.items() if k in chosen}
                | _path_options(full, chosen),
                "prompt_overrides": {
                    k: v for k, v in full.prompt_overrides.items() if k.split("/")[0] in chosen
                },
                "tiers": {k: v for k, v in full.tiers.items() if k in chosen},
            }
        )
    except ValidationError as e:
        raise ConfigError(
            f"invalid override of experiment {experiment.name!r}:\n{describe_validation_errors(e)}"
        ) from None
    return run, full


def _path_options(full: Experiment, chosen: list[str]) -> dict[str, dict[str, Any]]:
    """The options of the strategies not chosen that move a working file (:data:`kit.paths.PATH_OPTIONS`):
    every run of the experiment is scored with the same paths left out, narrowed or not."""
    kept = {
        strategy: {n: v for n, v in full.strategy_options.get(strategy, {}).items() if n in names}
        for strategy, names in PATH_OPTIONS.items()
        if strategy not in chosen
    }
    return {strategy: options for strategy, options in kept.items() if options}


def load_settings(
    experiment: Experiment | str | Path,
    overrides: dict[str, Any] | None = None,
    api_base: str | None = None,
    collect: bool = True,
) -> Loaded:
    """The experiment (``overrides`` applied: any of its fields, e.g. tasks, strategies, repeats,
    profile), its profile (every tier sent to ``api_base`` when given), its price sheet and its plan,
    all checked before anything runs: unknown keys, tasks, strategies, roles and prompt names, and
    tasks whose hidden tests do not collect, fail here (ConfigError naming the file). Without
    ``collect`` (a dry run: nothing written) only the static checks of the hidden tests run."""
    source = None if isinstance(experiment, Experiment) else experiment
    if not isinstance(experiment, Experiment):
        experiment = load_experiment(experiment)
    experiment, full = _narrowed(experiment, overrides or {})
    profile, sheet = load_profile(experiment.profile)
    if api_base:
        profile = with_api_base(profile, api_base)
    try:
        specs = plan(experiment)
        strategies.check_experiment(full)
    except ConfigError as e:
        if source is None:
            raise
        raise ConfigError(f"{experiment_path(source)}: {e}") from None
    check_available(experiment.sandbox)  # a sandbox that cannot start fails here, saying what to do
    for task in {s.task.id: s.task for s in specs}.values():  # not run, paid for, then `unscored`
        box = run_sandbox(experiment, task).spec  # a task's Containerfile is built here, once
        check_available(box)
        problems = collection_problems(task, box, static_only=not collect)
        if problems:
            raise TaskError(
                f"task {task.id}: its hidden tests would not give a score:\n  " + "\n  ".join(problems),
                f"fix the task (python -m kit tasks validate {task.id}), or leave it out (--tasks)",
            )
    return Loaded(experiment, full, profile, sheet, specs)


def run_experiment(
    experiment: Experiment | str | Path,
    *,
    results_dir: Path | None = None,
    progress: bool = True,
    overrides: dict[str, Any] | None = None,
    retry_errors: bool = False,
    redo_changed: bool = False,
    api_base: str | None = None,
    grace_s: float = 30.0,
    executor: str = "thread",
    address: str | None = None,
    state: ExperimentState | None = None,
) -> Path:
    """Run every run of ``experiment`` not yet done; returns ``<results>/<experiment name>``.

    With ``retry_errors``, runs that ended with outcome ``error`` are run again too. A finished run made
    under other settings than the experiment's now (:mod:`kit.run.resume`) makes the call refuse
    (SettingsChanged) before anything is written, unless ``redo_changed``: then exactly those runs are
    redone. ``api_base`` sends every tier of the profile there. ``executor``
    "thread" runs them in this process; "ray" as Ray tasks (kit.run.ray_executor; ``address``: the
    cluster). Ctrl-C (thread executor): see :mod:`kit.run.control` (``grace_s`` is the grace period of
    runs in flight); once the runs in flight have stopped, KeyboardInterrupt is raised. A failure to
    write the records (disk full, folder gone read-only) stops the experiment with one ResultsError.
    ``state``, when given, is kept up to date as the runs go (the CLI asks it after Ctrl-C whether
    runs are still executing); one per call.
    """
    state = ExperimentState() if state is None else state
    if executor not in EXECUTORS:
        raise ConfigError(f"unknown executor {executor!r}", f"pick one of: {', '.join(EXECUTORS)}")
    if address and executor != "ray":
        raise ConfigError("--address is for the Ray executor", "add --executor ray, or drop --address")
    loaded = load_settings(experiment, overrides, api_base)
    experiment, profile, sheet, specs = loaded.experiment, loaded.profile, loaded.sheet, loaded.specs
    cap = experiment.limits.max_total_usd
    per_run = spend_bound(experiment, profile, sheet)[0] if cap is not None else None
    SpendCap(cap, per_run, 0.0)  # a cap without a per-run bound is refused before anything is written
    out = prepare_results(results_dir, experiment.name)
    with ResultsLock(out):  # one writer per results folder
        resume = resume_plan(out, specs, loaded.full, profile, sheet, retry_errors)
        settle(resume, experiment.name, redo_changed)  # refuses before anything is written
        check_free_space(out, experiment.limits, experiment.concurrency, len(resume.todo))  # so does this
        for run_id in resume.redo:  # a redone changed run starts afresh: no workflow call replayed
            (out / "journals" / f"{run_id}.jsonl").unlink(missing_ok=True)
        try:
            (out / EXPERIMENT_COPY).write_text(
                yaml.safe_dump(merged_matrix(out, loaded.full).model_dump(mode="json"), sort_keys=False),
                encoding="utf-8",
            )
            (out / PRICE_SHEET_COPY).write_text(
                yaml.safe_dump(sheet.model_dump(mode="json"), sort_keys=False), encoding="utf-8"
            )
        except OSError as e:
            raise storage_error(out, e) from None
        todo = resume.todo
        state.todo = len(todo)
        state.spent_before = spent_so_far(out, {s.run_id(profile.name) for s in todo})
        state.cap = SpendCap(cap, per_run, state.spent_before)
        if todo:
            Gateway(profile, sheet).preflight()  # a missing key fails here, once, before any run
        if executor == "ray":
            from kit.run.ray_executor import run_ray  # Ray is optional: imported when asked for

            run_ray(specs, todo, experiment, profile, sheet, out, progress, address, state)
        else:
            run_threads(specs, todo, experiment, profile, sheet, out, progress, grace_s, state)
    return out


def experiment_path(source: str | Path) -> Path:
    """The file an experiment name or path names (for messages)."""
    p = Path(source)
    return p if p.suffix in (".yaml", ".yml") or p.is_file() else EXPERIMENTS_DIR / f"{source}.yaml"


def merged_matrix(out: Path, experiment: Experiment) -> Experiment:
    """The experiment as the folder's experiment.yaml records it: its matrix widened to the matrix the
    folder's copy already named (tasks and strategies joined, the larger repeats), so the copy covers
    every run the folder keeps (their settings were checked equal to the experiment's)."""
    try:
        old = Experiment.model_validate(yaml.safe_load((out / EXPERIMENT_COPY).read_text(encoding="utf-8")))
    except (OSError, ValueError, yaml.YAMLError):
        return experiment
    return experiment.model_copy(
        update={
            "tasks": old.tasks + [t for t in experiment.tasks if t not in old.tasks],
            "strategies": old.strategies + [s for s in experiment.strategies if s not in old.strategies],
            "repeats": max(old.repeats, experiment.repeats),
        }
    )
