"""One run folder -> one Inspect ``EvalSample`` (used by :mod:`kit.app.export_inspect`).

The sample is the run's task, its epoch the run's repeat. Read from the run's records only:

* ``messages`` -- the run's main conversation (the one its transcript starts with);
* ``events`` -- every conversation as a span (its name, e.g. ``coder`` or ``analyzer#7``) holding one
  ``ModelEvent`` per line of calls.jsonl (tagged with the call's kit role; failed attempts carry their
  error) and one ``ToolEvent`` per tool call with its result; the kit's own events (phases, gates,
  denials, notes ...) as ``InfoEvent``; all in time order;
* ``model_usage`` (by each call's model) and ``role_usage`` (by role): the sums of calls.jsonl;
* ``scores`` -- ``solved`` (C / I, first: the viewer colours its pill by it), ``requirements_met``
  (share met; what went wrong in its metadata) and ``defects`` (by severity); none for a run that ended ``error`` or ``interrupted``, which
  carries an ``error`` instead; ``budget`` and ``capped`` runs carry their ``limit``.

inspect_ai is imported by the caller only (it takes seconds): this module imports it inside functions.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from kit.records.schema import (
    CALLS,
    EVENTS,
    TRANSCRIPT,
    CallRecord,
    EventRecord,
    RunRecord,
    TranscriptEntry,
    read_jsonl,
)

#: Outcomes that carry an error and no score.
ERROR_OUTCOMES = ("error", "interrupted")


@dataclass
class RunFiles:
    """A finished run's records: run.json, calls.jsonl, events.jsonl and transcript.jsonl."""

    run: RunRecord
    calls: list[CallRecord] = field(default_factory=list)
    events: list[EventRecord] = field(default_factory=list)
    transcript: list[TranscriptEntry] = field(default_factory=list)

    @classmethod
    def read(cls, run_dir: Path, run: RunRecord) -> RunFiles:
        return cls(
            run=run,
            calls=[CallRecord.model_validate(r) for r in read_jsonl(run_dir / CALLS)],
            events=[EventRecord.model_validate(r) for r in read_jsonl(run_dir / EVENTS)],
            transcript=[TranscriptEntry.model_validate(r) for r in read_jsonl(run_dir / TRANSCRIPT)],
        )

    def conversations(self) -> dict[str, list[TranscriptEntry]]:
        """Each conversation's messages in order, conversations in the order they started."""
        out: dict[str, list[TranscriptEntry]] = {}
        for entry in sorted(self.transcript, key=lambda e: e.seq):
            out.setdefault(entry.conversation, []).append(entry)
        return out


def when(stamp: str) -> datetime | None:
    """A record's UTC ISO time as a datetime (None when empty or unreadable)."""
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")) if stamp else None
    except ValueError:
        return None


def model_usage(calls: list[CallRecord]) -> Any:
    """The summed usage of ``calls`` as an Inspect ``ModelUsage``: uncached input, cache read and write,
    output, reasoning, cost, and ``total_tokens`` = every input bucket + output."""
    from inspect_ai.model import ModelUsage

    unc, read, write, out, reason = (sum(getattr(c, k) for c in calls) for k in _TOKENS)
    return ModelUsage(
        input_tokens=unc,
        output_tokens=out,
        total_tokens=unc + read + write + out,
        input_tokens_cache_read=read,
        input_tokens_cache_write=write,
        reasoning_tokens=reason,
        total_cost=sum(c.cost_usd for c in calls),
    )


_TOKENS = ("input_uncached", "cache_read", "cache_write", "output", "reasoning")


def usage_by(calls: list[CallRecord], key: str) -> dict[str, Any]:
    """``ModelUsage`` per value of the call field ``key`` (``model`` or ``role``)."""
    groups: dict[str, list[CallRecord]] = defaultdict(list)
    for c in calls:
        groups[getattr(c, key)].append(c)
    return {k: model_usage(v) for k, v in sorted(groups.items())}


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: keep their text
        return "\n".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return json.dumps(content, default=str)


def _tool_call(tc: dict[str, Any]) -> Any:
    from inspect_ai.tool import ToolCall

    fn = tc.get("function") or {}
    raw = fn.get("arguments")
    args, error = {}, None
    if isinstance(raw, dict):
        args = raw
    elif raw:
        try:
            parsed = json.loads(raw)
            args = parsed if isinstance(parsed, dict) else {"value": parsed}
        except (TypeError, ValueError) as e:
            args, error = {"raw": str(raw)}, f"arguments are not JSON: {e}"
    return ToolCall(
        id=str(tc.get("id", "")), function=str(fn.get("name", "")), arguments=args, parse_error=error
    )


