"""The run budget shared by agents running in parallel (issue 41, item 1): a call is admitted only while
the budget still covers every call in flight at its worst case, so parallel sessions -- workflow's
analyzers, skeptics, workers -- never take a run more than one call past ``max_usd`` (the bound the
experiment-wide spend cap reserves)."""

from __future__ import annotations

import threading
import time

import pytest

from kit.agent.budget import Budget
from kit.errors import BudgetExceeded, Interrupted
from kit.model import scripted
from kit.model.actions import FINISH, render
from kit.strategies.workflow.runtime import Runtime
from kit.usage import Usage
from tests.support.workflow import make_ctx


class Ledger:
    """Stands for the run's recorder: the totals the budget reads (thread-safe adds)."""

    def __init__(self, cost_usd: float = 0.0) -> None:
        self.totals = Usage(cost_usd=cost_usd)
        self._lock = threading.Lock()

    def spend(self, usd: float) -> None:
        with self._lock:
            self.totals = self.totals + Usage(cost_usd=usd)


def _agents(budget: Budget, ledger: Ledger, n: int, cost: float, hold_s: float = 0.2) -> list[str]:
    """``n`` agents at once, each making calls of ``cost`` (``hold_s`` in flight) until the budget
    stops it; what each ended with."""
    ends: list[str] = []

    def agent() -> None:
        while True:
            try:
                budget.start_call()
            except BudgetExceeded:
                ends.append("budget")
                return
            try:
                time.sleep(hold_s)
                ledger.spend(cost)
            finally:
                budget.end_call()

    threads = [threading.Thread(target=agent) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    return ends


def test_parallel_calls_each_passing_the_check_never_take_the_run_past_one_call_over():
    ledger = Ledger(cost_usd=0.9)  # just under the budget: every agent would pass a plain check
    budget = Budget(ledger, max_usd=1.0, call_usd=0.3)  # type: ignore[arg-type]
    ends = _agents(budget, ledger, n=6, cost=0.25)
    assert ends == ["budget"] * 6
    assert ledger.totals.cost_usd <= 1.0 + 0.3  # max_usd + one call: what spend_bound reserves
    assert budget.model_calls == 1 and budget.in_flight == 0  # the others waited, then found it spent


def test_calls_still_run_in_parallel_while_the_budget_covers_them():
    ledger = Ledger()
    budget = Budget(ledger, max_usd=1.0, call_usd=0.3)  # type: ignore[arg-type]
    seen: list[int] = []
    barrier = threading.Barrier(3, timeout=5)  # three calls in flight at once, at $0 spent

    def agent() -> None:
        budget.start_call()
        seen.append(budget.in_flight)
        barrier.wait()
        budget.end_call()

    threads = [threading.Thread(target=agent) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert sorted(seen)[-1] == 3 and budget.in_flight == 0


def test_a_waiting_call_stops_at_ctrl_c():
    ledger, stop = Ledger(cost_usd=0.9), threading.Event()
    budget = Budget(ledger, max_usd=1.0, call_usd=0.3, stop=stop)  # type: ignore[arg-type]
    budget.start_call()  # one call in flight holds the room
    caught: list[BaseException] = []

    def waiter() -> None:
        try:
            budget.start_call()
        except BaseException as e:  # noqa: BLE001 - what it raised is the test
            caught.append(e)

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.3)
    assert t.is_alive()  # waiting for the call in flight
    stop.set()
    t.join(timeout=5)
    assert len(caught) == 1 and isinstance(caught[0], Interrupted)


def test_workflow_parallel_analyzers_never_push_the_spend_past_the_run_bound(tmp_path):
    """The attack: the run budget is all but spent when three analyzers start at once; each would pass
    the check with its call in flight. Each call costs the same (same prompt), so twice one call's
    cost is a true worst case; the run must end within max_usd + that."""

    def slow_finish(request):
        time.sleep(0.3)  # the three calls overlap
        mode = request.context.get("action_mode") or "native"
        return render(mode, FINISH, {"summary": "clean"}, "Done.")

    ctx = make_ctx(tmp_path, scripted.register(slow_finish, name="budget-analyzers"))
    rt = Runtime(ctx, concurrency=3, journal_path=None)
    assert rt.agent("review it", role="analyzer", tier="cheap") == "clean"
    one_call = ctx.recorder.totals.cost_usd
    assert one_call > 0
    ctx.budget = Budget(ctx.recorder, max_usd=one_call * 1.0001, call_usd=2 * one_call)
    with pytest.raises(BudgetExceeded):
        rt.parallel([lambda: rt.agent("review it", role="analyzer", tier="cheap")] * 3)
    assert ctx.recorder.totals.cost_usd <= ctx.budget.max_usd + ctx.budget.call_usd
