"""The run folder: the one place where the record formats are written down.

A run folder ``results/<experiment>/runs/<run-id>/`` holds

* ``calls.jsonl``      -- one :class:`CallRecord` per model call attempt, appended as it happens;
* ``events.jsonl``     -- one :class:`EventRecord` per tool call, denial, phase change, gate ...;
* ``transcript.jsonl`` -- one :class:`TranscriptEntry` per message, per conversation;
* ``diff.patch``       -- the final diff of the clone against its base commit;
* ``calls.parquet``, ``events.parquet`` -- columnar copies of the two logs, written when the run
  finishes and rebuilt from the JSONL when missing or stale (:mod:`kit.records.columnar`);
* ``run.json``         -- the :class:`RunRecord`, written atomically last: it is the "done" marker.

The analysis reads only these files, through these models. Fields only ever get added; bump
``FORMAT_VERSION`` when a field changes meaning.
"""

from __future__ import annotations

import json
import os
import threading
import time
import warnings
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from kit.usage import Usage

if TYPE_CHECKING:
    from kit.secrets import Redactor

FORMAT_VERSION = 1

CALLS = "calls.jsonl"
EVENTS = "events.jsonl"
TRANSCRIPT = "transcript.jsonl"
DIFF = "diff.patch"
RUN = "run.json"

Severity = Literal["critical", "major", "minor"]
SEVERITIES: tuple[Severity, ...] = ("critical", "major", "minor")
EventKind = Literal["tool", "denied", "phase", "gate", "escalation", "note", "format_error", "step"]


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class CallRecord(BaseModel):
    """One model call attempt (a retried call writes one line per attempt)."""

    run_id: str
    seq: int = 0
    role: str
    tier: str
    model: str
    attempt: int = 1
    ok: bool = True
    error: str | None = None
    input_uncached: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output: int = 0
    reasoning: int = 0
    cost_usd: float = 0.0
    litellm_cost_usd: float | None = None
    cost_mismatch: bool = False
    latency_s: float = 0.0
    started_at: str = Field(default_factory=utc_now)
    raw_usage: dict[str, Any] | None = None
    usage_estimated: bool = Field(
        False, description="The reply had no usage: tokens are litellm token_counter estimates."
    )
    action_mode: str | None = None
    conversation: str | None = None
    replayed: bool = Field(
        False, description="Copied from a workflow journal on resume: spent by an earlier attempt of the run."
    )

    @property
    def usage(self) -> Usage:
        return Usage(
            input_uncached=self.input_uncached,
            cache_read=self.cache_read,
            cache_write=self.cache_write,
            output=self.output,
            reasoning=self.reasoning,
            cost_usd=self.cost_usd,
        )


class EventRecord(BaseModel):
    run_id: str
    seq: int = 0
    kind: EventKind
    role: str = ""
    name: str = ""
    detail: str = ""
    ok: bool = True
    duration_s: float = 0.0
    at: str = Field(default_factory=utc_now)


class TranscriptEntry(BaseModel):
    run_id: str
    seq: int = 0
    conversation: str
    role: str
    message: dict[str, Any]
    at: str = Field(default_factory=utc_now)


class FailedRequirement(BaseModel):
    test: str
    severity: Severity
    message: str = ""


class Score(BaseModel):
    """What the hidden acceptance tests and the repo's own tests say about the final clone."""

    requirements_total: int = 0
    requirements_failed: int = 0
    baseline_broken: list[str] = Field(
        default_factory=list,
        description="Acceptance tests marked baseline_pass (not requirements) that fail at the end.",
    )
    requirements_by_severity: dict[Severity, int] = Field(
        default_factory=dict, description="requirements_total split by severity (empty in older records)."
    )
    defects: dict[Severity, int] = Field(default_factory=lambda: {"critical": 0, "major": 0, "minor": 0})
    failed: list[FailedRequirement] = Field(default_factory=list)
    own_tests_total: int = 0
    regressions: int = 0
    regressed_tests: list[str] = Field(default_factory=list)
    tests_added: int = 0
    files_touched: int = 0
    lines_added: int = 0
    lines_removed: int = 0
    claimed_done_but_failed: bool = False
    scoring_s: float = 0.0
    #: The report of the tests was tampered with (a canary test with the wrong outcome, a forged
    #: stream or exit status): every requirement counts as failed, every own test as regressed.
    tampered: bool = False
    tamper_evidence: list[str] = Field(default_factory=list)
    #: Set when scoring itself failed (or the tests gave no result at all): every requirement counts
    #: as failed and this says why. A run is never left without a score.
    unscored_reason: str | None = None
    #: Entries of the final clone not copied for scoring (symlinks out, FIFOs, unreadable ...), and why.
    dropped_files: list[str] = Field(default_factory=list)

    @property
    def defects_total(self) -> int:
        return sum(self.defects.values())


