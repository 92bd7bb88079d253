"""Where a strategy starts paying off: solved rate and cost per solved task against task size, per
strategy, and the size where a strategy passes the baseline (vibe by default), each with a 95 %
interval from a hierarchical bootstrap over project -> task -> repeat (:mod:`kit.analysis.bootstrap`).

The fits (:mod:`kit.analysis.fits`), per strategy, pooled over every task and repeat it ran:

* **solved** against size: a logistic on log size, P(solved) = expit(a + b log size), fitted to the
  scored runs (errored and interrupted runs are left out and counted);
* **cost per solved task** against size: mean cost per run, exp(c + d log size) over every run with a
  cost, divided by the fitted solved rate.

**The crossover** of a strategy against the baseline is the size where the two fitted curves meet
inside the sizes measured (for solved, where the logits are equal: a closed form; for cost per solved,
the first sign change of the log ratio on a grid of :data:`GRID` sizes). It is *reported* only when the
gap between the two curves changes across the sizes measured by more than chance: the 95 % bootstrap
interval of (gap at the largest size - gap at the smallest) excludes 0. Otherwise the words are "no
crossover inside the sizes measured", with why. Fewer than :data:`MIN_TASKS` tasks with a size (or
fewer than 3 distinct sizes) give "too few tasks to tell".

The interval is the 2.5th and 97.5th percentile of the crossover size over the bootstrap replicates;
a replicate whose curves do not meet inside the sizes measured counts as beyond the end it points to,
so an interval may read "< 12" or "> 400": the data cannot place that end inside the range.

What it cannot tell: the curves are straight lines on the logit / log scale in log size -- a strategy
that pays off only in the middle of the range is not one of them; sizes are the kit's measures of the
reference change (or base, or prompt), not of how hard a task is; runs on one task are few, and the
interval is only as good as the number of clusters (under ~8 projects, too narrow).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from kit.analysis import bootstrap, fits
from kit.analysis.caveat import caveat
from kit.errors import KitError

#: Size measures (the ``size_<name>`` columns of the runs table) -> words for axes and sentences.
MEASURES = {
    "code_lines": "code lines of the reference change",
    "files": "files the reference change touches",
    "base_code_lines": "code lines of the base",
    "prompt_tokens": "first-call prompt tokens",
    "hidden_tests": "hidden tests",
}
UNITS = {"code_lines": "lines", "files": "files", "base_code_lines": "lines", "prompt_tokens": "tokens",
         "hidden_tests": "tests"}  # fmt: skip
BASELINE = "vibe"
MIN_TASKS = 4
GRID = 121
N_BOOT = 1000
NONE = "no crossover inside the sizes measured"
FEW = "too few tasks to tell"
FEW_CLUSTERS = 8  # under this many clusters a bootstrap interval is too narrow


@dataclass
class Crossing:
    """One strategy against the baseline on one curve (``solved`` or ``cost``)."""

    curve: str
    size: float = math.nan  # the point estimate; nan when the curves do not meet inside the range
    lo: float = math.nan
    hi: float = math.nan
    direction: str = ""  # "passes" / "falls behind" (solved), "drops below" / "rises above" (cost)
    reported: bool = False
    note: str = ""


@dataclass
class Crossover:
    measure: str
    baseline: str
    status: str = ""  # "" when fitted, else why not (FEW ...)
    low: float = math.nan  # the smallest and largest size measured
    high: float = math.nan
    crossings: dict[str, list[Crossing]] = field(default_factory=dict)
    curves: pd.DataFrame = field(default_factory=pd.DataFrame)
    points: pd.DataFrame = field(default_factory=pd.DataFrame)
    pooled: str = ""
    clustering: str = ""
    left_out: str = ""
    n_boot: int = 0
    clusters: int = 0  # the top-level clusters the bootstrap resamples (projects, else tasks)
    caveat: str = ""  # "SIMULATED records ..." / "scripted model ...": what the figure's title must say


def _left_out(runs: pd.DataFrame, column: str) -> str:
    parts = []
    no_size = int(runs[column].isna().sum()) if column in runs else len(runs)
    if no_size:
        parts.append(f"{no_size} without a task size")
    if "scored" in runs:
        unscored = runs[~runs["scored"].astype(bool)]
        if len(unscored):
            counts = unscored["outcome"].value_counts().sort_index()
            parts.append("not scored (left out of the solved fit): "
                         + ", ".join(f"{n} {o}" for o, n in counts.items()))  # fmt: skip
    return "; ".join(parts)


def _pooled(runs: pd.DataFrame) -> str:
    projects = bootstrap.cluster_of(runs).nunique()
    reps = runs.groupby(["strategy", "task"]).size()
    rep_text = f"{int(reps.min())}" if reps.min() == reps.max() else f"{int(reps.min())}-{int(reps.max())}"
    rep_text += " repeat" if rep_text == "1" else " repeats"
    has_projects = "project" in runs and (runs["project"].fillna("") != "").any()
    where = f" in {projects} projects" if has_projects else ""
    profiles = ", ".join(sorted(set(runs["profile"]))) if "profile" in runs else "?"
    return f"pooled over {runs['task'].nunique()} tasks{where}, {rep_text} each, profile {profiles}"


def task_points(runs: pd.DataFrame, column: str) -> pd.DataFrame:
    """Per (strategy, task): size, runs, solved rate over the scored runs, cost per solved task."""
    g = runs.groupby(["strategy", "task"], sort=True)
    scored = runs[runs["solved"].notna()].groupby(["strategy", "task"])
    out = pd.DataFrame({"size": g[column].first(), "runs": g.size(), "cost": g["cost_usd"].sum(),
                        "solved_runs": scored["solved"].sum(), "scored": scored.size()})  # fmt: skip
    out[["solved_runs", "scored"]] = out[["solved_runs", "scored"]].fillna(0)
    out["solved_rate"] = out["solved_runs"] / out["scored"].where(out["scored"] > 0)
    out["cost_per_solved"] = out["cost"] / out["solved_runs"].where(out["solved_runs"] > 0)
    return out.reset_index()


def _root_solved(a: np.ndarray, b: np.ndarray, span: tuple[float, float]) -> np.ndarray:
    """Where a + b x = 0 (x centred log size); +-inf when the lines are parallel."""
    with np.errstate(divide="ignore", invalid="ignore"):
        root = -a / b
    return np.where(b == 0, np.where(a > 0, -np.inf, np.inf), root)


def _root_grid(d: np.ndarray, xg: np.ndarray, down: bool) -> np.ndarray:
    """Per row of ``d`` (B, G), the first x where ``d`` goes from > 0 to <= 0 (``down``) or back;
    -inf when it is on the far side everywhere, +inf when on the near side or it crosses only back."""
    s = d > 0 if down else d <= 0
    change = s[:, :-1] & ~s[:, 1:]
    first = np.argmax(change, axis=1)
    has = change.any(axis=1)
    i = first
    d0, d1 = d[np.arange(len(d)), i], d[np.arange(len(d)), i + 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(d1 != d0, d0 / (d0 - d1), 0.0)
    root = xg[i] + t * (xg[i + 1] - xg[i])
    beyond = np.where((~s).all(axis=1), -np.inf, np.inf)
    return np.where(has, root, beyond)


def _crossing(curve: str, roots: np.ndarray, change: np.ndarray, span: tuple[float, float],
              centre: float, words: tuple[str, str], ahead: str = "one") -> Crossing:  # fmt: skip
    """The point (row 0), the percentile interval (rows 1:), and whether it is reported; ``ahead``: who
    is ahead in the middle of the range, in words (``pdca solves more``)."""
    point, boot = roots[0], roots[1:]
    lo_x, hi_x = bootstrap.percentile(np.clip(boot, span[0] - 1e-9, span[1] + 1e-9))
    c_lo, c_hi = bootstrap.percentile(change[1:])
    clear = c_lo > 0 or c_hi < 0
    inside = span[0] <= point <= span[1]
    direction = words[0] if change[0] > 0 else words[1]
    size = math.exp(point + centre) if inside else math.nan
    lo = -math.inf if lo_x < span[0] else math.exp(lo_x + centre)
    hi = math.inf if hi_x > span[1] else math.exp(hi_x + centre)
    if inside and clear:
        return Crossing(curve, size, lo, hi, direction, True)
    if inside:
        note = "the gap between the fitted curves does not change with size by more than chance"
    else:
        note = f"{ahead} throughout" if clear else "the curves do not differ clearly"
    return Crossing(curve, math.nan, lo, hi, direction, False, note)


def crossover(
    runs: pd.DataFrame,
    measure: str = "code_lines",
    baseline: str = BASELINE,
    n_boot: int = N_BOOT,
    seed: int = 0,
    details: bool = True,
) -> Crossover:
    """The crossover analysis of ``runs`` (the runs table of :func:`kit.analysis.load`) on ``measure``;
    without ``details`` no curves or per-task points (the simulation tests need only the crossings).

    Long because it is one pipeline: select, fit every strategy for every replicate, then each
    strategy's two crossings against the baseline and the curves with their bands."""
    if measure not in MEASURES:
        raise KitError(f"unknown size measure {measure!r}", f"pick one of: {', '.join(MEASURES)}")
    column = f"size_{measure}"
    result = Crossover(measure, baseline, n_boot=n_boot, caveat=caveat(runs))
    if runs.empty:
        result.status = f"{FEW} (no runs)"
        return result
    result.left_out = _left_out(runs, column)
    sized = runs[runs[column].notna()].reset_index(drop=True) if column in runs else runs.iloc[:0]
    if baseline not in set(runs["strategy"]):
        result.status = f"no runs of the baseline {baseline}: nothing to cross"
        return result
    tasks = sized.loc[sized["strategy"] == baseline, "task"].nunique() if not sized.empty else 0
    sizes = sized[column].nunique() if not sized.empty else 0
    alone = set(runs["strategy"]) == {baseline}
    if tasks < MIN_TASKS or sizes < 3:
        result.status = (f"{FEW}: {baseline} ran {tasks} task(s) with a size, of {sizes} distinct size(s); "
                         f"the fit needs at least {MIN_TASKS} tasks of 3 distinct sizes"
                         + (f" (and only {baseline} ran: there is no other strategy to set against it)"
                            if alone else ""))  # fmt: skip
        return result
    if alone:
        result.status = f"only the baseline {baseline} ran: there is no other strategy to set against it"
        return result
    x_all = np.log(np.maximum(sized[column].to_numpy(float), 1.0))
    centre = float(np.mean(np.unique(x_all)))
    x = x_all - centre
    span = (float(x.min()), float(x.max()))
    result.low, result.high = math.exp(span[0] + centre), math.exp(span[1] + centre)
    if details:
        result.pooled, result.clustering = _pooled(sized), bootstrap.clustering_words(sized)
        result.clusters = int(bootstrap.cluster_of(sized).nunique())
    w = np.vstack([np.ones(len(sized)), bootstrap.run_weights(sized, n_boot, seed)])
    xg = np.linspace(span[0], span[1], GRID)
    solved = sized["solved"].to_numpy(float)
    cost = sized["cost_usd"].to_numpy(float)
    fitted: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for strategy in sorted(set(sized["strategy"])):
        mine = (sized["strategy"] == strategy).to_numpy()
        ok_s, ok_c = mine & ~np.isnan(solved), mine & ~np.isnan(cost) & (cost >= 0)
        if ok_s.sum() < 2:
            continue
        fitted[strategy] = (fits.logistic(x[ok_s], solved[ok_s], w[:, ok_s]),
                            fits.log_mean(x[ok_c], cost[ok_c], w[:, ok_c]) if ok_c.any()
                            else np.full((len(w), 2), np.nan))  # fmt: skip
    if details:
        result.curves = _curves(fitted, xg, centre)
        result.points = task_points(sized, column)
    if baseline not in fitted:
        result.status = f"{FEW}: the baseline {baseline} has fewer than 2 scored runs with a size"
        return result
    base_s, base_c = fitted[baseline]
    for strategy, (sol, cst) in fitted.items():
        if strategy == baseline:
            continue
        da, db = sol[:, 0] - base_s[:, 0], sol[:, 1] - base_s[:, 1]
        solved_x = _crossing("solved", _root_solved(da, db, span), db * (span[1] - span[0]), span, centre,
                             ("passes", "falls behind"),
                             f"{strategy if da[0] > 0 else baseline} solves more")  # fmt: skip
        gap = _log_cps(cst, sol, xg) - _log_cps(base_c, base_s, xg)  # log(cost per solved / baseline's)
        change = gap[:, -1] - gap[:, 0]
        down = bool(change[0] <= 0)
        cost_x = _crossing("cost", _root_grid(gap, xg, down), -change, span, centre,
                           ("drops below", "rises above"),
                           f"{strategy if gap[0, GRID // 2] < 0 else baseline} pays less per solved task")  # fmt: skip
        result.crossings[strategy] = [solved_x, cost_x]
    return result


