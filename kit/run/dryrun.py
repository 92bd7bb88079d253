"""``kit run --dry-run``: what a run of the experiment would do, and nothing done -- no folder, no lock,
no copy written. It prints the matrix, the smallest solved-rate difference the matrix can detect (and
what a chosen one would need: :mod:`kit.run.power_plan`), the budget of one run, the most the runs to do
can spend (from the price sheet and the budget, :func:`spend_bound`), what a run typically spent and took
(the medians of the results folder's finished runs, per strategy), how many runs the experiment-wide cap
lets start and why, and what resume would keep, redo or run (:mod:`kit.run.resume`)."""

from __future__ import annotations

from pathlib import Path
from statistics import median
from typing import Any

from kit.config import Experiment
from kit.importers.validate import collection_checked
from kit.paths import results_root
from kit.power import Assumption
from kit.records.schema import load_run
from kit.run.power_plan import DETECT, power_lines, task_projects
from kit.run.resume import describe, resume_plan
from kit.run.runner import load_settings
from kit.run.spend import spend_bound, spent_so_far


def _budget_line(experiment: Experiment) -> str:
    lim = experiment.limits
    fields = ["max_model_calls", "max_usd", "max_tokens", "max_steps", "command_timeout_s"]
    shown = ", ".join(f"{f} {getattr(lim, f) if getattr(lim, f) is not None else 'none'}" for f in fields)
    return f"budget per run: {shown} (all roles together; max_steps per agent)"


