"""``kit run --dry-run``: what a run of the experiment would do, and nothing done -- no folder, no lock,
no copy written. It prints the matrix, the smallest solved-rate difference the matrix can detect (and
what a chosen one would need: :mod:`kit.run.power_plan`), the budget of one run, the most the runs to do can spend (from
the price sheet and the budget, :func:`spend_bound`) and what resume would keep, redo or run
(:mod:`kit.run.resume`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kit.config import Experiment
from kit.importers.validate import collection_checked
from kit.paths import results_root
from kit.power import Assumption
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
    experiment: Experiment, out: Path, resume: Any, per_run: float | None, todo: int, redo_changed: bool
) -> str:
    """The experiment-wide cap: what is spent, what a run may spend, how many runs it lets start."""
    cap = experiment.limits.max_total_usd
    if cap is None:
        return "experiment-wide cap: none (limits.max_total_usd, or --max-total-usd)"
    if per_run is None:
        return (
            f"experiment-wide cap: ${cap:g} -- kit run would refuse: set limits.max_usd too (a run's bound)"
        )
    redone = {rid for rid, spec in resume.specs.items() if spec in resume.todo}
    redone |= set(resume.changed) if redo_changed else set()
    spent = spent_so_far(out, redone)
    starts = max(0, min(todo, int((cap - spent + 1e-12) // per_run))) if per_run > 0 else todo
    return (
        f"experiment-wide cap: ${cap:g} (limits.max_total_usd); spent so far ${spent:.4f}; a run may spend up "
        f"to ${per_run:.2f}: at most {starts} of the {todo} run(s) to do will start"
    )


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
    lines.append(_cap_line(experiment, out, resume, per_run, todo, redo_changed))
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