def _log_cps(cost_beta: np.ndarray, solved_beta: np.ndarray, xg: np.ndarray) -> np.ndarray:
    """log(cost per solved task) on the grid, (B, G)."""
    log_mu = cost_beta[:, :1] + cost_beta[:, 1:] * xg
    p = fits.expit(solved_beta[:, :1] + solved_beta[:, 1:] * xg)
    return log_mu - np.log(np.maximum(p, 1e-12))


def _curves(fitted: dict[str, tuple[np.ndarray, np.ndarray]], xg: np.ndarray, centre: float) -> pd.DataFrame:
    """Per strategy and grid size: solved and cost per solved, the point and its 95 % percentile band."""
    frames = []
    for strategy, (sol, cst) in fitted.items():
        p = fits.expit(sol[:, :1] + sol[:, 1:] * xg)
        cps = np.exp(_log_cps(cst, sol, xg))
        frame = {"strategy": strategy, "size": np.exp(xg + centre), "solved": p[0], "cost_per_solved": cps[0]}
        for name, values in (("solved", p[1:]), ("cost_per_solved", cps[1:])):
            band = (
                np.percentile(values, [2.5, 97.5], axis=0) if len(values) else np.full((2, len(xg)), np.nan)
            )
            frame[f"{name}_lo"], frame[f"{name}_hi"] = band
        frames.append(pd.DataFrame(frame))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _size(value: float, low: float, high: float) -> str:
    if value == -math.inf:
        return f"< {low:,.0f}"
    if value == math.inf:
        return f"> {high:,.0f}"
    return f"{value:,.0f}"


