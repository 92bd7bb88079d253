"""Verdicts with confidence: paired differences between strategies, bootstrap intervals, repeats needed.

Two strategies are compared on **paired runs**: the same task, profile and repeat index (repeat r of
pdca on task T is set against repeat r of vibe on task T), so task difficulty cancels out. For each
metric (``solved``, ``failed_share``, ``defects_total``, ``cost_usd``; columns of
:attr:`kit.analysis.Records.runs`) the difference is *a minus b* per pair, and

* ``diff`` -- the mean paired difference;
* ``lo`` / ``hi`` -- its 95 % bootstrap interval (``scipy.stats.bootstrap`` with ``paired=True``,
  BCa; a percentile interval where BCa is undefined; the point itself when all differences are equal);
* ``p`` -- the two-sided paired t-test p-value (``scipy.stats.ttest_rel``);
* ``repeats_needed`` -- how many pairs a paired t-test (two-sided, alpha 0.05) needs to detect a true
  difference of the observed size with 80 % power, given the observed spread of the differences.
  Computed from scipy's noncentral t distribution: power(n) = P(|T| > t_crit(n-1)) for
  T ~ nct(df=n-1, nc=diff/sd*sqrt(n)); the smallest n with power >= 0.8. None when the observed
  difference is 0 (nothing to detect), or when n would exceed ``MAX_REPEATS``.

* ``verdict`` -- the one reading the line, ``p`` and ``repeats_needed`` all agree with
  (:func:`decide`): ``differs`` only when the interval excludes 0, p < 0.05 and there are at least
  ``FEW_PAIRS`` pairs (then ``repeats_needed`` is at most the pairs there are); ``no difference
  observed`` when the mean difference is 0; else ``undecided``, and ``repeats_needed`` is more than the
  pairs there are (at least ``FEW_PAIRS``, the fewest the kit trusts a bootstrap interval on).

Runs without a score (e.g. an error before scoring) have NaN quality metrics; a pair is used for a
metric only when both runs have a value.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from kit import power
from kit.analysis import bootstrap
from kit.analysis.caveat import caveat
from kit.errors import KitError

METRICS = ("solved", "failed_share", "defects_total", "cost_usd")
PAIR_KEYS = ("task", "profile", "repeat")
ALPHA = 0.05
POWER = 0.8
MAX_REPEATS = 10_000
FEW_PAIRS = 6  # below this, verdict lines warn that the bootstrap interval is unreliable
COLUMNS = (
    "diff",
    "lo",
    "hi",
    "p",
    "pairs",
    "clusters",
    "repeats_needed",
    "mde",
    "mde_from",
    "verdict",
    "clustering",
)
DIFFERS, SAME, UNDECIDED, NO_PAIRS = "differs", "no difference observed", "undecided", "no pairs"


def paired(runs: pd.DataFrame, a: str, b: str, keys: Sequence[str] = PAIR_KEYS) -> pd.DataFrame:
    """One row per (task, profile, repeat) that both strategies ran: the metrics as ``<m>_a``, ``<m>_b``."""
    cols = [*keys, *(["project"] if "project" in runs and "project" not in keys else []),
            *(m for m in METRICS if m in runs)]  # fmt: skip
    sides = []
    for name in (a, b):
        side = runs.loc[runs["strategy"] == name, cols]
        dupes = side.duplicated(list(keys))
        if dupes.any():
            first = side.loc[dupes, list(keys)].iloc[0].to_dict()
            raise KitError(
                f"strategy {name!r} has more than one run for {first}",
                "analyse one experiment folder at a time, or pass keys that tell the runs apart",
            )
        sides.append(side)
    merged = sides[0].merge(sides[1], on=list(keys), suffixes=("_a", "_b"))
    if "project_a" in merged:  # one task's project is the same for both strategies; a's names it
        merged = merged.rename(columns={"project_a": "project"}).drop(columns=["project_b"])
    return merged


def bootstrap_diff(
    a: Sequence[float], b: Sequence[float], n_resamples: int = 9999, seed: int = 0
) -> tuple[float, float, float]:
    """Mean of a - b over pairs and its 95 % paired bootstrap interval; NaNs with fewer than 2 pairs."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(x) == 0:
        return math.nan, math.nan, math.nan
    d = x - y
    mean = float(d.mean())
    if len(d) < 2:
        return mean, math.nan, math.nan
    if np.allclose(d, d[0]):
        return mean, mean, mean  # every resample has the same mean

    def stat(u: np.ndarray, v: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.mean(u - v, axis=axis)

    for method in ("BCa", "percentile"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # BCa on tiny samples warns, and we fall back
            res = stats.bootstrap(
                (x, y),
                stat,
                paired=True,
                vectorized=True,
                n_resamples=n_resamples,
                confidence_level=1 - ALPHA,
                method=method,
                rng=np.random.default_rng(seed),
            )
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if math.isfinite(lo) and math.isfinite(hi):
            return mean, lo, hi
    return mean, math.nan, math.nan


def repeats_needed(diffs: Sequence[float], power: float = POWER, alpha: float = ALPHA) -> int | None:
    """Pairs a two-sided paired t-test needs to detect the observed mean difference with ``power``."""
    d = np.asarray(diffs, dtype=float)
    if len(d) == 0 or d.mean() == 0:
        return None
    if len(d) < 2 or np.allclose(d, d[0]):
        return 2  # no spread at all: the smallest sample that has a t-test
    effect = abs(float(d.mean())) / float(d.std(ddof=1))
    for n in itertools.chain(range(2, 200), np.unique(np.geomspace(200, MAX_REPEATS, 400).astype(int))):
        crit = stats.t.ppf(1 - alpha / 2, n - 1)
        nc = effect * math.sqrt(n)
        achieved = stats.nct.sf(crit, n - 1, nc) + stats.nct.cdf(-crit, n - 1, nc)
        if achieved >= power:
            return int(n)
    return None


def decide(
    diff: float, lo: float, hi: float, p: float, pairs: int, needed: int | None
) -> tuple[str, int | None]:
    """The verdict on one metric and the repeats needed that goes with it (see the module docstring):
    the verdict line, the p-value and repeats_needed never contradict each other."""
    if pairs < 1 or pd.isna(diff):
        return NO_PAIRS, None
    if diff == 0 and needed is None:
        return SAME, None
    excludes = bool((not pd.isna(lo) and lo > 0) or (not pd.isna(hi) and hi < 0))
    if excludes and pairs >= FEW_PAIRS and not pd.isna(p) and p < ALPHA:
        return DIFFERS, pairs if needed is None else min(int(needed), pairs)
    if needed is None:  # beyond MAX_REPEATS
        return UNDECIDED, None
    return UNDECIDED, max(int(needed), FEW_PAIRS, pairs + 1)


def cluster_bootstrap(d: np.ndarray, pairs: pd.DataFrame, n_resamples: int, seed: int) -> tuple[float, float]:
    """The 95 % percentile interval of the mean paired difference ``d`` under the hierarchical
    bootstrap (:mod:`kit.analysis.bootstrap`: project -> task -> repeat), in chunks of 2,000 replicates."""
    table, index = bootstrap.units(pairs)
    rng = np.random.default_rng(seed)
    means = []
    for start in range(0, n_resamples, 2000):
        w = bootstrap.weights(table, min(2000, n_resamples - start), rng)[:, index]
        total = w.sum(1)
        means.append(np.where(total > 0, (w * d).sum(1) / np.maximum(total, 1), np.nan))
    return bootstrap.percentile(np.concatenate(means))


def cluster_spread(d: np.ndarray, pairs: pd.DataFrame) -> tuple[float, float, int]:
    """(standard error of the mean difference counting clusters, design effect against counting pairs
    as independent (>= 1), clusters). The standard error is over the means of the top level with at
    least 2 groups (projects, else tasks, else the pairs themselves) -- one task's repeats are the units
    when there is only one task."""
    n = len(d)
    clusters = bootstrap.cluster_of(pairs).to_numpy()
    naive = float(np.std(d, ddof=1)) / math.sqrt(n) if n > 1 else math.nan
    for groups in (clusters, pairs["task"].astype(str).to_numpy()):
        keys, inverse = np.unique(groups, return_inverse=True)
        if len(keys) >= 2:
            means = np.bincount(inverse, weights=d) / np.bincount(inverse)
            se = float(np.std(means, ddof=1)) / math.sqrt(len(keys))
            deff = (se / naive) ** 2 if naive and naive > 0 else 1.0
            return se, max(1.0, deff), len(np.unique(clusters))
    return naive, 1.0, len(np.unique(clusters))


def _p_value(d: np.ndarray, pairs: pd.DataFrame) -> float:
    """Two-sided one-sample t-test of the mean difference over the same level :func:`cluster_spread`
    uses (cluster means when there are at least 2 clusters)."""
    if len(d) < 2:
        return math.nan
    for groups in (bootstrap.cluster_of(pairs).to_numpy(), pairs["task"].astype(str).to_numpy()):
        keys, inverse = np.unique(groups, return_inverse=True)
        if len(keys) >= 2:
            d = np.bincount(inverse, weights=d) / np.bincount(inverse)
            break
    if len(d) < 2 or np.allclose(d, d[0]):
        return 1.0 if np.allclose(d, 0) else 0.0
    return float(stats.ttest_1samp(d, 0.0).pvalue)


def _mde(metric: str, se: float, pairs: pd.DataFrame) -> tuple[float, str]:
    """The smallest difference this experiment could have detected (80 % power, alpha 0.05) and how it
    was found: from the measured spread, or -- solved only, when every difference was the same -- from
    the power assumption of :mod:`kit.power`."""
    if se > 0:
        return power.z_sum(ALPHA, POWER) * se, "measured"
    if metric != "solved" or pairs.empty:
        return math.nan, ""
    tasks_of = pairs.drop_duplicates("task")
    per_project = power.cluster_size(tasks_of.groupby(bootstrap.cluster_of(tasks_of)).size().tolist())
    tasks = len(tasks_of)
    repeats = max(1, round(len(pairs) / max(1, tasks)))
    return power.mde(tasks, repeats, per_project), "assumed"


def compare(runs: pd.DataFrame, a: str, b: str, n_resamples: int = 9999, seed: int = 0) -> pd.DataFrame:
    """Per metric, the paired difference a - b: diff, 95 % cluster-bootstrap lo/hi, p (over cluster
    means), pairs, clusters, repeats_needed (counting the design effect), the smallest detectable
    difference ``mde`` (and ``mde_from``: measured or assumed), and the verdict they agree on
    (:func:`decide`)."""
    pairs = paired(runs, a, b)
    rows = {}
    for m in METRICS:
        if f"{m}_a" not in pairs:
            continue
        both = pairs.dropna(subset=[f"{m}_a", f"{m}_b"])
        x, y = both[f"{m}_a"].to_numpy(float), both[f"{m}_b"].to_numpy(float)
        d = x - y
        diff, lo, hi = (float(d.mean()), math.nan, math.nan) if len(d) else (math.nan,) * 3
        se, deff, clusters = cluster_spread(d, both) if len(d) > 1 else (math.nan, 1.0, len(d))
        if len(d) > 1:
            lo, hi = (diff, diff) if np.allclose(d, d[0]) else cluster_bootstrap(d, both, n_resamples, seed)
        need = repeats_needed(d)
        need = None if need is None else math.ceil(need * deff)
        p = _p_value(d, both)
        verdict, needed = decide(diff, lo, hi, p, len(d), need)
        mde, mde_from = _mde(m, se if len(d) > 1 else math.nan, both)
        rows[m] = {"diff": diff, "lo": lo, "hi": hi, "p": p, "pairs": len(d), "clusters": clusters,
                   "repeats_needed": needed, "mde": mde, "mde_from": mde_from, "verdict": verdict,
                   "clustering": bootstrap.clustering_words(both)}  # fmt: skip
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(COLUMNS))


def strategy_pairs(strategies: Sequence[str], baseline: str | None = None) -> list[tuple[str, str]]:
    """(a, b) pairs to compare: each strategy against ``baseline``, or every pair (sorted names)."""
    names = sorted(set(strategies))
    if baseline is not None:
        if baseline not in names:
            raise KitError(f"no runs of baseline strategy {baseline!r}", f"pick one of: {', '.join(names)}")
        return [(s, baseline) for s in names if s != baseline]
    return list(itertools.combinations(names, 2))


def verdict_table(
    runs: pd.DataFrame, baseline: str | None = None, n_resamples: int = 9999, seed: int = 0
) -> pd.DataFrame:
    """One row per (a, b, metric): the paired comparison of every strategy pair (or each vs baseline)."""
    cols = ["a", "b", "metric", *COLUMNS]
    if runs.empty:
        return pd.DataFrame(columns=cols)
    frames = []
    for a, b in strategy_pairs(runs["strategy"], baseline):
        t = compare(runs, a, b, n_resamples, seed)
        frames.append(t.rename_axis("metric").reset_index().assign(a=a, b=b))
    if not frames:
        return pd.DataFrame(columns=cols)
    return pd.concat(frames, ignore_index=True)[cols]


FORMATS = {  # metric -> (unit after the number, number format, name in notes)
    "solved": (" pts solved", lambda v: f"{v * 100:+.0f}", "solved"),
    "failed_share": (" pts failed share", lambda v: f"{v * 100:+.1f}", "failed share"),
    "defects_total": (" defects/run", lambda v: f"{v:+.2f}", "defects"),
    "cost_usd": ("/run", lambda v: f"{'-' if v < 0 else '+'}${abs(v):.4f}", "cost"),
}


def _interval(metric: str, row: pd.Series) -> str:
    unit, fmt, name = FORMATS[metric]
    if pd.isna(row["diff"]):
        return f"{name}: no pairs"
    if pd.isna(row["lo"]):
        return f"{fmt(row['diff'])}{unit} (one pair: no interval)"
    if int(row["pairs"]) < FEW_PAIRS:  # too narrow to be evidence (equal differences: zero width)
        return f"{fmt(row['diff'])}{unit} (no interval)"
    return f"{fmt(row['diff'])}{unit} [{fmt(row['lo'])}, {fmt(row['hi'])}]"


def _needed(metric: str, row: pd.Series) -> str:
    name = FORMATS[metric][2]
    verdict, n, pairs = row.get("verdict"), row["repeats_needed"], int(row["pairs"])
    if pd.isna(row["diff"]) or verdict == NO_PAIRS:
        return ""
    if verdict == DIFFERS:
        p = "p < 0.001" if row["p"] < 0.001 else f"p = {row['p']:.2g}"
        return f"{name} differs (interval excludes 0), {p}"
    if verdict == SAME:
        return f"{name}: no difference observed"
    if n is None or pd.isna(n):
        return f"{name}: more than {MAX_REPEATS} paired runs to tell apart"
    return f"{name}: ~{int(n)} paired runs to tell apart (have {pairs})"


def clusters_words(row: pd.Series) -> str:
    """``in 3 clusters (resampled by project, then task, then repeat)``."""
    n = int(row["clusters"])
    return f"in {n} cluster{'' if n == 1 else 's'} ({row['clustering']})"


def detectable_words(row: pd.Series) -> str:
    """``smallest solved difference it could detect: 31 pts (80 % power, alpha 0.05)``."""
    how = " -- assumed, every difference was the same (kit.power)" if row.get("mde_from") == "assumed" else ""
    if not row["mde"] < 1:  # a solved rate moves 100 points at most: no difference is detectable
        return (
            f"no solved difference it could detect: it would need over 100 pts (80 % power, alpha 0.05{how})"
        )
    return f"smallest solved difference it could detect: {row['mde'] * 100:.0f} pts (80 % power, alpha 0.05{how})"


def verdict_lines(table: pd.DataFrame) -> list[str]:
    """Plain language, one line per strategy pair, e.g.
    ``pdca vs vibe: +25 pts solved [+5, +45], -1.20 defects/run [-2.00, -0.40], +$0.4100/run
    [+$0.3000, +$0.5500]; 12 paired runs. solved differs (interval excludes 0); ...``."""
    if table.empty:
        return ["no strategy pairs with runs on the same task and repeat: nothing to compare"]
    lines = []
    for (a, b), g in table.groupby(["a", "b"], sort=False):
        g = g.set_index("metric")
        shown = [m for m in ("solved", "defects_total", "cost_usd") if m in g.index]
        pairs = int(g["pairs"].max()) if len(g) else 0
        head = f"{a} vs {b}: " + ", ".join(_interval(m, g.loc[m]) for m in shown) + f"; {pairs} paired runs"
        if "clusters" in g and pairs:
            head += " " + clusters_words(g.loc[g["pairs"].idxmax()])
        notes = [n for n in (_needed(m, g.loc[m]) for m in shown) if n]
        if "solved" in g.index and "mde" in g and not pd.isna(g.loc["solved", "mde"]):
            notes.append(detectable_words(g.loc["solved"]))
        if 1 < pairs < FEW_PAIRS:
            notes.append(
                f"only {pairs} pairs: no verdict and no interval -- a verdict needs at least {FEW_PAIRS} "
                "(fewer give bootstrap intervals too narrow to trust)"
            )
        lines.append(head + (". " + "; ".join(notes) if notes else ""))
    return lines


# --------------------------------------------------------------------------- frontier per task family


def task_family(task_ids: Sequence[str]) -> dict[str, str]:
    """Task id -> family: the id's prefix before the first '-' when another task shares it
    (exercism-forth and exercism-react -> "exercism"), else the id itself."""
    ids = sorted(set(task_ids))
    prefix = {t: t.split("-", 1)[0] for t in ids}
    counts = pd.Series(list(prefix.values())).value_counts()
    return {t: prefix[t] if "-" in t and counts[prefix[t]] > 1 else t for t in ids}


def frontier_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (family, strategy): runs, mean cost, mean failed share, solved rate, and ``on_frontier``:
    no other strategy of the family is at most as costly and at most as failing, and better on one."""
    cols = ["runs", "cost_usd", "failed_share", "solved_rate", "on_frontier"]
    if runs.empty:
        return pd.DataFrame(columns=cols, index=pd.MultiIndex.from_tuples([], names=["family", "strategy"]))
    what = caveat(runs)  # the figure's title says it (frontier_figure): the table travels without the runs
    df = runs.assign(family=runs["task"].map(task_family(runs["task"])))
    g = df.groupby(["family", "strategy"], sort=True)
    table = pd.DataFrame(
        {
            "runs": g.size(),
            "cost_usd": g["cost_usd"].mean(),
            "failed_share": g["failed_share"].mean(),
            "solved_rate": g["solved"].mean(),
        }
    )
    on = []
    for (family, _), row in table.iterrows():
        others = table.loc[family]
        dominated = (
            (others["cost_usd"] <= row["cost_usd"])
            & (others["failed_share"] <= row["failed_share"])
            & ((others["cost_usd"] < row["cost_usd"]) | (others["failed_share"] < row["failed_share"]))
        )
        on.append(not bool(dominated.any()) and not pd.isna(row["failed_share"]))
    table["on_frontier"] = on
    table = table[cols].copy()
    table.attrs["caveat"] = what
    return table