def chat_message(message: dict[str, Any], tool_names: dict[str, str]) -> Any:
    """A transcript message (OpenAI chat shape) as an Inspect ``ChatMessage``."""
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageTool, ChatMessageUser

    role, content = message.get("role"), _text(message.get("content"))
    if role == "system":
        return ChatMessageSystem(content=content)
    if role == "assistant":
        calls = [_tool_call(tc) for tc in message.get("tool_calls") or []]
        return ChatMessageAssistant(content=content, tool_calls=calls or None)
    if role == "tool":
        call_id = message.get("tool_call_id")
        return ChatMessageTool(content=content, tool_call_id=call_id, function=tool_names.get(call_id or ""))
    return ChatMessageUser(content=content)


def _tool_names(entries: list[TranscriptEntry]) -> dict[str, str]:
    return {
        str(tc.get("id")): str((tc.get("function") or {}).get("name", ""))
        for e in entries
        for tc in e.message.get("tool_calls") or []
    }


@dataclass
class Conversation:
    """One conversation's messages as Inspect messages, with their times."""

    name: str
    role: str
    messages: list[Any]
    times: list[datetime | None]
    raw: list[dict[str, Any]]

    @classmethod
    def of(cls, name: str, entries: list[TranscriptEntry]) -> Conversation:
        names = _tool_names(entries)
        return cls(
            name=name,
            role=entries[0].role,
            messages=[chat_message(e.message, names) for e in entries],
            times=[when(e.at) for e in entries],
            raw=[e.message for e in entries],
        )

    def assistant_indexes(self) -> list[int]:
        return [i for i, m in enumerate(self.raw) if m.get("role") == "assistant"]


# --------------------------------------------------------------------------------------------- events


def _model_output(model: str, message: Any, usage: Any, call: CallRecord | None = None) -> Any:
    from inspect_ai.model import ChatCompletionChoice, ModelOutput

    choices = []
    if message is not None:
        stop = "tool_calls" if message.tool_calls else "stop"
        choices = [ChatCompletionChoice(message=message, stop_reason=stop)]
    return ModelOutput(
        model=model,
        choices=choices,
        usage=usage,
        time=call.latency_s if call else None,
        error=call.error if call else None,
    )


def _model_events(calls: list[CallRecord], convs: dict[str, Conversation]) -> list[Any]:
    """One ``ModelEvent`` per call attempt: the k-th successful call of a conversation produced its
    k-th assistant message (its input is every message before it); a failed attempt has no output."""
    from inspect_ai.event import ModelEvent
    from inspect_ai.model import GenerateConfig

    taken: dict[str, int] = defaultdict(int)
    replies = {name: conv.assistant_indexes() for name, conv in convs.items()}
    out: list[Any] = []
    for call in sorted(calls, key=lambda c: c.seq):
        conv = convs.get(call.conversation or "")
        idx = None
        if conv is not None and taken[conv.name] < len(replies[conv.name]):
            idx = replies[conv.name][taken[conv.name]]
            taken[conv.name] += int(call.ok)
        reply = conv.messages[idx] if conv is not None and idx is not None and call.ok else None
        started = when(call.started_at)
        event = ModelEvent(
            model=call.model,
            role=call.role,
            input=(conv.messages[:idx] if idx is not None else conv.messages) if conv is not None else [],
            tools=[],
            tool_choice="auto",
            config=GenerateConfig(),
            output=_model_output(call.model, reply, model_usage([call]), call),
            retries=call.attempt - 1,
            error=call.error if not call.ok else None,
            completed=started + timedelta(seconds=call.latency_s) if started else None,
            working_time=call.latency_s,
            span_id=_span_id(conv.name) if conv is not None else None,
            metadata={
                k: getattr(call, k)
                for k in (
                    "seq",
                    "tier",
                    "attempt",
                    "ok",
                    "cost_usd",
                    "usage_estimated",
                    "replayed",
                    "action_mode",
                )
            },
            **({"timestamp": started} if started else {}),
        )
        out.append(event)
        if reply is not None and conv is not None and idx is not None:
            out.extend(_tool_events(conv, idx))
    return out


def _tool_events(conv: Conversation, idx: int) -> list[Any]:
    """A ``ToolEvent`` per tool call of the assistant message ``idx``, with the tool message answering it."""
    from inspect_ai.event import ToolEvent
    from inspect_ai.tool import ToolCallError

    out = []
    for tc in conv.messages[idx].tool_calls or []:
        answer = next(
            (j for j in range(idx + 1, len(conv.raw)) if conv.raw[j].get("tool_call_id") == tc.id),
            None,
        )
        started, ended = conv.times[idx], conv.times[answer] if answer is not None else None
        out.append(
            ToolEvent(
                id=tc.id,
                function=tc.function,
                arguments=tc.arguments,
                result=conv.messages[answer].text if answer is not None else "",
                error=None if answer is not None else ToolCallError("unknown", "no result recorded"),
                completed=ended,
                working_time=(ended - started).total_seconds() if started and ended else None,
                span_id=_span_id(conv.name),
                **({"timestamp": started} if started else {}),
            )
        )
    return out


