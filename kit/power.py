"""Power arithmetic for paired comparisons of solved rates: the smallest difference an experiment can
detect, and the tasks or repeats a chosen difference needs. Stdlib only (``statistics.NormalDist``), so
both ``kit run --dry-run`` (before any money is spent) and the analysis (after) use the same numbers.

The model. Two strategies run the same tasks; a *paired difference* is strategy A's solved (0/1) minus
strategy B's on one task and repeat. With ``T`` tasks, ``R`` repeats each and tasks grouped in
projects of ``m`` tasks on average, the mean difference has variance

    Var = sigma2 / (T * R) * deff,   deff = 1 + (R - 1) * icc_task + R * (m - 1) * icc_project

(the three-level design effect: ``icc_task`` = correlation of two repeats' differences on one task,
``icc_project`` = correlation of differences on two tasks of one project; ``icc_task >= icc_project``).
The smallest difference detectable with power ``1 - beta`` by a two-sided test at ``alpha`` is
``(z(1 - alpha/2) + z(1 - beta)) * sqrt(Var)`` (the normal approximation: with few clusters a real
test needs a little more).

What it cannot tell: the assumption is the answer. Without a pilot, :data:`ASSUMED` says the outcome
of a run is a coin flip at 50 % for both strategies with no pairing gain (``sigma2 = 0.5``, the largest
a difference of two 0/1 outcomes has when they are independent), ``icc_task = 0.3`` and
``icc_project = 0.1``. A pilot (:func:`components`) replaces all three by what it measured.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

ALPHA = 0.05
POWER = 0.8
MAX_N = 100_000


@dataclass(frozen=True)
class Assumption:
    """The variance of one paired difference and how differences correlate within a cluster."""

    sigma2: float = 0.5
    icc_task: float = 0.3
    icc_project: float = 0.1
    source: str = "assumed"

    def words(self) -> str:
        return (
            f"{self.source}: variance of one paired solved difference {self.sigma2:.2f}, correlation "
            f"between repeats of a task {self.icc_task:.2f}, between tasks of a project {self.icc_project:.2f}"
        )


ASSUMED = Assumption(
    source="assumed (no pilot: runs are 50 % coin flips, no pairing gain)",
)


def z_sum(alpha: float = ALPHA, power: float = POWER) -> float:
    """``z(1 - alpha/2) + z(power)``: 2.80 at the defaults."""
    n = NormalDist()
    return n.inv_cdf(1 - alpha / 2) + n.inv_cdf(power)


def cluster_size(project_sizes: Sequence[int]) -> float:
    """The effective tasks per project, ``sum(m^2) / sum(m)`` (unequal projects weigh more); 1 when
    every task is its own cluster."""
    sizes = [m for m in project_sizes if m > 0]
    return sum(m * m for m in sizes) / sum(sizes) if sizes else 1.0


def design_effect(repeats: int, tasks_per_project: float, a: Assumption = ASSUMED) -> float:
    return 1 + (repeats - 1) * a.icc_task + repeats * (tasks_per_project - 1) * a.icc_project


def mde(
    tasks: int,
    repeats: int,
    tasks_per_project: float = 1.0,
    a: Assumption = ASSUMED,
    alpha: float = ALPHA,
    power: float = POWER,
) -> float:
    """The smallest solved-rate difference (0..1) detectable with ``power``; inf with no tasks."""
    if tasks < 1 or repeats < 1:
        return math.inf
    var = a.sigma2 / (tasks * repeats) * design_effect(repeats, tasks_per_project, a)
    return z_sum(alpha, power) * math.sqrt(max(var, 0.0))


def tasks_needed(
    diff: float, repeats: int, tasks_per_project: float = 1.0, a: Assumption = ASSUMED
) -> int | None:
    """The fewest tasks (projects growing with them at the same size) for ``mde <= diff``; None past
    :data:`MAX_N`."""
    if diff <= 0:
        return None
    per_task = a.sigma2 / repeats * design_effect(repeats, tasks_per_project, a)
    n = math.ceil(per_task * (z_sum() / diff) ** 2)
    return max(1, n) if n <= MAX_N else None


def repeats_needed(
    diff: float, tasks: int, tasks_per_project: float = 1.0, a: Assumption = ASSUMED
) -> int | None:
    """The fewest repeats at ``tasks`` tasks for ``mde <= diff``; None when no number of repeats gets
    there (the task-level correlation puts a floor under the variance that repeats cannot lower)."""
    if diff <= 0 or tasks < 1:
        return None
    for r in range(1, 1001):
        if mde(tasks, r, tasks_per_project, a) <= diff:
            return r
    return None


def components(diffs: Sequence[float], tasks: Sequence[str], projects: Sequence[str]) -> Assumption | None:
    """The :class:`Assumption` a pilot's paired differences show (method of moments on the three
    levels: project, task within project, repeat within task), correlations clipped to [0, 1]. None
    with fewer than 3 differences or none varying."""
    n = len(diffs)
    if n < 3:
        return None
    mean = sum(diffs) / n
    total = sum((d - mean) ** 2 for d in diffs) / (n - 1)
    if total <= 0:
        return None
    by_task: dict[str, list[float]] = {}
    task_project: dict[str, str] = {}
    for d, t, p in zip(diffs, tasks, projects, strict=True):
        by_task.setdefault(t, []).append(d)
        task_project[t] = p or t
    within = [(d - sum(v) / len(v)) ** 2 for v in by_task.values() for d in v]
    dof = n - len(by_task)
    s2_rep = sum(within) / dof if dof > 0 else total
    icc_task = min(1.0, max(0.0, 1 - s2_rep / total))
    task_means = {t: sum(v) / len(v) for t, v in by_task.items()}
    by_project: dict[str, list[float]] = {}
    for t, m in task_means.items():
        by_project.setdefault(task_project[t], []).append(m)
    pairs = cross = 0.0
    for ms in by_project.values():  # covariance of two different tasks' means within one project
        for i, x in enumerate(ms):
            for y in ms[i + 1 :]:
                cross += (x - mean) * (y - mean)
                pairs += 1
    icc_project = min(icc_task, max(0.0, cross / pairs / total)) if pairs else 0.0
    return Assumption(total, icc_task, icc_project, source=f"from the pilot ({n} paired runs)")
