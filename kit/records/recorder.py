"""The recorder: a run's records appended as they happen, run.json written atomically last."""

from __future__ import annotations

import json
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from kit.records.parquet import write_parquet
from kit.records.schema import (
    CALLS,
    DIFF,
    EVENTS,
    RUN,
    TRANSCRIPT,
    CallRecord,
    EventKind,
    EventRecord,
    RunRecord,
    TranscriptEntry,
    encodable,
    write_json_atomic,
)
from kit.usage import Usage

if TYPE_CHECKING:
    from kit.secrets import Redactor


@dataclass(frozen=True)
class Progress:
    """What a run has done so far, as its recorder saw it: for a live view (``kit run``'s bar, the lab)."""

    run_id: str
    calls: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    role: str = ""  # the role of the latest call
    phase: str = ""  # the latest phase the strategy announced (PLAN, DO, CHECK, a workflow step ...)
    waiting_since: float | None = None  # wall-clock start of the oldest model call still in flight


class RunRecorder:
    """Appends a run's records as they happen; thread-safe (workflow agents run in parallel).

    One recorder per run, passed explicitly to whoever needs it (no process-wide counters).
    It also keeps the running totals the runner needs for run.json: usage, model time, tool time,
    event counts. With a ``redactor`` (kit.secrets), every known secret value is masked in every
    line, in diff.patch and in run.json before it reaches the disk.
    """

    def __init__(
        self,
        run_dir: Path,
        run_id: str,
        redactor: Redactor | None = None,
        on_progress: Callable[[Progress], None] | None = None,
    ) -> None:
        self.redact = redactor if redactor is not None else (lambda text: text)
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.run_id = run_id
        self._lock = threading.Lock()
        self._seq = {CALLS: 0, EVENTS: 0, TRANSCRIPT: 0}
        self._files = {name: open(self.run_dir / name, "a", encoding="utf-8") for name in self._seq}  # noqa: SIM115 - closed in close()
        self.totals = Usage()
        self.calls = 0
        self.model_s = 0.0
        self.tool_s = 0.0
        self.event_counts: dict[str, int] = {}
        self._by_conversation: dict[str, list[CallRecord]] = {}
        self.phase: str | None = None  # the last ``phase`` event's name: stamped on each call record
        self.started = time.monotonic()
        self.on_progress = on_progress  # told after each call and phase; must be quick
        self._role = ""  # the latest call's role
        self._waiting: dict[int, float] = {}  # model calls in flight: token -> when they started (time.time)
        self._next_wait = 0

    # -- appenders -------------------------------------------------------------------------
    def _append(self, name: str, record: BaseModel) -> None:
        with self._lock:
            self._seq[name] += 1
            record.seq = self._seq[name]  # type: ignore[attr-defined]
            fh = self._files[name]
            line = record_json(record)
            fh.write(self.redact(line) + "\n")
            fh.flush()

    def call(self, record: CallRecord) -> None:
        record.run_id = self.run_id
        if record.phase is None:
            record.phase = self.phase
        self._append(CALLS, record)
        with self._lock:
            self.calls += 1
            self.totals = self.totals + record.usage
            if not record.replayed:  # a replayed call's time was spent by an earlier process
                self.model_s += record.latency_s
            self._by_conversation.setdefault(record.conversation or record.role, []).append(record)
            self._role = record.role
        self._tell()

    def waiting(self, role: str) -> int:
        """A model call of ``role`` starts (the gateway, before it sends it): the live view shows how long
        the run has been waiting on the model. Returns the token :meth:`answered` takes."""
        with self._lock:
            self._next_wait += 1
            self._waiting[self._next_wait] = time.time()
            self._role = role
            token = self._next_wait
        self._tell()
        return token

    def answered(self, token: int) -> None:
        """The call :meth:`waiting` announced came back (answered or failed)."""
        with self._lock:
            self._waiting.pop(token, None)
        self._tell()

    def progress(self) -> Progress:
        """The run so far: calls, tokens, dollars, the latest call's role, the latest phase, and since when
        it has been waiting on a model call (None when none is in flight)."""
        with self._lock:
            t = self.totals
            tokens = t.input_uncached + t.cache_read + t.cache_write + t.output
            since = min(self._waiting.values(), default=None)
            return Progress(self.run_id, self.calls, tokens, t.cost_usd, self._role, self.phase or "", since)

    def _tell(self) -> None:
        if self.on_progress is not None:
            try:
                self.on_progress(self.progress())
            except Exception as e:  # noqa: BLE001 - a live view must never break the run it shows
                warnings.warn(f"the live progress view failed and is off for this run: {e!r}", stacklevel=2)
                self.on_progress = None

    def calls_of(self, conversation: str) -> list[CallRecord]:
        """The call records of one conversation so far (the workflow journal stores them)."""
        with self._lock:
            return list(self._by_conversation.get(conversation, []))

    def event(
        self,
        kind: EventKind,
        role: str = "",
        name: str = "",
        detail: str = "",
        ok: bool = True,
        duration_s: float = 0.0,
        conversation: str | None = None,
    ) -> None:
        self._append(
            EVENTS,
            EventRecord(
                run_id=self.run_id,
                kind=kind,
                role=role,
                name=name,
                detail=detail,
                ok=ok,
                duration_s=duration_s,
                conversation=conversation,
            ),
        )
        with self._lock:
            self.event_counts[kind] = self.event_counts.get(kind, 0) + 1
            if kind == "phase":
                self.phase = name
            if kind in ("tool", "denied"):
                self.tool_s += duration_s
        if kind == "phase":
            self._tell()

    def transcript(self, conversation: str, role: str, message: dict[str, Any]) -> None:
        self._append(
            TRANSCRIPT,
            TranscriptEntry(run_id=self.run_id, conversation=conversation, role=role, message=message),
        )

    # -- finishing ---------------------------------------------------------------------------
    def write_diff(self, diff: str | bytes) -> None:
        """diff.patch, redacted; bytes that are not UTF-8 (a binary patch's paths) are kept as they are."""
        text = diff.decode("utf-8", "surrogateescape") if isinstance(diff, bytes) else diff
        (self.run_dir / DIFF).write_text(self.redact(text), encoding="utf-8", errors="surrogateescape")

    def finalize(self, record: RunRecord) -> Path:
        """Close the JSONL files, write their Parquet copies, then run.json atomically (the run's
        "done" marker). A failed Parquet write loses nothing: analysis rebuilds it from the JSONL."""
        self.close()
        write_parquet_copies(self.run_dir)
        path = self.run_dir / RUN
        write_json_atomic(path, json.loads(self.redact(record_json(record))))
        return path

    def close(self) -> None:
        with self._lock:
            for fh in self._files.values():
                if not fh.closed:
                    fh.close()

    @property
    def denials(self) -> int:
        return self.event_counts.get("denied", 0)


def record_json(record: BaseModel) -> str:
    """``record`` as one line of JSON; a string that is not UTF-8 encodable (a lone surrogate from a
    test's message or a file name) is replaced (:func:`kit.records.schema.encodable`), never a failure."""
    try:
        return record.model_dump_json()
    except ValueError:  # PydanticSerializationError is a ValueError
        return json.dumps(encodable(record.model_dump(mode="json", fallback=str)))


def write_parquet_copies(run_dir: Path) -> None:
    """Write the Parquet copies of the run's JSONL files (see :mod:`kit.records.parquet`); a failure is a
    warning, never a lost run (the JSONL stays the source of truth)."""
    try:
        write_parquet(run_dir)
    except Exception as e:  # noqa: BLE001 - a cache copy must not fail the run
        warnings.warn(f"Parquet copy of {run_dir} not written ({type(e).__name__}: {e})", stacklevel=2)