def _span_id(conversation: str) -> str:
    return f"conversation:{conversation}"


def _info_events(files: RunFiles) -> list[Any]:
    """The kit's own events (phases, gates, denials, notes ...) as ``InfoEvent``. ``tool`` events are
    left to the ``ToolEvent`` of the calls unless the run made no native tool call (text / JSON actions)."""
    from inspect_ai.event import InfoEvent

    native = any(e.message.get("tool_calls") for e in files.transcript)
    out = []
    for e in files.events:
        if e.kind == "tool" and native:
            continue
        at = when(e.at)
        data = {"kind": e.kind, "name": e.name, "role": e.role, "ok": e.ok, "detail": e.detail}
        if e.duration_s:
            data["duration_s"] = e.duration_s
        out.append(InfoEvent(source=f"kit {e.kind}", data=data, **({"timestamp": at} if at else {})))
    return out


def sample_events(files: RunFiles, convs: dict[str, Conversation], start: datetime) -> list[Any]:
    """Every event of the run in time order, each conversation a span around its model and tool events."""
    from inspect_ai.event import SpanBeginEvent, SpanEndEvent

    inner = _model_events(files.calls, convs)
    events = inner + _info_events(files)
    for name, conv in convs.items():
        sid = _span_id(name)
        times = [t for t in conv.times if t] + [e.timestamp for e in inner if e.span_id == sid]
        first, last = (min(times), max(times)) if times else (start, start)
        events.append(
            SpanBeginEvent(id=sid, name=name, type="agent", timestamp=first, metadata={"role": conv.role})
        )
        events.append(SpanEndEvent(id=sid, timestamp=last))
    order = {"span_begin": 0, "span_end": 2}
    events.sort(key=lambda e: (e.timestamp, order.get(e.event, 1)))
    for e in events:
        e.working_start = max(0.0, (e.timestamp - start).total_seconds())
    return events


# --------------------------------------------------------------------------------------------- sample


def sample_scores(run: RunRecord) -> dict[str, Any] | None:
    """The three scores of a scored run; None for a run left out of the means (error, interrupted)."""
    from inspect_ai.scorer import Score

    from kit.analysis import comparable_scores, is_scored  # pandas: imported when the command runs

    if not is_scored(run) or run.score is None:
        return None
    s = run.score
    comp = comparable_scores(s.model_dump())
    met = 1.0 - comp["failed_share"] if not math.isnan(comp["failed_share"]) else math.nan
    failed = [f"{f.test} ({f.severity}): {f.message}".strip() for f in s.failed]
    why = [f"outcome {run.outcome}", *([f"unscored: {s.unscored_reason}"] if s.unscored_reason else [])]
    why += ["TAMPERED test report"] if s.tampered else []
    why += [f"{s.regressions} regression(s)"] if s.regressions else []
    detail = {
        "outcome": run.outcome,
        "stop_reason": run.counters.get("stop_reason"),
        "claimed_done": run.claimed_done,
    }
    detail |= s.model_dump(exclude={"defects"})
    solved = comp["solved"] == 1.0
    return {
        "solved": Score(
            value="C" if solved else "I",
            answer=run.outcome,
            explanation=(
                "solved: no critical or major requirement failed"
                if solved
                else "NOT solved: a critical or major requirement failed"
            )
            + f" (the run ended {run.outcome})",
        ),
        "requirements_met": Score(
            value=met,
            answer=run.outcome,
            explanation="; ".join(
                [
                    f"{s.requirements_total - s.requirements_failed} of {s.requirements_total} requirements met",
                    *why,
                ]
            )
            + ("\nfailed:\n" + "\n".join(failed) if failed else ""),
            metadata=detail,
        ),
        "defects": Score(
            value={sev: s.defects.get(sev, 0) for sev in ("critical", "major", "minor")},
            explanation="failed requirements by severity",
        ),
    }


