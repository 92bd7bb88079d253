"""Synthetic experiments with planted effects: the proof that the crossover analysis finds a crossover
where there is one, puts its interval around it, and keeps quiet where there is none.

Each strategy follows a known :class:`Curve` in task size ``x`` (a code-lines count):

    logit P(solved) = logit(p_ref) + slope * log(x / REF) + u_project + v_task + e_(strategy, task)
    mean cost       = cost_ref * (x / REF) ** cost_slope * exp(c_project) * lognormal noise (mean 1)

``u_project`` (sd ``project_sd``) and ``v_task`` (sd ``task_sd``) are shared by every strategy -- a
project or a task that is hard for one is hard for all, which is what pairing takes out; ``e`` (sd
``interaction_sd``) is each strategy's own luck on a task, the same for every repeat of it: what makes
repeats of a task correlate and makes clusters, not runs, the unit. Because the random effects are
the same in law for every strategy, the planted crossover -- where two strategies' logits are equal --
is also where their solved rates (averaged over projects and tasks) are equal: :func:`planted_crossover`.

Task sizes are drawn log-uniform in ``sizes``; tasks belong to ``projects`` projects of
``tasks_per_project`` each. :func:`simulate_runs` gives the runs table :func:`kit.analysis.load` would
(the columns the crossover, verdict and reliability read) without touching the disk, for the
200-experiment tests; :func:`write_experiment` writes it as run folders (run.json with ``project`` and
``task_size``, one call record per run carrying its cost) for the report and notebook 05. Every run is
labelled profile ``simulated``, model ``simulated/planted``: never a benchmark.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from kit.records.recorder import RunRecorder
from kit.records.schema import CallRecord, RunRecord, Score, TaskSize
from kit.usage import Usage

REF = 100.0  # the size the curves' p_ref and cost_ref are given at
PROFILE = "simulated"
MODEL = "simulated/planted"


@dataclass(frozen=True)
class Curve:
    """One strategy's planted solved rate and cost per run, as functions of task size."""

    p_ref: float  # solved rate at REF lines (before random effects)
    slope: float  # change of logit(solved) per unit of log size
    cost_ref: float = 0.05  # mean cost per run (USD) at REF lines
    cost_slope: float = 0.5  # cost grows as size ** cost_slope

    def logit(self, size: np.ndarray | float) -> np.ndarray:
        return math.log(self.p_ref / (1 - self.p_ref)) + self.slope * np.log(np.asarray(size, float) / REF)


#: vibe falls off fast with size, pdca slowly: planted solved crossover at ~213 lines; pdca costs 2x per run.
CROSSING = {
    "vibe": Curve(p_ref=0.6, slope=-1.2, cost_ref=0.02, cost_slope=0.5),
    "pdca": Curve(p_ref=0.45, slope=-0.4, cost_ref=0.04, cost_slope=0.5),
}
#: The same curve for both: no crossover.
NULL = {"vibe": Curve(p_ref=0.5, slope=-0.8), "pdca": Curve(p_ref=0.5, slope=-0.8)}


def planted_crossover(a: Curve, b: Curve) -> float:
    """The size where ``a``'s and ``b``'s solved rates are equal (nan for parallel curves)."""
    if a.slope == b.slope:
        return math.nan
    gap = a.logit(REF) - b.logit(REF)
    return float(REF * math.exp(-gap / (a.slope - b.slope)))


def marginal_solved(curve: Curve, size: np.ndarray | float, sd: float) -> np.ndarray:
    """The solved rate at ``size`` averaged over normal random effects of total sd ``sd`` on the logit
    (Gauss-Hermite quadrature): what the pooled data show, flatter than the curve itself."""
    nodes, w = np.polynomial.hermite_e.hermegauss(40)
    eta = np.asarray(curve.logit(size), float)[..., None] + sd * nodes
    return (1 / (1 + np.exp(-eta)) * w).sum(-1) / w.sum()


def planted_cost_crossover(a: Curve, b: Curve, sd: float, sizes: tuple[float, float] = (1.0, 1e6)) -> float:
    """The size where ``a``'s cost per solved task (mean cost / marginal solved rate) equals ``b``'s, by
    bisection on log size inside ``sizes``; nan when they do not meet there. The project cost effect is
    the same for both and cancels."""

    def gap(x: float) -> float:
        ca, cb = (c.cost_ref * (x / REF) ** c.cost_slope / marginal_solved(c, x, sd) for c in (a, b))
        return math.log(ca) - math.log(cb)

    lo, hi = math.log(sizes[0]), math.log(sizes[1])
    if gap(math.exp(lo)) * gap(math.exp(hi)) > 0:
        return math.nan
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if gap(math.exp(lo)) * gap(math.exp(mid)) > 0 else (lo, mid)
    return math.exp((lo + hi) / 2)


