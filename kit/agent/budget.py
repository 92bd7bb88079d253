"""The run budget: the experiment's ``limits`` (model calls, USD, tokens), shared by every agent of a
run, all roles together, and the Ctrl-C stop.

:class:`CallBudget` is what an agent needs of a budget (check before a step, count a call as it starts
and as it ends); the run's :class:`Budget` implements it, and so does the workflow runtime, which adds
its own output-token budget in front of the run's.

Agents running in parallel (workflow's analyzers, skeptics, workers) share one budget: a call is
admitted only while the budget can still cover every call in flight at its worst case
(:attr:`Budget.call_usd`, :attr:`Budget.call_tokens`); a call that cannot be covered yet waits for the
calls in flight to end. So a run ends at most one call past its budget however many agents it runs at
once -- the bound the experiment-wide spend cap reserves (:func:`kit.run.spend.spend_bound`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from kit.errors import BudgetExceeded, Interrupted
from kit.records.recorder import RunRecorder


class CallBudget(Protocol):
    """What an agent asks of a budget before each step and each model call."""

    def check(self) -> None:
        """Raise BudgetExceeded or Interrupted when no step may start; count nothing."""

    def start_call(self) -> None:
        """Check, then count one model call (in flight until :meth:`end_call`)."""

    def end_call(self) -> None:
        """The call :meth:`start_call` admitted has ended (answered or failed)."""


@dataclass
class Budget:
    """The run budget (the experiment's ``limits``), shared by every agent of a run, all roles together.

    :meth:`start_call` is called before each model call: it raises BudgetExceeded when the USD or
    token totals (the recorder's) or the number of model calls are used up, and otherwise counts the
    call -- atomically, so parallel agents never overshoot ``max_model_calls``. With ``call_usd`` /
    ``call_tokens`` (the most one call can cost / use), the calls in flight count at that worst case:
    a call that the budget could not cover on top of them waits until they end (:meth:`end_call`),
    then is checked again -- so parallel agents never take a run more than one call past ``max_usd``
    or ``max_tokens``. ``stop`` is the runner's cooperative stop (Ctrl-C): once set, the next check
    (or a waiting call) raises :class:`Interrupted`."""

    recorder: RunRecorder | None = None
    max_usd: float | None = None
    max_tokens: int | None = None
    max_model_calls: int | None = None
    model_calls: int = 0  # calls started (or replayed from a journal) in this run
    call_usd: float | None = None  # the most one call can cost (None: calls in flight count as $0)
    call_tokens: int | None = None  # the most tokens one call can use
    in_flight: int = 0  # calls started and not yet ended
    stop: threading.Event | None = None
    interrupted: bool = False  # a check raised Interrupted (even if a strategy swallowed it)
    #: the clone's disk quota (:meth:`kit.sandbox.quota.Quota.over`): why it is full, or None
    disk: Callable[[], str | None] | None = None
    disk_full: str | None = None  # a check found the quota reached (even if a strategy swallowed it)
    _lock: threading.Condition = field(default_factory=threading.Condition, repr=False, compare=False)

    def check(self) -> None:
        """Raise Interrupted after Ctrl-C, BudgetExceeded if any part of the budget -- the clone's
        disk quota included -- is used up (counts nothing)."""
        if self.stop is not None and self.stop.is_set():
            self.interrupted = True
            raise Interrupted("the experiment was interrupted (Ctrl-C): this run stops here")
        if self.disk is not None and (full := self.disk()):
            self.disk_full = full
            raise BudgetExceeded(full, "raise limits.disk_quota_mb / disk_quota_files in the experiment")
        if self.max_model_calls is not None and self.model_calls >= self.max_model_calls:
            raise BudgetExceeded(
                f"run budget of {self.max_model_calls} model calls used up",
                "raise limits.max_model_calls in the experiment",
            )
        if self.recorder is None:
            return
        t = self.recorder.totals
        if self.max_usd is not None and t.cost_usd >= self.max_usd:
            raise BudgetExceeded(f"run budget of ${self.max_usd:.4f} used up (${t.cost_usd:.4f})")
        if self.max_tokens is not None and t.total_tokens >= self.max_tokens:
            raise BudgetExceeded(f"run budget of {self.max_tokens} tokens used up ({t.total_tokens})")

    def start_call(self) -> None:
        """Check, then count one model call, in flight until :meth:`end_call`. While the calls in
        flight, at their worst case, leave no room for this one, wait for them to end."""
        with self._lock:
            self.check()
            while self.in_flight and not self._covers():
                self._lock.wait(timeout=0.2)
                self.check()
            self.model_calls += 1
            self.in_flight += 1

    def end_call(self) -> None:
        """A call admitted by :meth:`start_call` has ended: its cost is in the recorder's totals."""
        with self._lock:
            self.in_flight = max(0, self.in_flight - 1)
            self._lock.notify_all()

    def _covers(self) -> bool:
        """Whether the budget is still unspent with every call in flight at its worst case."""
        if self.recorder is None:
            return True
        t, n = self.recorder.totals, self.in_flight
        usd = self.max_usd is None or self.call_usd is None or t.cost_usd + n * self.call_usd < self.max_usd
        tokens = (
            self.max_tokens is None
            or self.call_tokens is None
            or t.total_tokens + n * self.call_tokens < self.max_tokens
        )
        return usd and tokens

    def add_calls(self, n: int) -> None:
        """Count ``n`` calls made elsewhere (replayed from a workflow journal: they were spent)."""
        with self._lock:
            self.model_calls += n

    def remaining_calls(self) -> int | None:
        """Model calls left, or None without a call budget."""
        if self.max_model_calls is None:
            return None
        return max(0, self.max_model_calls - self.model_calls)

    def as_dict(self) -> dict[str, float | int | None]:
        """The caps, as run.json records them."""
        return {
            "max_model_calls": self.max_model_calls,
            "max_usd": self.max_usd,
            "max_tokens": self.max_tokens,
        }