def sample_limit(run: RunRecord) -> Any:
    """The limit a ``budget`` or ``capped`` run stopped at (None for other outcomes)."""
    from inspect_ai.log import EvalSampleLimit

    stop = run.counters.get("stop_reason")
    if run.outcome == "budget":
        b, t = run.budget, run.totals
        tokens = t.input_uncached + t.cache_read + t.cache_write + t.output
        reason = f"run budget spent ({', '.join(f'{k}={v}' for k, v in b.items() if v is not None) or 'none recorded'}): "
        reason += f"{run.calls} calls, {tokens} tokens, ${t.cost_usd:.4f}; stop_reason {stop}"
        if b.get("max_usd") is not None and t.cost_usd >= b["max_usd"]:
            return EvalSampleLimit(type="cost", limit=b["max_usd"], reason=reason)
        if b.get("max_tokens") is not None and tokens >= b["max_tokens"]:
            return EvalSampleLimit(type="token", limit=b["max_tokens"], reason=reason)
        first = next((v for v in (b.get("max_model_calls"), b.get("max_tokens"), b.get("max_usd")) if v), 0)
        return EvalSampleLimit(type="custom", limit=float(first), reason=reason)
    if run.outcome == "capped":
        key, value, caps = strategy_cap(run.counters)
        listed = ", ".join(f"{k}={v}" for k, v in caps.items()) or "none recorded"
        reason = f"the strategy's own cap: {key}={value} (caps: {listed}); stop_reason {stop}"
        return EvalSampleLimit(
            type="turn" if key == "max_steps" else "custom", limit=float(value), reason=reason
        )
    return None


def strategy_cap(counters: dict[str, Any]) -> tuple[str, float, dict[str, float]]:
    """The cap a ``capped`` run stopped at: among the ``max_*`` counters (top level, then ``params``), the
    one whose name its ``stop_reason`` names (``cycle cap`` -> ``max_cycles``), else the first top-level
    one (vibe's ``max_steps``), else NaN (the reason text says what was recorded)."""
    params = counters.get("params") if isinstance(counters.get("params"), dict) else {}
    top = {k: v for k, v in counters.items() if k.startswith("max_") and isinstance(v, int | float)}
    caps = top | {k: v for k, v in params.items() if k.startswith("max_") and isinstance(v, int | float)}
    stop = str(counters.get("stop_reason") or "")
    named = [k for k in caps if k.removeprefix("max_").rstrip("s") in stop]
    key = named[0] if named else next(iter(top), "")
    return (key, caps[key], caps) if key else ("cap", math.nan, caps)


def sample_error(files: RunFiles) -> Any:
    """An ``EvalError`` for a run that ended ``error`` or ``interrupted`` (its message and traceback note)."""
    from inspect_ai.log import EvalError

    run = files.run
    if run.outcome not in ERROR_OUTCOMES:
        return None
    message = run.error or f"run {run.outcome}"
    notes = [e.detail for e in files.events if e.kind == "note" and e.name in ERROR_OUTCOMES and e.detail]
    trace = "\n".join(notes) or message
    return EvalError(message=f"{run.outcome}: {message}", traceback=trace, traceback_ansi=trace)


def main_conversation(convs: dict[str, Conversation], run: RunRecord) -> Conversation | None:
    """The run's main conversation: the first one of its lead role (the first of its role -> tier map:
    vibe's and linear's coder, pdca's orchestrator, workflow's implementer, harness's initializer),
    else the first conversation of the run."""
    lead = next(iter(run.role_tiers), None)
    return next((c for c in convs.values() if c.role == lead), next(iter(convs.values()), None))


def eval_sample(files: RunFiles, epoch: int, uuid: str) -> Any:
    """The run as an Inspect ``EvalSample`` (see the module's docstring)."""
    from inspect_ai.log import EvalSample

    run = files.run
    convs = {name: Conversation.of(name, entries) for name, entries in files.conversations().items()}
    main = main_conversation(convs, run)
    stamps = [t for t in (when(run.started_at), *(when(c.started_at) for c in files.calls)) if t]
    start = min(stamps) if stamps else datetime.fromtimestamp(0).astimezone()
    prompt = next((m.text for m in main.messages if m.role == "user"), run.task) if main else run.task
    last = next((m for m in reversed(main.messages) if m.role == "assistant"), None) if main else None
    main_model = next((c.model for c in files.calls if main and c.conversation == main.name), "")
    return EvalSample(
        id=run.task,
        epoch=epoch,
        input=prompt,
        target="",
        messages=main.messages if main else [],
        output=_model_output(main_model, last, None),
        scores=sample_scores(run),
        metadata={
            "run_id": run.run_id,
            "repeat": run.repeat,
            "outcome": run.outcome,
            "claimed_done": run.claimed_done,
            "error": run.error,
            "main_conversation": main.name if main else None,
            "conversations": list(convs),
            **{
                k: getattr(run, k) for k in ("role_tiers", "counters", "wall_s", "model_s", "tool_s", "calls")
            },
            **{
                k: getattr(run, k)
                for k in ("base_commit", "kit_commit", "sandbox", "started_at", "finished_at")
            },
        },
        model_usage=usage_by(files.calls, "model"),
        role_usage=usage_by(files.calls, "role"),
        started_at=run.started_at or None,
        completed_at=run.finished_at or None,
        total_time=run.wall_s,
        working_time=run.model_s + run.tool_s,
        uuid=uuid,
        error=sample_error(files),
        limit=sample_limit(run),
        events=sample_events(files, convs, start),
    )