def _interval_words(c: Crossing, result: Crossover) -> str:
    """``56 to 366 lines``; an end past the sizes measured in words (``beyond 987, the largest size
    measured``): the data cannot place that end inside the range."""
    unit = UNITS[result.measure]
    lo = f"below {result.low:,.0f} (the smallest size measured)" if c.lo == -math.inf else f"{c.lo:,.0f}"
    hi = (f"beyond {result.high:,.0f} {unit} (the largest size measured)" if c.hi == math.inf
          else f"{c.hi:,.0f} {unit}")  # fmt: skip
    return f"{lo} to {hi}"


def crossing_words(c: Crossing, result: Crossover, strategy: str) -> str:
    """One crossing in plain words, e.g. ``passes vibe at ~140 code lines [95 % interval 60, 300]``."""
    unit = UNITS[result.measure]
    what = "solved rate" if c.curve == "solved" else "cost per solved task"
    if not c.reported:
        return f"{what}: {NONE} ({c.note})"
    meaning = {
        "passes": f"on larger tasks {strategy} solves more, on smaller {result.baseline} does",
        "falls behind": f"on larger tasks {result.baseline} solves more, on smaller {strategy} does",
        "drops below": f"on larger tasks {strategy} pays less per solved task, on smaller more",
        "rises above": f"on larger tasks {strategy} pays more per solved task, on smaller less",
    }[c.direction]
    return (f"its {what} {c.direction} {result.baseline}'s at ~{c.size:,.0f} {unit} "
            f"[95 % interval {_interval_words(c, result)}]: {meaning}")  # fmt: skip


