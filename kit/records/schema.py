"""The run folder: the one place where the record formats are written down.

A run folder ``results/<experiment>/runs/<run-id>/`` holds

* ``calls.jsonl``      -- one :class:`CallRecord` per model call attempt, appended as it happens;
* ``events.jsonl``     -- one :class:`EventRecord` per tool call, denial, phase change, gate ...;
* ``transcript.jsonl`` -- one :class:`TranscriptEntry` per message, per conversation;
* ``diff.patch``       -- the final diff of the clone against its base commit;
* ``calls.parquet``, ``events.parquet`` -- columnar copies of the two logs, written when the run
  finishes and rebuilt from the JSONL when missing or stale (:mod:`kit.records.parquet`);
* ``run.json``         -- the :class:`RunRecord`, written atomically last: it is the "done" marker.

:class:`kit.records.recorder.RunRecorder` writes them. The analysis reads only these files, through
these models; ``docs/records.md`` describes every field. Fields only ever get added; bump
``FORMAT_VERSION`` when a field changes meaning.
"""

from __future__ import annotations

import json
import os
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from kit.usage import Usage

if TYPE_CHECKING:
    pass

FORMAT_VERSION = 1

CALLS = "calls.jsonl"
EVENTS = "events.jsonl"
TRANSCRIPT = "transcript.jsonl"
DIFF = "diff.patch"
RUN = "run.json"

Severity = Literal["critical", "major", "minor"]


