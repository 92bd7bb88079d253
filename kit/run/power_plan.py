"""The power lines of ``kit run --dry-run``: for the matrix it would run, the smallest solved-rate
difference between two strategies it could detect with 80 % power at alpha 0.05, and what a chosen
difference would need -- before any money is spent. The arithmetic and its assumption are
:mod:`kit.power`; a pilot experiment (``--pilot RESULTS``, estimated by :mod:`kit.analysis.pilot` in the
app layer) replaces the assumption by what it measured."""

from __future__ import annotations

from collections.abc import Sequence

from kit import power
from kit.config import load_yaml_model
from kit.errors import ConfigError
from kit.tasks.task import SUITES_DIR, Suite, suite_names

DETECT = 0.10  # the difference the "to detect" line is about unless --detect says otherwise


def task_projects(tasks: Sequence[object]) -> dict[str, str]:
    """Task id -> its project: the task's own ``project`` when it has one, else the project its suite
    manifest builds it from, else '' (its own cluster)."""
    out = {str(getattr(t, "id", t)): str(getattr(t, "project", "") or "") for t in tasks}
    missing = {tid for tid, p in out.items() if not p}
    for name in suite_names() if missing else []:
        try:
            suite = load_yaml_model(SUITES_DIR / f"{name}.yaml", Suite, "suite")
        except ConfigError:  # a broken suite file says so when it is used
            continue
        for item in suite.imports:
            if item.id in missing:
                out[item.id] = item.project
    return out


def power_lines(
    projects: dict[str, str], strategies: int, repeats: int, pilot: power.Assumption | None = None,
    detect: float = DETECT,
) -> list[str]:  # fmt: skip
    """The dry run's power paragraph for ``projects`` (task id -> project, '' = its own cluster)."""
    a = pilot or power.ASSUMED
    tasks = len(projects)
    sizes: dict[str, int] = {}
    for tid, p in projects.items():
        sizes[p or f"task:{tid}"] = sizes.get(p or f"task:{tid}", 0) + 1
    per = power.cluster_size(list(sizes.values()))
    named = len({p for p in projects.values() if p})
    clusters = f"{len(sizes)} clusters" + (
        f" ({named} projects)" if named else " (no projects: each task its own)"
    )
    if strategies < 2:
        return [f"power: one strategy -- nothing to compare ({tasks} tasks, {repeats} repeat(s))"]
    mde = power.mde(tasks, repeats, per, a)
    reach = (f"can tell apart a difference of {mde * 100:.0f} points or more; smaller ones will read 'undecided'"
             if mde < 1 else f"cannot tell apart any difference (it would take {mde * 100:.0f} points, more than "
             "a solved rate can differ by)")  # fmt: skip
    lines = [
        f"power (solved rate of two strategies, paired by task and repeat, 80 % power, alpha 0.05): {tasks} "
        f"task(s) in {clusters} x {repeats} repeat(s) {reach}",
        f"  {a.words()}",
    ]
    if len(sizes) < 8:
        lines.append(
            f"  only {len(sizes)} clusters: intervals from so few are too narrow, and a real test needs more"
        )
    if mde > detect:
        need_t = power.tasks_needed(detect, repeats, per, a)
        need_r = power.repeats_needed(detect, tasks, per, a)
        grouped = f" in projects of {per:.0f}" if named else ""
        t_text = (
            f"~{need_t} tasks{grouped} at {repeats} repeat(s)" if need_t else "more tasks than any suite has"
        )
        r_text = (f"or {need_r} repeats at {tasks} task(s)" if need_r
                  else f"no number of repeats at {tasks} task(s) gets there (repeats of a task correlate)")  # fmt: skip
        lines.append(
            f"  to detect {detect * 100:.0f} points: {t_text}, {r_text} (--detect POINTS to ask another)"
        )
    else:
        lines.append(
            f"  a difference of {detect * 100:.0f} points is within reach (--detect POINTS to ask another)"
        )
    return lines
