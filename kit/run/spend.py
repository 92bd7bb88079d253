"""What an experiment can spend: the most one run can spend (:func:`spend_bound`, from the price sheet
and the run budget), what the experiment folder's finished runs already spent (:func:`spent_so_far`),
and the experiment-wide cap (:class:`SpendCap`, ``limits.max_total_usd`` / ``--max-total-usd``): a run
starts only if the experiment's spend, plus the most every run in flight can still spend, plus the most
this one can spend stays within the cap. Runs it does not start stay to do: a later ``kit run`` with a
higher cap runs them.
"""

from __future__ import annotations

import threading
from pathlib import Path

from kit import strategies
from kit.config import Experiment, PriceSheet, Profile
from kit.errors import ConfigError
from kit.records.schema import load_run
from kit.usage import PER_MILLION


def _call_cost(profile: Profile, sheet: PriceSheet, tier: str) -> float:
    """The most one call on ``tier`` can cost: a full context window at the dearer of the input and
    cache-write prices, plus the whole output cap."""
    spec = profile.tiers[tier]
    p = sheet.get(spec.price_key)
    return (
        spec.context_window * max(p.input, p.cache_write) + spec.max_output_tokens * p.output
    ) / PER_MILLION


def spend_bound(experiment: Experiment, profile: Profile, sheet: PriceSheet) -> tuple[float | None, str]:
    """The most one run can spend (USD), and how that bound was found; None without any budget.

    Over the tiers the experiment's strategies use: a call costs at most a full context window at the
    dearest input rate plus the output cap (``call``). The budget is checked before each call, so a
    run ends at most one call past it: ``max_usd + call``; ``max_tokens`` at the dearest rate per
    token ``+ call``; ``max_model_calls x call``. The smallest of the bounds that apply. Agents
    running in parallel (workflow) may each have one call in flight when the budget runs out."""
    used = {
        t
        for s in experiment.strategies
        for t in strategies.role_tiers(s, experiment.tiers.get(s), profile).values()
    }
    call = max(_call_cost(profile, sheet, t) for t in used)
    rate = max(
        max(p.input, p.output, p.cache_read, p.cache_write) / PER_MILLION
        for p in (sheet.get(profile.tiers[t].price_key) for t in used)
    )
    lim, bounds = experiment.limits, []
    if lim.max_usd is not None:
        bounds.append((lim.max_usd + call, f"max_usd ${lim.max_usd:g} + one call past it (${call:.4g})"))
    if lim.max_tokens is not None:
        bounds.append(
            (
                lim.max_tokens * rate + call,
                f"max_tokens {lim.max_tokens} at ${rate * PER_MILLION:g}/1M + one call",
            )
        )
    if lim.max_model_calls is not None:
        bounds.append(
            (
                lim.max_model_calls * call,
                f"max_model_calls {lim.max_model_calls} x ${call:.4g} per call at most",
            )
        )
    if not bounds:
        return None, "no bound: the experiment sets no max_usd, max_tokens or max_model_calls"
    return min(bounds)


def spent_so_far(out: Path, redone: set[str]) -> float:
    """USD the experiment folder's finished runs spent (their run.json totals), but those about to be
    run again (``redone``: their records will be replaced)."""
    runs = Path(out) / "runs"
    total = 0.0
    for run_dir in sorted(runs.iterdir()) if runs.is_dir() else []:
        if run_dir.name in redone:
            continue
        record = load_run(run_dir)
        if record is not None:
            total += record.totals.cost_usd
    return total


class SpendCap:
    """The experiment-wide cap as runs start and end; thread-safe.

    :meth:`start` reserves the most a run can spend (``per_run``) if the spend so far, the reservations
    of the runs in flight and this one stay within ``cap``; :meth:`ended` swaps a run's reservation for
    what it really spent. Without a cap every run starts."""

    def __init__(self, cap: float | None, per_run: float | None, spent: float) -> None:
        if cap is not None and per_run is None:
            raise ConfigError(
                f"limits.max_total_usd ${cap:g} needs a bound on what one run can spend",
                "set limits.max_usd (or max_tokens / max_model_calls) too",
            )
        self.cap, self.per_run, self.spent = cap, per_run or 0.0, spent
        self.reserved: dict[str, float] = {}
        self.refused: list[str] = []
        self._lock = threading.Lock()

    def start(self, run_id: str) -> bool:
        """Whether run ``run_id`` may start now (reserving its bound if so)."""
        with self._lock:
            if (
                self.cap is not None
                and self.spent + sum(self.reserved.values()) + self.per_run > self.cap + 1e-12
            ):
                self.refused.append(run_id)
                return False
            self.reserved[run_id] = self.per_run
            return True

    def ended(self, run_id: str, cost_usd: float) -> None:
        """Run ``run_id`` is recorded, having spent ``cost_usd``."""
        with self._lock:
            self.reserved.pop(run_id, None)
            self.spent += cost_usd

    def message(self) -> str:
        """Why runs were not started ('' when none was refused)."""
        if not self.refused:
            return ""
        return (
            f"{len(self.refused)} run(s) not started: the experiment's spend cap (limits.max_total_usd "
            f"${self.cap:g}) would be passed -- spent ${self.spent:.4f}, and a run may spend up to "
            f"${self.per_run:.4f}; raise the cap (--max-total-usd) and run the same command to do them"
        )
