"""Shared helpers for the workflow tests: an in-memory scripted profile, a RunContext on a fresh clone
of micro-slugify, and a scripted policy that plays every workflow role.

The policy is stateless per conversation (the step is read from the conversation) and reads the
review round and seat from the analyzer prompt ("Review round 3, reviewer 2 of 3") and the round,
finding and seat from the skeptic's ("Review round 3, finding 2, skeptic 1 of 3"), so it is safe
under the runtime's thread pool; it counts the requests it answers per role (thread-safe).
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kit.config import Limits, ModelSpec, PriceSheet, Profile
from kit.model import scripted
from kit.model.actions import FINISH, render
from kit.model.policies import solution_files
from kit.strategies.context import RunContext
from kit.tasks.task import Task
from kit.usage import ModelPrice
from tests.support.context import run_context

ROUND = re.compile(r"Review round (\d+), (?:finding (\d+), skeptic|reviewer) (\d+) of (\d+)")
SHEET = PriceSheet(name="wf", prices={"p": ModelPrice(input=1, output=2, cache_read=0.1, cache_write=1.25)})


class Interrupt(BaseException):
    """Stands for the process being killed: not an Exception, so nothing swallows it."""


def profile(model: str, action_mode: str | None = None) -> Profile:
    return Profile(
        name="wf-scripted",
        price_sheet=SHEET.name,
        tiers={
            t: ModelSpec(model=model, price="p", action_mode=action_mode)
            for t in ("cheap", "medium", "strong")
        },
    )


def make_ctx(
    tmp_path: Path,
    model: str,
    *,
    options: dict[str, Any] | None = None,
    task: Task | None = None,
    journal_dir: Path | None = None,
    run_id: str = "r1",
    action_mode: str | None = None,
    name: str = "run",
) -> RunContext:
    """A RunContext on a fresh clone (``tmp_path/<name>``); the gateway never sleeps between retries."""
    return run_context(
        tmp_path / name,
        "workflow",
        profile(model, action_mode),
        SHEET,
        task=task or "micro-slugify",
        run_id=run_id,
        records="records",
        gateway_context={"task_path": ..., "test_command": ..., "run_id": run_id},
        limits=Limits(max_steps=8),
        options=options,
        budget={},
        journal_dir=journal_dir,
        max_retries=0,
        sleep=lambda s: None,
    )


def _mode(request: scripted.Request) -> str:
    return request.context.get("action_mode") or "native"


def _steps(request: scripted.Request) -> int:
    return sum(m.get("role") == "assistant" for m in request.messages)


def _first_user(request: scripted.Request) -> str:
    return next((str(m.get("content") or "") for m in request.messages if m.get("role") == "user"), "")


@dataclass
class WorkflowPolicy:
    """Plays implementer, analyzer, refuter and editor.

    verdicts: the analyzers' verdict per review round ("clean" / "issues"); the last one repeats.
    issues:   how many distinct issues an "issues" report lists (the same ones from every analyzer).
    failing:  analyzer seat -> "garbage" (answers that are no action), "raise" (provider error) or
              "contradict" (first answer: verdict "issues" with an empty list; then a proper one).
    confirm:  whether skeptics confirm the findings (when ``votes`` has no entry).
    votes:    finding id -> each skeptic seat's vote, in seat order.
    interrupt_round: raise :class:`Interrupt` when an analyzer of that round is asked.
    """

    verdicts: list[str]
    issues: int = 1
    failing: dict[int, str] = field(default_factory=dict)
    confirm: bool = True
    votes: dict[int, list[bool]] = field(default_factory=dict)
    interrupt_round: int | None = None
    counts: Counter = field(default_factory=Counter)
    rounds: Counter = field(default_factory=Counter)  # (role, round) -> requests
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, request: scripted.Request) -> Any:
        role = request.context.get("role", "")
        match = ROUND.search(_first_user(request))
        rnd = int(match.group(1)) if match else 0
        with self._lock:
            self.counts[role] += 1
            self.rounds[(role, rnd)] += 1
        handler: Callable[[scripted.Request, int], Any] = getattr(self, f"_{role}")
        return handler(request, rnd)

    def _implementer(self, request: scripted.Request, rnd: int) -> Any:
        files = solution_files(request.context.get("task_path"))
        step = _steps(request)
        if step < len(files):
            path, content = files[step]
            return render(_mode(request), "write_file", {"path": path, "content": content}, f"Write {path}.")
        return render(_mode(request), FINISH, {"summary": "Implemented."}, "Done.")

    def _analyzer(self, request: scripted.Request, rnd: int) -> Any:
        if self.interrupt_round is not None and rnd >= self.interrupt_round:
            raise Interrupt(f"killed in round {rnd}")
        seat = int(ROUND.search(_first_user(request)).group(3))
        failure = self.failing.get(seat)
        if failure == "raise":
            raise ValueError(f"analyzer {seat} is down")
        if failure == "garbage":
            return {"content": "I am not sure what to say."}
        if failure == "contradict" and _steps(request) == 0:  # corrected once told it is a format error
            return render(_mode(request), FINISH, {"verdict": "issues", "issues": []}, "Reviewed.")
        verdict = self.verdicts[min(rnd, len(self.verdicts)) - 1]
        issues = []
        if verdict == "issues":
            issues = [
                {
                    "file": "./textkit.py",
                    "problem": f"Round {rnd} bug{'' if n == 1 else f' {n}'}: slugify mishandles input",
                    "suggested_fix": f"fix round {rnd}",
                    "severity": "MAJOR" if seat % 2 else "major",
                }
                for n in range(1, self.issues + 1)
            ]
        return render(_mode(request), FINISH, {"verdict": verdict, "issues": issues}, "Reviewed.")

    def _refuter(self, request: scripted.Request, rnd: int) -> Any:
        match = ROUND.search(_first_user(request))
        finding, seat = int(match.group(2)), int(match.group(3))
        confirmed = self.votes[finding][seat - 1] if finding in self.votes else self.confirm
        return render(_mode(request), FINISH, {"confirmed": confirmed, "reason": "checked"}, "Checked.")

    def _editor(self, request: scripted.Request, rnd: int) -> Any:
        found = re.search(r"Round (\d+) bug", _first_user(request))
        name = f"edits/round-{found.group(1) if found else 0}.txt"
        if _steps(request) == 0:
            return render(_mode(request), "write_file", {"path": name, "content": "fixed\n"}, "Fix.")
        return render(_mode(request), FINISH, {"summary": "Fixed."}, "Done.")
