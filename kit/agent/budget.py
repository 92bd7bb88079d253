"""The run budget: the experiment's ``limits`` (model calls, USD, tokens), shared by every agent of a
run, all roles together, and the Ctrl-C stop.

:class:`CallBudget` is what an agent needs of a budget (check before a step, count a call); the run's
:class:`Budget` implements it, and so does the workflow runtime, which adds its own output-token budget
in front of the run's.
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
        """Check, then count one model call."""


@dataclass
class Budget:
    """The run budget (the experiment's ``limits``), shared by every agent of a run, all roles together.

    :meth:`start_call` is called before each model call: it raises BudgetExceeded when the USD or
    token totals (the recorder's) or the number of model calls are used up, and otherwise counts the
    call -- atomically, so parallel agents never overshoot ``max_model_calls``. ``stop`` is the
    runner's cooperative stop (Ctrl-C): once set, the next check raises :class:`Interrupted`."""

    recorder: RunRecorder | None = None
    max_usd: float | None = None
    max_tokens: int | None = None
    max_model_calls: int | None = None
    model_calls: int = 0  # calls started (or replayed from a journal) in this run
    stop: threading.Event | None = None
    interrupted: bool = False  # a check raised Interrupted (even if a strategy swallowed it)
    #: the clone's disk quota (:meth:`kit.sandbox.quota.Quota.over`): why it is full, or None
    disk: Callable[[], str | None] | None = None
    disk_full: str | None = None  # a check found the quota reached (even if a strategy swallowed it)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

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
        """Check, then count one model call."""
        with self._lock:
            self.check()
            self.model_calls += 1

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
