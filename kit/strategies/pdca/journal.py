"""The loop's bookkeeping: phase and gate events in events.jsonl, and every event's progress line (with
any pending state snapshot) in the status file. See docs/strategies.md, ``## pdca``."""

from __future__ import annotations

import re

from kit.records.schema import utc_now
from kit.strategies.context import RunContext
from kit.strategies.pdca.status import (
    State,
    StatusFile,
    log_line,
    render_final,
    render_header,
    render_snapshot,
)
from kit.strategies.pdca.tally import Tally
from kit.strategies.pdca.writer import StatusWriter
from kit.tasks.workspace import diff


class Journal:
    def __init__(self, ctx: RunContext, st: State, status: StatusFile, writer: str, tally: Tally) -> None:
        self.ctx, self.st, self.tally = ctx, st, tally
        self.writer = StatusWriter(ctx, status, writer)
        self.pending = render_header(st, utc_now())  # status text waiting for the next progress line

    def enter(self, phase: str, detail: str = "") -> None:
        self.st.phase = self.tally.phase = phase
        self.ctx.phase(phase, f"r{self.st.r} n{self.st.n}")
        self.snapshot(f"enter {phase}")
        self.log("enter", detail)

    def gate(self, name: str, ok: bool, detail: str) -> None:
        if not ok:
            self.tally.gate_rejections[name] += 1
        self.ctx.recorder.event("gate", "orchestrator", name, detail[:300], ok=ok)
        self.log(f"gate {name} {'passed' if ok else 'rejected'}", detail)

    def snapshot(self, reason: str) -> None:
        self.pending += render_snapshot(self.st, utc_now(), reason)

    def log(self, event: str, evidence: str = "") -> None:
        """One event: its progress line (and any pending snapshot) goes into the status file."""
        chunk, self.pending = self.pending + log_line(utc_now(), self.st, event, evidence), ""
        self.writer.append(chunk, event)

    def finalise(self, outcome: str, next_plan: list[str]) -> None:
        """The final snapshot and the closing sections; they travel with the next progress line."""
        changed = re.findall(r"^diff --git a/(.+?) b/", diff(self.ctx.workspace), flags=re.MULTILINE)
        self.snapshot(f"final: {outcome}")
        self.pending += render_final(self.st, utc_now(), outcome, changed, next_plan)
