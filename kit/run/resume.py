"""Resume under settings: which runs of an experiment folder are kept, redone or run, and the refusal
when finished runs were made under other settings than the experiment's now.

A finished run (``kit.run.results.finished``) is kept only when its recorded ``fingerprint`` equals
the one the experiment gives it now (:mod:`kit.run.fingerprint`); otherwise it is *changed*. A run
recorded before fingerprints existed (no ``settings`` in run.json) counts as changed: what shaped it is
unknown, so the folder must not claim it. Every run of the folder is checked, also those outside the
matrix (another task, strategy or profile): they stay in the folder and the report reads them.

Changed runs in the matrix are redone with ``--redo-changed``; changed runs outside it cannot be (the
experiment does not name them), so only a fresh experiment name (or another ``--results``) goes on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kit.config import Experiment, PriceSheet, Profile
from kit.errors import ConfigError, KitError
from kit.records.schema import RunRecord, load_run
from kit.run.fingerprint import changes, fingerprint, run_settings
from kit.run.plan import RunSpec
from kit.run.results import finished
from kit.tasks.task import load_task

OLD_RECORD = "recorded before run fingerprints (no settings in run.json): what shaped it is unknown"


class SettingsChanged(ConfigError):
    """Finished runs of the folder were made under other settings (exit 2)."""


@dataclass
class ResumePlan:
    """What ``kit run`` would do: ``kept`` run ids, ``todo`` specs (``redo`` of them are changed runs
    redone), and ``changed`` / ``outside``: run id -> what changed (in the matrix / outside it)."""

    kept: list[str] = field(default_factory=list)
    todo: list[RunSpec] = field(default_factory=list)
    redo: list[str] = field(default_factory=list)
    changed: dict[str, list[str]] = field(default_factory=dict)
    outside: dict[str, list[str]] = field(default_factory=dict)
    specs: dict[str, RunSpec] = field(default_factory=dict)  # the matrix, by run id, in order


def _what_changed(
    record: RunRecord, spec: RunSpec | None, experiment: Experiment, profile: Profile, sheet: PriceSheet
) -> list[str]:
    """Why ``record`` does not match the experiment now ([] when it does)."""
    if record.profile != profile.name:
        return [f"profile: {record.profile} -> {profile.name}"]
    if not record.settings or not record.fingerprint:
        return [OLD_RECORD]
    if spec is None:  # outside the matrix: the settings it would get under this experiment
        try:
            spec = RunSpec(load_task(record.task), record.strategy, record.repeat)
        except KitError:
            return [f"task {record.task} can no longer be loaded"]
    now = run_settings(spec, experiment, profile, sheet)
    if fingerprint(now) == record.fingerprint:
        return []
    return changes(record.settings, now) or ["fingerprint differs"]


def resume_plan(
    out: Path,
    specs: list[RunSpec],
    experiment: Experiment,
    profile: Profile,
    sheet: PriceSheet,
    retry_errors: bool = False,
) -> ResumePlan:
    """Sort every run of the folder ``out`` (which need not exist) into kept / to do / changed."""
    by_id = {s.run_id(profile.name): s for s in specs}
    result = ResumePlan(specs=by_id)
    runs = Path(out) / "runs"
    for run_dir in sorted(runs.iterdir()) if runs.is_dir() else []:
        if run_dir.name in by_id or not run_dir.is_dir() or not finished(run_dir, False):
            continue  # a torn or interrupted run claims nothing
        record = load_run(run_dir)
        if record is not None:
            diff = _what_changed(record, None, experiment, profile, sheet)
            if diff:
                result.outside[run_dir.name] = diff
    for run_id, spec in by_id.items():
        if not finished(runs / run_id, retry_errors):
            result.todo.append(spec)
            continue
        record = load_run(runs / run_id)
        assert record is not None  # finished() read it
        diff = _what_changed(record, spec, experiment, profile, sheet)
        if diff:
            result.changed[run_id] = diff
        else:
            result.kept.append(run_id)
    return result


def describe(plan: ResumePlan, limit: int = 20) -> list[str]:
    """The changed runs, one line each with what changed (at most ``limit`` runs listed)."""
    items = [(k, v, "") for k, v in plan.changed.items()]
    items += [(k, v, " (not in this experiment's matrix)") for k, v in plan.outside.items()]
    lines = []
    for run_id, diff, note in items[:limit]:
        shown = "; ".join(diff[:4]) + (f"; ... {len(diff) - 4} more" if len(diff) > 4 else "")
        lines.append(f"  {run_id}{note}: {shown}")
    if len(items) > limit:
        lines.append(f"  ... and {len(items) - limit} more")
    return lines


def settle(plan: ResumePlan, experiment: str, redo_changed: bool) -> None:
    """Refuse (SettingsChanged) while changed runs would be kept, or cannot be redone; with
    ``redo_changed`` the changed runs in the matrix join the runs to do (``plan.redo``)."""
    if not plan.changed and not plan.outside:
        return
    n = len(plan.changed) + len(plan.outside)
    head = f"{n} finished run(s) of experiment {experiment!r} were made under other settings:\n"
    body = "\n".join(describe(plan))
    if plan.outside:
        raise SettingsChanged(
            head + body,
            "use a fresh experiment name (`name:` in the file) or another --results folder: runs "
            "outside this experiment's matrix cannot be redone by it",
        )
    if not redo_changed:
        raise SettingsChanged(
            head + body,
            "rerun with --redo-changed to redo exactly those runs under the new settings, or use a "
            "fresh experiment name to keep them and start a new folder",
        )
    todo = {id(s) for s in plan.todo}
    plan.redo = [rid for rid in plan.specs if rid in plan.changed]
    plan.todo = [s for rid, s in plan.specs.items() if id(s) in todo or rid in plan.changed]
    plan.changed = {}