def encodable(value: Any) -> Any:
    """``value`` with every string UTF-8 encodable: a lone surrogate -- valid JSON (``"\\ud800"``),
    so a thing a provider or an agent may send -- becomes ``?``. Records, transcripts and the next
    request are written as UTF-8; one such character must not make any of them fail."""
    if isinstance(value, str):
        return value if value.isascii() else value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, dict):
        return {encodable(k): encodable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [encodable(v) for v in value]
    return value


def file_name(text: str) -> str:
    """``text`` (a path or a note naming one) with the bytes of a name that is not UTF-8 -- which
    Python reads as lone surrogates -- written as escapes (``\\xff``): encodable, and still telling."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate no byte decodes to
        return encodable(text)


SEVERITIES: tuple[Severity, ...] = ("critical", "major", "minor")
EventKind = Literal["tool", "denied", "phase", "gate", "escalation", "note", "format_error", "step"]


#: The one outcome vocabulary of every strategy (docs/strategies.md, "Outcomes and stop reasons"):
#: outcome -> what it means. Each run also records its strategy's own ``stop_reason`` beside it.
OUTCOMES: dict[str, str] = {
    "done": "the strategy's own success end",
    "capped": "a cap of the strategy's own (steps, cycles, sessions) with run budget left",
    "incomplete": "the strategy stopped itself without success (no cap was reached)",
    "budget": "the shared run budget (model calls, tokens, USD) was spent, or the clone's disk quota (stop reason disk-quota)",
    "tampered": "scoring found the tests' report rigged; every requirement counts as failed",
    "unscored": "scoring itself failed; every requirement counts as failed",
    "error": "a provider or kit failure, never agent input (see run.json error)",
    "interrupted": "Ctrl-C stopped the run; the next `kit run` redoes it",
}

#: The stop reason of a run whose clone reached its disk quota (limits.disk_quota_mb / _files), in
#: every strategy: the runner ends it with outcome ``budget`` and scores what it has.
DISK_QUOTA = "disk-quota"

#: Each strategy's stop reasons -> the outcome it ends with (the legend of the report). pdca's reasons
#: carry a detail in parentheses (``cap:budget (...)``): the key is the text before " (".
STOP_REASONS: dict[str, dict[str, str]] = {
    # vibe's stop reason is its one agent's ending; a step cap reached with no call left is budget
    "vibe": {"done": "done", "capped": "capped or budget", "format_errors": "capped", "budget": "budget"},
    "linear": {"last-step": "done", "budget": "budget"},
    "pdca": {
        "pass": "done",
        "exit": "done",  # what records before the one vocabulary called ``pass``
        "expert:stop": "incomplete",
        "expert:no-decision": "incomplete",
        "cap:max_role_calls": "capped",
        "cap:budget": "budget",
    },
    "workflow": {
        "converged-clean": "done",
        "cycle-cap": "capped",
        "output-budget": "capped",
        "budget": "budget",
        "call-cap": "error",
        "provider-failure": "error",
    },
    "harness": {
        "all-pass": "done",
        "session-cap": "capped",
        "no-valid-feature-list": "incomplete",
        "budget": "budget",
    },
}
for _reasons in STOP_REASONS.values():  # the runner's own stop, in every strategy
    _reasons[DISK_QUOTA] = "budget"

#: Outcomes older records wrote for a strategy's success end: read as ``done`` with the old word as
#: the stop reason (:func:`normalise_outcome`).
LEGACY_SUCCESS = {"pass": "pass", "converged-clean": "converged-clean", "all-pass": "all-pass"}
#: (strategy, old outcome, stop reason key) -> the outcome the one vocabulary gives that event.
LEGACY_ENDS = {
    ("pdca", "incomplete", "cap:budget"): "budget",
    ("pdca", "incomplete", "cap:max_role_calls"): "capped",
    ("harness", "capped", "no-valid-feature-list"): "incomplete",
}


def stop_reason_key(stop_reason: str) -> str:
    """A stop reason without its detail: ``cap:budget (20 calls)`` -> ``cap:budget``."""
    return (stop_reason or "").split(" (", 1)[0].strip()


def normalise_outcome(strategy: str, outcome: str, stop_reason: str) -> tuple[str, str]:
    """(outcome, stop_reason) in the one vocabulary, for records written before it: a success end under
    the strategy's own name (``pass``, ``converged-clean``, ``all-pass``) is ``done``; pdca's
    ``incomplete`` for a spent budget or its role-call cap is ``budget`` / ``capped``; harness's
    ``capped`` without a feature list is ``incomplete``. Anything else is kept as it is."""
    if outcome in LEGACY_SUCCESS:
        return "done", stop_reason or LEGACY_SUCCESS[outcome]
    return LEGACY_ENDS.get((strategy, outcome, stop_reason_key(stop_reason)), outcome), stop_reason


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
    cache_write_1h: int = Field(0, description="Of cache_write: the tokens written with the 1-hour lifetime.")
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
    phase: str | None = Field(
        None, description="The strategy's phase when the call was recorded (the run's last `phase` event)."
    )
    replayed: bool = Field(
        False, description="Copied from a workflow journal on resume: spent by an earlier attempt of the run."
    )
    # Where the gateway's cache breakpoints sat (kit.model.prefixes); None when it placed none.
    cache_ttl: str | None = Field(None, description="Lifetime asked for the breakpoints: 5m or 1h.")
    cache_breakpoints: list[int] | None = Field(
        None,
        description="Prompt-token position of each breakpoint (token_counter, scaled to the provider's total).",
    )
    cache_prefix_hashes: list[str] | None = Field(
        None, description="Hash of the prompt prefix up to each breakpoint."
    )
    cache_lookback: list[list[Any]] | None = Field(
        None,
        description="[tokens, hash] of every message boundary a cache lookup can match (20-block lookback).",
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
            cache_write_1h=self.cache_write_1h,
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
    conversation: str | None = Field(None, description="The conversation it concerns (e.g. context_trimmed).")


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
    #: Files one of whose sides was over the line diff's cap (kit.scoring.diffstats.MAX_SIDE_BYTES):
    #: every line of it counted as changed, so lines_added / lines_removed are an upper bound.
    lines_counted_whole: list[str] = Field(default_factory=list)
    claimed_done_but_failed: bool = False
    scoring_s: float = 0.0
    #: The report of the tests was tampered with (a canary test with the wrong outcome, a forged
    #: stream or exit status): every requirement counts as failed, every own test as regressed.
    tampered: bool = False
    tamper_evidence: list[str] = Field(default_factory=list)
    #: Requirements whose test passed but whose must-fail twin passed too (counted as failed): the code
    #: met an expectation nothing legitimate can meet (a value equal to anything, a patched raises).
    requirements_gamed: int = 0
    gamed_tests: list[str] = Field(default_factory=list)
    #: Requirements with neither a must-fail twin nor a sealed check (their passes are not checked so).
    requirements_unguarded: int = 0
    #: Requirements with at least one sealed check: an equality whose expected value never entered the
    #: scoring session, compared by the kit outside it (a forged report cannot meet it).
    requirements_sealed: int = 0
    #: The code under test was seen reading the hidden tests or taking frames (scoring's audit hook):
    #: flagged with what was seen, not re-scored.
    suspicious: bool = False
    suspicious_evidence: list[str] = Field(default_factory=list)
    #: Set when scoring itself failed (or the tests gave no result at all): every requirement counts
    #: as failed and this says why. A run is never left without a score.
    unscored_reason: str | None = None
    #: Entries of the final clone not copied for scoring (symlinks out, FIFOs, unreadable ...), and why.
    dropped_files: list[str] = Field(default_factory=list)

    @property
    def defects_total(self) -> int:
        return sum(self.defects.values())


class TaskSize(BaseModel):
    """How big a task is, measured by the kit the same way for every task (``kit.importers.size``), never
    hand-written: what the crossover analysis puts on its x axis. ``None`` where a measure could not be
    taken (a task with no reference change, a record from before sizes were kept)."""

    code_lines: int | None = Field(
        None,
        description="Lines the reference change adds + removes, docstrings, comments and blank lines left out.",
    )
    files: int | None = Field(None, description="Files the reference change touches.")
    hidden_tests: int | None = Field(None, description="Hidden acceptance tests (requirements).")
    base_code_lines: int | None = Field(
        None, description="The base's Python code lines (docstrings, comments, blank lines left out)."
    )
    prompt_tokens: int | None = Field(
        None,
        description="Tokens the prompt carries in a first call (estimated: characters / 4 when no tokenizer).",
    )
    long: bool = Field(False, description="Derived: code_lines >= 150 and files >= 2 and hidden_tests >= 8.")


class RunRecord(BaseModel):
    format_version: int = FORMAT_VERSION
    run_id: str
    experiment: str
    task: str
    strategy: str
    profile: str
    repeat: int
    project: str = Field(
        "",
        description="The task's project, the cluster paired statistics resample by; '' = its own cluster.",
    )
    task_size: TaskSize | None = Field(None, description="The task's size (TaskSize); null in older records.")
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
    outcome: str = Field("", description="One of OUTCOMES (docs/strategies.md, Outcomes and stop reasons).")
    stop_reason: str = Field(
        "", description="The strategy's own reason for stopping (STOP_REASONS); empty in older records."
    )
    claimed_done: bool = False
    error: str | None = None
    base_commit: str = ""
    score: Score | None = None
    diff_omitted: list[str] = Field(
        default_factory=list,
        description="Files left out of diff.patch (over its caps: kit.tasks.patch), with why; empty when whole.",
    )
    counters: dict[str, Any] = Field(default_factory=dict)
    totals: Usage = Field(default_factory=Usage)
    calls: int = 0
    sandbox: str = Field(
        "", description="Where agent commands and scoring ran: bwrap, podman, docker, or none (unsandboxed)."
    )
    sandbox_image: str = Field("", description="With podman or docker: the image's name; '' otherwise.")
    sandbox_image_id: str = Field(
        "", description="With podman or docker: the image's id (sha256:...), what every command ran in."
    )
    settings: dict[str, Any] = Field(
        default_factory=dict,
        description="Everything that shaped the run (kit.run.fingerprint); empty in older records.",
    )
    fingerprint: str = Field(
        "",
        description="Hash of `settings`: resume keeps a finished run only when it matches; '' in older records.",
    )


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


def load_run(run_dir: Path) -> RunRecord | None:
    """The run's record, or None when the run is not done: no run.json, or one that cannot be read
    (truncated, not UTF-8, not a RunRecord) -- such a run is torn, and the runner redoes it."""
    path = Path(run_dir) / RUN
    try:
        return RunRecord.model_validate_json(path.read_bytes())
    except (OSError, ValueError):  # missing or unreadable; pydantic's ValidationError is a ValueError
        return None
