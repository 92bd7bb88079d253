"""How far an experiment has got, as the executors report it.

* :class:`ExperimentState` -- for whoever started :func:`kit.run.runner.run_experiment`: runs to do,
  runs done, cost so far, and runs still executing in this process. The CLI asks it after Ctrl-C
  whether anything is left to abandon.
* :func:`progress_bar` -- the bar on the terminal. Both executors (:mod:`kit.run.threads`,
  :mod:`kit.run.ray_executor`) show the same one: every run of the plan, those already done counted
  in, the cost so far and the last run's outcome.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any, TypeVar

from tqdm.auto import tqdm

from kit.records.schema import RunRecord
from kit.run.plan import RunSpec
from kit.run.spend import SpendCap

F = TypeVar("F", bound=Future)


class ExperimentState:
    """One :func:`~kit.run.runner.run_experiment` call as it goes; the runner updates it, any thread
    may read it.

    ``todo``: the runs this call has to do (finished ones are skipped). ``done`` and ``spent_usd``: the
    runs recorded so far and their cost; ``spent_before``: what the folder's kept runs had spent;
    ``cap``: the experiment-wide spend cap, which runs ask before they start. :attr:`in_flight`: runs whose strategy or scoring phase is
    still executing in this process -- submitted to the thread executor and neither ended nor
    cancelled (Ray tasks run in Ray's workers: not counted).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._in_flight = 0
        self.todo = 0
        self.done = 0
        self.spent_usd = 0.0
        self.spent_before = 0.0  # what the folder's finished runs had spent when this call began
        self.cap = SpendCap(None, None, 0.0)  # the experiment-wide cap (limits.max_total_usd)

    @property
    def in_flight(self) -> int:
        with self._lock:
            return self._in_flight

    def track(self, future: F) -> F:
        """Count ``future`` (one run's phase in a worker thread) in flight until it ends or is cancelled."""
        with self._lock:
            self._in_flight += 1
        future.add_done_callback(self._ended)
        return future

    def _ended(self, _future: Future) -> None:
        with self._lock:
            self._in_flight -= 1

    def recorded(self, record: RunRecord) -> None:
        """A run's run.json is written."""
        with self._lock:
            self.done += 1
            self.spent_usd += record.totals.cost_usd
        self.cap.ended(record.run_id, record.totals.cost_usd)


def progress_bar(specs: list[RunSpec], todo: list[RunSpec], name: str, progress: bool) -> Any:
    """The experiment's tqdm bar: every run of the plan, those already done counted in."""
    bar = tqdm(
        total=len(specs),
        initial=len(specs) - len(todo),
        desc=name,
        unit="run",
        disable=not progress,
        dynamic_ncols=True,
    )
    bar.set_postfix_str("$0.0000")
    return bar
