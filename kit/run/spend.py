"""What an experiment can spend: the most one run can spend (:func:`spend_bound`, from the price sheet
and the run budget), what the experiment folder's finished runs already spent (:func:`spent_so_far`),
and the experiment-wide cap (:class:`SpendCap`, ``limits.max_total_usd`` / ``--max-total-usd``): a run
starts only if the experiment's spend, plus the most every run in flight can still spend, plus the most
this one can spend stays within the cap. A run that ends gives its reservation back (what it really
spent counts instead), so a run that does not fit yet waits for the runs in flight; a run is refused
only when none is in flight and it still does not fit. Runs it does not start stay to do: a later
``kit run`` with a higher cap runs them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
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


def call_bounds(profile: Profile, sheet: PriceSheet, tiers: Iterable[str]) -> tuple[float, int]:
    """The most one call on any of ``tiers`` can cost (USD) and use (tokens): what the run budget counts
    a call in flight as (:class:`kit.agent.budget.Budget`)."""
    used = set(tiers)
    usd = max(_call_cost(profile, sheet, t) for t in used)
    tokens = max(profile.tiers[t].context_window + profile.tiers[t].max_output_tokens for t in used)
    return usd, tokens


def spend_bound(experiment: Experiment, profile: Profile, sheet: PriceSheet) -> tuple[float | None, str]:
    """The most one run can spend (USD), and how that bound was found; None without any budget.

    Over the tiers the experiment's strategies use: a call costs at most a full context window at the
    dearest input rate plus the output cap (``call``). The budget is checked before each call, so a
    run ends at most one call past it: ``max_usd + call``; ``max_tokens`` at the dearest rate per
    token ``+ call``; ``max_model_calls x call``. The smallest of the bounds that apply. Agents
    running in parallel (workflow) hold to it too: the run budget admits a call only while it covers
    every call in flight at this worst case (:class:`kit.agent.budget.Budget`)."""
    used = {
        t
        for s in experiment.strategies
        for t in strategies.role_tiers(s, experiment.tiers.get(s), profile).values()
    }
    call = call_bounds(profile, sheet, used)[0]
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

    :meth:`start` reserves the most a run can spend (``per_run``) once the spend so far, the reservations
    of the runs in flight and this one stay within ``cap``, waiting for runs in flight to end while
    they do not; :meth:`ended` swaps a run's reservation for what it really spent. A run is refused
    only when no run is in flight and it still does not fit. Without a cap every run starts."""

    def __init__(self, cap: float | None, per_run: float | None, spent: float) -> None:
        if cap is not None and per_run is None:
            raise ConfigError(
                f"limits.max_total_usd ${cap:g} needs a bound on what one run can spend",
                "set limits.max_usd (or max_tokens / max_model_calls) too",
            )
        self.cap, self.per_run, self.spent = cap, per_run or 0.0, spent
        self.reserved: dict[str, float] = {}
        self.refused: list[str] = []
        self._settled: set[str] = set()  # runs whose real spend is counted
        self._cond = threading.Condition()

    def try_start(self, run_id: str) -> bool | None:
        """Start run ``run_id`` now if the cap covers it (True, its bound reserved); None when it does
        not yet but runs in flight may give room back; False when it never will (refused)."""
        with self._cond:
            return self._try(run_id)

    def _try(self, run_id: str) -> bool | None:
        if self.cap is None or self.spent + sum(self.reserved.values()) + self.per_run <= self.cap + 1e-12:
            self.reserved[run_id] = self.per_run
            return True
        if self.reserved:
            return None
        self.refused.append(run_id)
        return False

    def start(self, run_id: str, stop: threading.Event | None = None) -> bool:
        """Whether run ``run_id`` may start (reserving its bound if so), waiting while runs in flight
        hold the room it needs; False when refused, or when ``stop`` is set while it waits."""
        with self._cond:
            while (ok := self._try(run_id)) is None:
                if stop is not None and stop.is_set():
                    return False
                self._cond.wait(timeout=0.2)
            return ok

    def ended(self, run_id: str, cost_usd: float) -> None:
        """Run ``run_id`` has ended, having spent ``cost_usd``: its reservation goes, its cost stays.
        Counted once (the thread executor tells it when the strategy ends, and again when recorded)."""
        with self._cond:
            if run_id in self._settled:
                return
            self._settled.add(run_id)
            self.reserved.pop(run_id, None)
            self.spent += cost_usd
            self._cond.notify_all()

    def message(self) -> str:
        """Why runs were not started ('' when none was refused)."""
        if not self.refused:
            return ""
        return (
            f"{len(self.refused)} run(s) not started: the experiment's spend cap (limits.max_total_usd "
            f"${self.cap:g}) would be passed -- spent ${self.spent:.4f} with no run in flight, and a run "
            f"may spend up to ${self.per_run:.4f}; raise the cap (--max-total-usd) and run the same "
            "command to do them"
        )
