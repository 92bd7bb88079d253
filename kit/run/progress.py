"""How far an experiment has got, as the executors report it.

* :class:`ExperimentState` -- for whoever started :func:`kit.run.runner.run_experiment`: runs to do,
  runs done, cost so far, and runs still executing in this process. The CLI asks it after Ctrl-C
  whether anything is left to abandon.
* :func:`progress_bar` -- the bar on the terminal (and in a notebook: tqdm's widget). Both executors
  (:mod:`kit.run.threads`, :mod:`kit.run.ray_executor`) show the same one: every run of the plan,
  those already done counted in; the dollars so far (kept runs from earlier invocations, runs recorded,
  and what the runs in flight have spent); per run in flight its calls, tokens, dollars, current role
  and phase, updated as its calls finish (its recorder reports them: :class:`~kit.records.recorder.Progress`),
  and while a call is out "waiting on the model for N s", ticking (the bar redraws, its clock too);
  and the last run's outcome.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from typing import Any, TypeVar

from tqdm.auto import tqdm

from kit.records.recorder import Progress
from kit.records.schema import RunRecord
from kit.run.plan import RunSpec
from kit.run.spend import SpendCap
from kit.untrusted.terminal import visible

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
        self.live: dict[str, Progress] = {}  # run id -> what a run in flight has done so far
        self.last = ""  # the last run recorded, and its outcome
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
            self.live.pop(record.run_id, None)
            self.last = f"{_label(record.run_id)} {record.outcome}"
        self.cap.ended(record.run_id, record.totals.cost_usd)

    def update(self, progress: Progress) -> None:
        """A running run made a call or entered a phase (any thread: a run's recorder calls it)."""
        with self._lock:
            self.live[progress.run_id] = progress

    def running(self) -> list[Progress]:
        """The runs in flight that have made a call or announced a phase, oldest first."""
        with self._lock:
            return list(self.live.values())

    def total_usd(self) -> float:
        """Dollars so far: the runs kept from earlier invocations, the runs recorded by this one, and
        what the runs in flight have spent."""
        with self._lock:
            return self.spent_before + self.spent_usd + sum(p.cost_usd for p in self.live.values())

    def line(self, show: int = 2, now: float | None = None) -> str:
        """The bar's text: the dollars, then per running run its calls, tokens, dollars, role and phase,
        and how long it has been waiting on the model (ticking each second while a call is out; ``now``:
        the wall clock) (``show`` of them, "+N more" for the rest), then the last run recorded."""
        running = self.running()
        kept = f" (incl. ${self.spent_before:.4f} kept)" if self.spent_before else ""
        parts = [f"${self.total_usd():.4f}{kept}"]
        now = time.time() if now is None else now
        for p in running[:show]:
            where = "/".join(x for x in (p.role, p.phase) if x) or "starting"
            wait = (
                f", waiting on the model for {max(0, int(now - p.waiting_since))} s"
                if p.waiting_since
                else ""
            )
            parts.append(
                f"{_label(p.run_id)}: {p.calls} calls {_tokens(p.tokens)} tok ${p.cost_usd:.4f} {where}{wait}"
            )
        if len(running) > show:
            parts.append(f"+{len(running) - show} more running")
        if self.last:
            parts.append(f"last: {self.last}")
        return " | ".join(parts)


def _label(run_id: str) -> str:
    """``micro-slugify__vibe__local__r1`` -> ``vibe/micro-slugify r1``."""
    parts = run_id.split("__")
    if len(parts) >= 3:
        return f"{parts[1]}/{parts[0]} {parts[-1]}"
    return run_id


def _tokens(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def progress_bar(
    specs: list[RunSpec], todo: list[RunSpec], name: str, progress: bool, state: ExperimentState | None = None
) -> Any:
    """The experiment's tqdm bar: every run of the plan, those already done counted in; its text is
    :meth:`ExperimentState.line` (refresh it with :func:`refresh`)."""
    bar = tqdm(
        total=len(specs),
        initial=len(specs) - len(todo),
        desc=name,
        unit="run",
        disable=not progress,
        dynamic_ncols=True,
    )
    bar.set_postfix_str(visible(state.line()) if state is not None else "$0.0000")
    return bar


def refresh(bar: Any, state: ExperimentState) -> None:
    """Redraw the bar's text when it changed (the executors call it as they wait)."""
    text = visible(state.line())  # (one line: a run's text escaped, kit.untrusted.terminal)
    if text != getattr(bar, "_kit_text", None):
        bar._kit_text = text
        bar.set_postfix_str(text)
