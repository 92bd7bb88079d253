"""The what-if figure of notebook 02 and the HTML report: per strategy, the cost before and after a
what-if (:mod:`kit.analysis.whatif`), per tier and per role, so two what-ifs give two different
pictures and a what-if that changes nothing says why on the figure itself."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from kit.analysis.caveat import caveat
from kit.analysis.figures import _empty, _new, _save
from kit.analysis.repricing import WhatIf
from kit.analysis.tables import order_tiers

#: (column of WhatIf.view, legend label, colour, hatch) per bar of a group.
BARS = (
    ("cost_before", "before (as recorded)", "0.65", ""),
    ("cost_after_as_recorded", "after, recorded tokens at the new prices", "tab:blue", "//"),
    ("cost_after", "after, cache re-simulated", "tab:blue", ""),
)


def whatif_figure(w: WhatIf, title: str = "What-if") -> Figure:
    """One column per strategy, two rows: cost per tier and cost per role, each group's bars before and
    after (the as-recorded bar only when the cache was re-simulated). The note of the what-if is the
    title; when the cost did not move, why not (``WhatIf.why_unchanged``) is written under it."""
    c = w.calls
    strategies = sorted(set(c["strategy"]))
    bars = [b for b in BARS if w.cache_resimulated or b[0] != "cost_after_as_recorded"]
    fig = _new(3.3 * len(strategies) + 2.6, 7.0)
    axes = fig.subplots(2, len(strategies), squeeze=False)
    for j, strategy in enumerate(strategies):
        for i, by in enumerate(("tier", "role")):
            ax = axes[i, j]
            table = w.view(["strategy", by]).loc[strategy]
            order = order_tiers(table.index) if by == "tier" else sorted(table.index)
            table = table.reindex(order)
            x = np.arange(len(order))
            width = 0.8 / len(bars)
            for k, (col, label, colour, hatch) in enumerate(bars):
                offset = (k - (len(bars) - 1) / 2) * width
                ax.bar(
                    x + offset, table[col], width, label=label, color=colour, hatch=hatch, edgecolor="white"
                )
            ax.set_xticks(
                x, order, rotation=30 if by == "role" else 0, ha="right" if by == "role" else "center"
            )
            ax.set_title(f"{strategy}: per {by}", fontsize="small")
        axes[0, j].set_ylabel("USD" if j == 0 else "")
        axes[1, j].set_ylabel("USD" if j == 0 else "")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=len(bars), fontsize="small")
    head = textwrap.fill(f"{title}: {w.note.split(' -- no change')[0]}", 110)
    if what := caveat(c):
        head = f"{what}\n{head}"
    if w.why_unchanged:
        head += "\n" + textwrap.fill(f"NO CHANGE in cost: {w.why_unchanged}", 110)
    fig.suptitle(head, fontsize="small")
    return fig


def whatif_bars(w: WhatIf, path: str | Path, title: str = "What-if") -> Path:
    """Save :func:`whatif_figure` (a figure saying so when there are no calls)."""
    if w.calls.empty:
        return _empty(path, title, w.note)
    return _save(whatif_figure(w, title), path)