class RunRecord(BaseModel):
    format_version: int = FORMAT_VERSION
    run_id: str
    experiment: str
    task: str
    strategy: str
    profile: str
    repeat: int
    kit_commit: str = ""
    price_sheet: dict[str, Any] = Field(default_factory=dict)
    profile_spec: dict[str, Any] = Field(default_factory=dict)
    options: dict[str, Any] = Field(default_factory=dict)
    role_tiers: dict[str, str] = Field(default_factory=dict, description="The strategy's role -> tier map.")
    budget: dict[str, Any] = Field(
        default_factory=dict, description="The run budget: max_model_calls, max_usd, max_tokens."
    )
    started_at: str = ""
    finished_at: str = ""
    wall_s: float = 0.0
    model_s: float = 0.0
    tool_s: float = 0.0
    outcome: str = ""
    claimed_done: bool = False
    error: str | None = None
    base_commit: str = ""
    score: Score | None = None
    counters: dict[str, Any] = Field(default_factory=dict)
    totals: Usage = Field(default_factory=Usage)
    calls: int = 0
    sandbox: str = Field("", description="Where agent commands ran: bwrap, or none (unsandboxed).")


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` to ``path`` so a reader sees either the old file or the whole new one."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, default=str)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:  # disk full, killed ...: no half-written file is left behind
        tmp.unlink(missing_ok=True)
        raise


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSONL file; a torn last line (process killed mid-write) is ignored."""
    rows = []
    path = Path(path)
    if not path.exists():
        return rows
    # errors="replace": a kill in the middle of a multi-byte character tears the last line only
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


class RunRecorder:
    """Appends a run's records as they happen; thread-safe (workflow agents run in parallel).

    One recorder per run, passed explicitly to whoever needs it (no process-wide counters).
    It also keeps the running totals the runner needs for run.json: usage, model time, tool time,
    event counts. With a ``redactor`` (kit.secrets), every known secret value is masked in every
    line, in diff.patch and in run.json before it reaches the disk.
    """

    def __init__(self, run_dir: Path, run_id: str, redactor: Redactor | None = None) -> None:
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
        self.started = time.monotonic()

    # -- appenders -------------------------------------------------------------------------
    def _append(self, name: str, record: BaseModel) -> None:
        with self._lock:
            self._seq[name] += 1
            record.seq = self._seq[name]  # type: ignore[attr-defined]
            fh = self._files[name]
            fh.write(self.redact(record.model_dump_json()) + "\n")
            fh.flush()

    def call(self, record: CallRecord) -> None:
        record.run_id = self.run_id
        self._append(CALLS, record)
        with self._lock:
            self.calls += 1
            self.totals = self.totals + record.usage
            if not record.replayed:  # a replayed call's time was spent by an earlier process
                self.model_s += record.latency_s
            self._by_conversation.setdefault(record.conversation or record.role, []).append(record)

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
            ),
        )
        with self._lock:
            self.event_counts[kind] = self.event_counts.get(kind, 0) + 1
            if kind in ("tool", "denied"):
                self.tool_s += duration_s

    def transcript(self, conversation: str, role: str, message: dict[str, Any]) -> None:
        self._append(
            TRANSCRIPT,
            TranscriptEntry(run_id=self.run_id, conversation=conversation, role=role, message=message),
        )

    # -- finishing ---------------------------------------------------------------------------
    def write_diff(self, diff: str) -> None:
        (self.run_dir / DIFF).write_text(self.redact(diff), encoding="utf-8")

    def finalize(self, record: RunRecord) -> Path:
        """Close the JSONL files, write their Parquet copies, then run.json atomically (the run's
        "done" marker). A failed Parquet write loses nothing: analysis rebuilds it from the JSONL."""
        self.close()
        write_parquet_copies(self.run_dir)
        path = self.run_dir / RUN
        write_json_atomic(path, json.loads(self.redact(record.model_dump_json())))
        return path

    def close(self) -> None:
        with self._lock:
            for fh in self._files.values():
                if not fh.closed:
                    fh.close()

    @property
    def denials(self) -> int:
        return self.event_counts.get("denied", 0)


def write_parquet_copies(run_dir: Path) -> None:
    """Write the Parquet copies of the run's JSONL files (see :mod:`kit.records.columnar`); a failure is a
    warning, never a lost run (the JSONL stays the source of truth)."""
    from kit.records.columnar import write_parquet  # kit.records.columnar imports this module

    try:
        write_parquet(run_dir)
    except Exception as e:  # noqa: BLE001 - a cache copy must not fail the run
        warnings.warn(f"Parquet copy of {run_dir} not written ({type(e).__name__}: {e})", stacklevel=2)


def load_run(run_dir: Path) -> RunRecord | None:
    """The run's record, or None when the run is not done: no run.json, or one that cannot be read
    (truncated, not UTF-8, not a RunRecord) -- such a run is torn, and the runner redoes it."""
    path = Path(run_dir) / RUN
    try:
        return RunRecord.model_validate_json(path.read_bytes())
    except (OSError, ValueError):  # missing or unreadable; pydantic's ValidationError is a ValueError
        return None