def crossover_table(result: Crossover) -> pd.DataFrame:
    """One row per strategy: each crossing (``passes at ~270 lines`` or the plain words) and its 95 %
    interval (the report's and the notebook's table; the sentences of :func:`crossover_lines` say why)."""
    unit, rows = UNITS[result.measure], {}
    for s, crossings in sorted(result.crossings.items()):
        row = {}
        for c, name, short in zip(crossings, ("solved rate", "cost per solved task"), ("solved", "cost"),
                                  strict=True):  # fmt: skip
            row[f"{name} vs {result.baseline}'s"] = (
                f"{c.direction} at ~{c.size:,.0f} {unit}" if c.reported else NONE
            )
            row[f"95 % interval ({short})"] = (  # none for a crossover that is not reported
                f"{_size(c.lo, result.low, result.high)} to {_size(c.hi, result.low, result.high)}"
                if c.reported else "-"
            )  # fmt: skip
        rows[s] = row
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.index.name = "strategy"
    return table


def crossover_lines(result: Crossover) -> list[str]:
    """The crossover in sentences: what was fitted and pooled, then each strategy's two crossings."""
    what = MEASURES[result.measure]
    if result.status:
        lines = [f"Task size = {what}: {result.status}."]
    else:
        lines = [
            f"Task size = {what}, {result.low:,.0f} to {result.high:,.0f} {UNITS[result.measure]} measured; "
            f"{result.pooled}. Solved rate fitted per strategy as a logistic (S-shaped) curve in log size, cost per "
            "solved task "
            f"as fitted mean cost per run / fitted solved rate; 95 % intervals from {result.n_boot} bootstrap "
            f"replicates {result.clustering}.",
        ]
        if result.clusters < FEW_CLUSTERS:
            kind = "projects" if result.clustering == bootstrap.BY_PROJECT else "tasks"
            lines.append(f"  Only {result.clusters} {kind} to resample: with fewer than {FEW_CLUSTERS} a "
                         "bootstrap interval is too narrow; read the intervals as the least uncertainty there "
                         "is.")  # fmt: skip
        for strategy, (sol, cst) in sorted(result.crossings.items()):
            lines.append(f"  {strategy}: {crossing_words(sol, result, strategy)}; "
                         f"{crossing_words(cst, result, strategy)}.")  # fmt: skip
    if result.left_out:
        lines.append(f"  Left out: {result.left_out}.")
    return lines