def _cap_line(
    experiment: Experiment,
    spent: float,
    per_run: float | None,
    todo: int,
    typical: float | None,
) -> list[str]:
    """The experiment-wide cap: what is spent, what a run may spend, how many runs can start and why."""
    cap = experiment.limits.max_total_usd
    if cap is None:
        return ["experiment-wide cap: none (limits.max_total_usd, or --max-total-usd)"]
    if per_run is None:
        return [
            f"experiment-wide cap: ${cap:g} -- kit run would refuse: set limits.max_usd too (a run's bound)"
        ]
    head = f"experiment-wide cap: ${cap:g} (limits.max_total_usd); spent so far ${spent:.4f}; a run may spend up to ${per_run:.2f}"
    room = cap - spent
    if todo == 0:
        return [f"{head}: no run to do"]
    if room + 1e-12 < per_run:
        return [
            f"{head}: no run will start -- the spend so far plus one run's worst case passes the cap; "
            "raise it (--max-total-usd)"
        ]
    at_once = max(1, min(experiment.concurrency, todo, int((room + 1e-12) // per_run)))
    why = (
        f"a run starts while the spend so far plus the worst case of the runs in flight stays within "
        f"the cap, and gives back what it did not spend when it ends: up to {at_once} at once "
        f"(concurrency {experiment.concurrency})"
    )
    if spent + todo * per_run <= cap + 1e-12:
        return [
            f"{head}: every one of the {todo} run(s) to do starts, even if each spends its worst case; {why}"
        ]
    lines = [
        f"{head}: every one of the {todo} run(s) to do starts unless the runs spend more than "
        f"${room - per_run:.4f} between them before the last one starts; {why}"
    ]
    if typical is not None and typical > 0:
        fit = min(todo, 1 + int(max(0.0, room - per_run) // typical))
        lines.append(
            f"  at the typical ${typical:.4f} per run (the median of the folder's runs) "
            + (f"all {todo} start" if fit >= todo else f"about {fit} of the {todo} start")
        )
    return lines


def _typical(out: Path) -> tuple[str, float | None]:
    """The folder's recorded runs per strategy: their median cost and time per run, as a line, and the
    median cost over all of them (None: no run recorded yet)."""
    runs = out / "runs"
    rows = []
    for run_dir in sorted(runs.iterdir()) if runs.is_dir() else []:
        record = load_run(run_dir)
        if record is not None and record.outcome not in ("error", "interrupted"):
            rows.append((record.strategy, record.totals.cost_usd, record.wall_s or 0.0))
    if not rows:
        return "typical run: none yet (no finished run of this experiment in its results folder)", None
    parts = []
    for strategy in dict.fromkeys(r[0] for r in rows):
        mine = [r for r in rows if r[0] == strategy]
        cost, wall = median(r[1] for r in mine), median(r[2] for r in mine)
        parts.append(f"{strategy} ${cost:.4f}, {_duration(wall)} ({len(mine)} run(s))")
    head = "typical run (median of the folder's finished runs, errors and interrupts left out): "
    return head + "; ".join(parts), median(r[1] for r in rows)


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def dry_run(
    experiment: Experiment | str | Path,
    *,
    results_dir: Path | None = None,
    overrides: dict[str, Any] | None = None,
    api_base: str | None = None,
    retry_errors: bool = False,
    redo_changed: bool = False,
    pilot: Assumption | None = None,
    detect: float = DETECT,
) -> str:
    """What ``kit run`` with the same arguments would do, as text; writes nothing. The power lines
    (:mod:`kit.run.power_plan`) use ``pilot``'s variance when given, else :data:`kit.power.ASSUMED`;
    ``detect`` is the difference (0..1) they say the tasks or repeats needed for."""
    loaded = load_settings(experiment, overrides, api_base, collect=False)
    experiment, profile, sheet, specs = loaded.experiment, loaded.profile, loaded.sheet, loaded.specs
    out = Path(results_dir or results_root()).expanduser().resolve() / experiment.name
    resume = resume_plan(out, specs, loaded.full, profile, sheet, retry_errors)
    n_tasks = len(specs) // max(1, len(experiment.strategies) * experiment.repeats)
    lines = [
        f"experiment {experiment.name} (dry run: nothing is written)",
        f"matrix: {n_tasks} task(s) x {len(experiment.strategies)} strategies x {experiment.repeats} "
        f"repeat(s) = {len(specs)} runs, profile {profile.name}, sandbox {experiment.sandbox}",
        f"  tasks: {', '.join(dict.fromkeys(s.task.id for s in specs))}",
        f"  strategies: {', '.join(experiment.strategies)}",
        _budget_line(experiment),
    ]
    tasks = list({s.task.id: s.task for s in specs}.values())
    lines += power_lines(task_projects(tasks), len(experiment.strategies), experiment.repeats, pilot, detect)
    todo = len(resume.todo) + (len(resume.changed) if redo_changed else 0)
    per_run, how = spend_bound(experiment, profile, sheet)
    prices = f" ({'illustrative ' if sheet.illustrative else ''}price sheet {sheet.name})"
    if per_run is None:
        lines.append(f"most it can spend: unbounded -- {how}; set limits.max_usd to cap it")
    else:
        lines.append(
            f"most it can spend: ${per_run * todo:.2f} for the {todo} run(s) to do, ${per_run:.2f} per run"
            f"{prices}: {how}"
        )
    typical_line, typical = _typical(out)
    lines.append(typical_line)
    redone = {rid for rid, spec in resume.specs.items() if spec in resume.todo}
    redone |= set(resume.changed) if redo_changed else set()
    lines += _cap_line(experiment, spent_so_far(out, redone), per_run, todo, typical)
    where = "exists" if out.is_dir() else "new"
    redo = len(resume.changed) if redo_changed else 0
    lines.append(
        f"results: {out} ({where}): keep {len(resume.kept)}, redo {redo} changed, run {len(resume.todo)}"
    )
    unchecked = sorted({s.task.id for s in specs if not collection_checked(s.task)})
    if unchecked:
        lines.append(
            f"hidden tests not yet checked for {', '.join(unchecked)}: kit run collects them (with the "
            "reference solution) before the first run and refuses a task whose tests do not collect"
        )
    if resume.changed or resume.outside:
        lines.append("changed settings:")
        lines += describe(resume)
        if resume.outside or not redo_changed:
            lines.append(
                "kit run would refuse (exit 2): "
                + (
                    "runs outside the matrix changed; use a fresh experiment name"
                    if resume.outside
                    else "add --redo-changed to redo those runs, or use a fresh experiment name"
                )
            )
    return "\n".join(lines)