#: The total sd of the random effects on the logit under :func:`simulate_runs`' defaults.
TOTAL_SD = math.sqrt(0.5**2 + 0.5**2 + 0.3**2)


def simulate_runs(
    curves: dict[str, Curve],
    projects: int = 12,
    tasks_per_project: int = 4,
    repeats: int = 3,
    sizes: tuple[float, float] = (10.0, 1000.0),
    project_sd: float = 0.5,
    task_sd: float = 0.5,
    interaction_sd: float = 0.3,
    cost_noise: float = 0.3,
    seed: int = 0,
) -> pd.DataFrame:
    """One synthetic experiment's runs table (see the module docstring for the model)."""
    rng = np.random.default_rng(seed)
    n_tasks = projects * tasks_per_project
    project = np.repeat(np.arange(projects), tasks_per_project)
    size = np.round(np.exp(rng.uniform(math.log(sizes[0]), math.log(sizes[1]), n_tasks)))
    u, c = rng.normal(0, project_sd, projects)[project], rng.normal(0, 0.3, projects)[project]
    v = rng.normal(0, task_sd, n_tasks)
    frames = []
    for strategy, curve in curves.items():
        e = rng.normal(0, interaction_sd, n_tasks)
        p = 1 / (1 + np.exp(-(curve.logit(size) + u + v + e)))
        solved = rng.random((repeats, n_tasks)) < p
        mean_cost = curve.cost_ref * (size / REF) ** curve.cost_slope * np.exp(c)
        noise = np.exp(rng.normal(-(cost_noise**2) / 2, cost_noise, (repeats, n_tasks)))
        for r in range(repeats):
            frames.append(pd.DataFrame({
                "task": [f"sim-p{p_:02d}-t{t:03d}" for t, p_ in enumerate(project)],
                "project": [f"proj{p_:02d}" for p_ in project], "strategy": strategy, "repeat": r,
                "solved": solved[r].astype(float), "cost_usd": mean_cost * noise[r], "size_code_lines": size,
            }))  # fmt: skip
    runs = pd.concat(frames, ignore_index=True)
    return runs.assign(
        experiment="simulated", profile=PROFILE, outcome="done", scored=True, failed_share=1 - runs["solved"],
        defects_total=1 - runs["solved"],
    )  # fmt: skip


def write_experiment(results: str | Path, runs: pd.DataFrame, name: str = "simulated") -> Path:
    """Write ``runs`` (from :func:`simulate_runs`) as the run folders of experiment ``name`` under
    ``results``; returns the experiment folder. One run.json and one call record per run."""
    exp = Path(results) / name
    sheet = {
        "name": "simulated-prices",
        "illustrative": True,
        "source": "kit.analysis.simulate",
        "prices": {},
    }
    spec = {"name": PROFILE, "price_sheet": sheet["name"], "tiers": {"medium": {"model": MODEL}}, "roles": {}}
    for row in runs.itertuples(index=False):
        run_id = f"{row.task}__{row.strategy}__{PROFILE}__r{row.repeat}"
        rec = RunRecorder(exp / "runs" / run_id, run_id)
        rec.call(CallRecord(run_id=run_id, role="coder", tier="medium", model=MODEL, output=100,
                            cost_usd=float(row.cost_usd), conversation="coder"))  # fmt: skip
        failed = int(row.solved == 0)
        lines = int(row.size_code_lines)
        rec.finalize(
            RunRecord(
                run_id=run_id, experiment=name, task=row.task, strategy=row.strategy, profile=PROFILE,
                repeat=int(row.repeat), project=row.project,
                task_size=TaskSize(code_lines=lines, files=1 + lines // 100, hidden_tests=4),
                price_sheet=sheet, profile_spec=spec, outcome="done", sandbox="simulated", claimed_done=True,
                score=Score(requirements_total=1, requirements_failed=failed, requirements_by_severity={"major": 1},
                            defects={"critical": 0, "major": failed, "minor": 0}),
                totals=Usage(output=100, cost_usd=float(row.cost_usd)), calls=1,
            )
        )  # fmt: skip
    return exp
