"""The crossover's figures (notebook 05 and the HTML report): solved rate and cost per solved task
against task size, one line per strategy with its 95 % band, the measured points per task, and the
reported crossings as dotted lines. Titles say what was pooled and what the band is."""

from __future__ import annotations

from pathlib import Path
from textwrap import fill

from matplotlib.figure import Figure

from kit.analysis.crossover import MEASURES, UNITS, Crossover
from kit.analysis.figures import _new, _save


def _title(result: Crossover, what: str) -> str:
    caveat = f"{result.caveat}\n" if result.caveat else ""
    return (f"{caveat}{what} against task size, {result.pooled}\nline = fitted per strategy, band = 95 % interval "
            f"({result.n_boot} bootstrap replicates {result.clustering.split(';')[0]}), dot = one task")  # fmt: skip


def crossover_figure(result: Crossover) -> Figure:
    """Two panels: solved rate (left) and cost per solved task (right, log scale) against size."""
    if result.status or result.curves.empty:  # words only, on a small canvas
        fig = _new(9, 1.8)
        caveat = f"{result.caveat}\n" if result.caveat else ""
        text = fill(f"Crossover on {MEASURES[result.measure]}: {result.status or 'nothing fitted'}", 110)
        fig.text(0.5, 0.5, caveat + text, ha="center", va="center", fontsize=10, wrap=True)
        return fig
    fig = _new(12, 5.4 if result.caveat else 5)
    axes = fig.subplots(1, 2)
    strategies = sorted(set(result.curves["strategy"]))
    colours = {s: f"C{i % 10}" for i, s in enumerate(strategies)}
    pts = result.points
    for ax, column, point, what in (
        (axes[0], "solved", "solved_rate", "Solved rate"),
        (axes[1], "cost_per_solved", "cost_per_solved", "Cost per solved task"),
    ):
        for s in strategies:
            c = result.curves[result.curves["strategy"] == s]
            ax.plot(c["size"], c[column], color=colours[s], lw=2, label=s)
            ax.fill_between(c["size"], c[f"{column}_lo"], c[f"{column}_hi"], color=colours[s], alpha=0.18)
            mine = pts[(pts["strategy"] == s) & pts[point].notna()]
            ax.scatter(mine["size"], mine[point], color=colours[s], s=12 + 6 * mine["runs"], alpha=0.55,
                       edgecolors="none")  # fmt: skip
        for s, crossings in result.crossings.items():
            c = crossings[0 if column == "solved" else 1]
            if c.reported:
                ax.axvline(c.size, color=colours[s], ls=":", lw=1.5)
                ax.annotate(f"{s} {c.direction} {result.baseline}\nat ~{c.size:,.0f} {UNITS[result.measure]}",
                            (c.size, 1), xycoords=("data", "axes fraction"), xytext=(4, -4),
                            textcoords="offset points", va="top", fontsize=8, color=colours[s],
                            bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "none", "pad": 1})  # fmt: skip
        ax.set_xscale("log")
        ax.set_xlabel(f"task size: {MEASURES[result.measure]} (log scale)")
        ax.grid(alpha=0.3)
        ax.set_title(what, fontsize=10)
    unsolved = int((pts["cost_per_solved"].isna() & (pts["solved_runs"] == 0)).sum())
    axes[0].set_ylabel("share of runs solved")
    axes[0].set_ylim(-0.03, 1.03)
    axes[1].set_yscale("log")
    axes[1].set_ylabel("USD per solved task (mean cost per run / solved rate)")
    if unsolved:
        axes[1].set_title(f"Cost per solved task (not drawn: {unsolved} of {len(pts)} strategy x task with "
                          "nothing solved)", fontsize=10)  # fmt: skip
    axes[0].legend(title="strategy (dotted: crossover)", fontsize="small")
    fig.suptitle(_title(result, "Solved rate and cost per solved task"), fontsize=9)
    return fig


def crossover_plot(result: Crossover, path: str | Path) -> Path:
    """:func:`crossover_figure` saved as a PNG."""
    return _save(crossover_figure(result), path)
