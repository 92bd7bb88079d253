"""The small runtime a workflow script is written in (docs/strategies.md, ``## workflow``): deterministic
code that calls nondeterministic subagents.

Primitives (named after the ones such scripts use):

* :meth:`Runtime.agent` -- one fresh subagent conversation (``analyzer#7``) through the RunContext
  agent factory; returns its final text, or a validated pydantic object when a schema is given, or
  ``None`` when the agent failed (format errors, step cap, an exception).
* :meth:`Runtime.parallel` -- run thunks concurrently (bounded), wait for all; a failed thunk is None.
* :meth:`Runtime.pipeline` -- every item flows through the stages on its own: no barrier between items.
* :meth:`Runtime.phase`, :meth:`Runtime.log` -- events in the run's events.jsonl.

Caps: a per-run cap on agent calls (:class:`kit.errors.CallCapReached`, a configuration error: the run
ends as ``error`` saying which cap and how to raise it) and an output-token budget, checked before
every model call of every agent (``BudgetExceeded`` stops the workflow cleanly: the script catches it
and the run ends with outcome ``budget``, its ``stop_reason`` saying which budget). The output budget is off by default (None); the experiment's run budget
(``limits.max_tokens`` / ``max_usd``) is checked at the same points.

The journal. Every completed agent call is appended to ``<journal_dir>/<run_id>.jsonl`` under a key
that chains on everything before it: the hash of (system prompt + prompt, schema, model, role) and of
the *chain head* -- a running hash over every earlier call's key and result (its text or object, its
outcome, and for a write-capable call the clone's diff). When an interrupted run is redone, a call
whose key is in the journal is *replayed*: no model call, the stored answer is returned. Because the
key carries the whole history, a change anywhere (an edited prompt, a different answer) replays only
the unchanged prefix: the changed call and every call after it run again. Calls inside
:meth:`Runtime.parallel` are siblings: each chains on the head before the group plus its position, and
the head after the group chains on all of them in order (so a changed sibling re-runs itself and what
follows the group, not its siblings). A write-capable call also stores the clone's diff against the
base commit; replaying it restores the clone to exactly that state (current diff reverse-applied,
stored diff applied, with ``git apply`` on the working tree only), so later calls see the files they
saw the first time. Each entry keeps the agent's call records; a replay writes them to this run's
calls.jsonl marked ``replayed: true`` (conversation renamed to this run's), so they count in the run's
totals and its model-call budget: the money was spent. Exceptions and budget stops are not journaled:
they are redone.

Provider failures. An agent whose model call failed for good (``ModelError``: the gateway gave up
after its retries, a missing key, a broken local server) is not an agent that answered badly: the
runtime raises :class:`ProviderFailure` (a stop: ``parallel`` re-raises it once every sibling has
finished), so the run ends as ``error`` and ``kit run --retry-errors`` redoes it -- replaying from the
journal everything that completed.

Choices where the source workflow is silent (also in docs/strategies.md, ``## Where the kit chooses``):

* "invalid output is retried": with a schema, an agent that ends with format errors or at its step cap
  is asked again in the SAME conversation (so its exploration is not lost) to give its answer now, up
  to ``format_retries`` times (default 2) with ``retry_steps`` steps each; it is still one agent call.
* The agent-call cap counts every :meth:`agent` call, replayed ones included, so a resumed run stops
  where the original would have. The output budget and the run budget count replayed calls too.
* Only calls with the ``write`` permission get a diff in the journal (an exec-only role is told not to
  change files, and parallel read-only agents would race on a shared snapshot).
* A stage of :meth:`pipeline` that returns None ends that item's flow (its result is None).
* ``parallel`` and ``pipeline`` never swallow a stop: CallCapReached, BudgetExceeded, ProviderFailure
  and non-``Exception`` interrupts (KeyboardInterrupt) are re-raised once every thunk has finished.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from kit.config import Tier
from kit.errors import BudgetExceeded, CallCapReached, Interrupted, ModelError
from kit.records.schema import CallRecord
from kit.strategies.context import RunContext
from kit.strategies.workflow.journal import Journal, chain_digest, journal_key, restore
from kit.tasks.workspace import diff as workspace_diff

T = TypeVar("T")

DEFAULT_MAX_CALLS = 1000
DEFAULT_FORMAT_RETRIES = 2
DEFAULT_RETRY_STEPS = 3
CHAIN_ROOT = "workflow-journal-v2"


class ProviderFailure(ModelError):
    """An agent's model call failed for provider reasons: the run cannot be judged; it ends as error."""


# Interrupted: Ctrl-C (the runner's stop) ends the whole workflow, not just one agent
STOPS: tuple[type[BaseException], ...] = (CallCapReached, BudgetExceeded, ProviderFailure, Interrupted)


def default_concurrency() -> int:
    """min(16, max(2, cores - 2))."""
    return min(16, max(2, (os.cpu_count() or 2) - 2))


class Runtime:
    """The primitives for one run of one workflow script. Thread-safe."""

    def __init__(
        self,
        ctx: RunContext,
        *,
        max_calls: int = DEFAULT_MAX_CALLS,
        max_output_tokens: int | None = None,
        concurrency: int | None = None,
        format_retries: int = DEFAULT_FORMAT_RETRIES,
        retry_steps: int = DEFAULT_RETRY_STEPS,
        journal_path: Path | None = None,
        cap_hint: str = "raise it with strategy_options: {workflow: {max_agent_calls: N}} in the experiment",
    ) -> None:
        self.ctx = ctx
        self.max_calls = max_calls
        self.max_output_tokens = max_output_tokens
        self.concurrency = concurrency or default_concurrency()
        self.format_retries = format_retries
        self.retry_steps = retry_steps
        self.cap_hint = cap_hint
        self.run_id = ctx.recorder.run_id
        if journal_path is None and ctx.journal_dir is not None:
            journal_path = Path(ctx.journal_dir) / f"{self.run_id}.jsonl"
        self.journal = Journal(journal_path) if journal_path is not None else None
        self._lock = threading.Lock()
        self._chain = threading.local()  # .head: this thread's chain head (see the journal, above)
        self._chain.head = CHAIN_ROOT
        self.calls = 0  # agent() calls, replayed ones included (the cap counts these)
        self.journal_hits = 0
        self.replayed_calls = 0  # model-call records copied from the journal
        self.failed_calls = 0
        self.provider_failures = 0
        self.current_phase = ""

    # -- events ------------------------------------------------------------------------------
    def phase(self, title: str, detail: str = "") -> None:
        self.current_phase = title
        self.ctx.phase(title, detail)

    def log(self, message: str, ok: bool = True) -> None:
        self.ctx.recorder.event("note", "", "log", message[:2000], ok=ok)

    # -- budget ------------------------------------------------------------------------------
    @property
    def output_tokens(self) -> int:
        """Output tokens of this workflow so far (the recorder's totals: replayed calls included)."""
        return self.ctx.recorder.totals.output

    def check_budget(self) -> None:
        """Raise BudgetExceeded when the run's budget or the workflow's output-token budget is spent."""
        if self.ctx.budget is not None:
            self.ctx.budget.check()
        if self.max_output_tokens is not None and self.output_tokens >= self.max_output_tokens:
            raise BudgetExceeded(
                f"workflow output-token budget of {self.max_output_tokens} used up ({self.output_tokens})",
                "raise strategy_options: {workflow: {max_output_tokens: N}}",
            )

    def start_call(self) -> None:
        """Before every model call of every subagent (the runtime is their ``budget``): check the
        output-token budget, then let the run budget check and count the call."""
        self.check_budget()
        if self.ctx.budget is not None:
            self.ctx.budget.start_call()

    def end_call(self) -> None:
        """A subagent's model call has ended: the run budget stops counting it in flight."""
        if self.ctx.budget is not None:
            self.ctx.budget.end_call()

    # -- agent -------------------------------------------------------------------------------
    def agent(
        self,
        prompt: str,
        schema: type[BaseModel] | None = None,
        *,
        role: str,
        tier: Tier,
        permissions: Iterable[str] = (),
        system: str = "",
        max_steps: int | None = None,
    ) -> Any:
        """One fresh subagent conversation. Returns the final text (no schema), a validated ``schema``
        instance, or None when the agent failed. Raises CallCapReached / BudgetExceeded (stops)."""
        permissions = frozenset(permissions)
        tier = self.ctx.tier(role, tier)
        model = self.ctx.gateway.spec(tier).model
        key = journal_key(self._head(), system, prompt, schema, model, role)
        with self._lock:
            if self.calls >= self.max_calls:
                raise CallCapReached(
                    f"workflow reached its cap of {self.max_calls} agent calls (run {self.run_id}, "
                    f"phase {self.current_phase!r}, next role {role!r})",
                    self.cap_hint,
                )
            self.calls += 1
            conversation = f"{role}#{self.calls}"

        entry = self.journal.get(key) if self.journal is not None else None
        if entry is not None:
            self._advance(key, entry)
            return self._replay(entry, schema, role, conversation)

        self.check_budget()
        writes = "write" in permissions
        try:
            value, outcome, output = self._run_agent(
                prompt, schema, role, tier, permissions, system, max_steps, conversation
            )
        except STOPS:
            raise
        except ModelError as exc:  # the provider failed: the run ends as error (retry-errors redoes it)
            with self._lock:
                self.failed_calls += 1
                self.provider_failures += 1
            message = f"{conversation} failed for provider reasons: {exc}"
            self.ctx.recorder.event("note", role, "agent", message[:300], ok=False)
            raise ProviderFailure(message[:2000], "rerun with `kit run --retry-errors`") from exc
        except Exception as exc:  # noqa: BLE001 - a failed agent is None; the script goes on
            with self._lock:
                self.failed_calls += 1
            self.ctx.recorder.event(
                "note", role, "agent", f"{conversation} failed: {type(exc).__name__}: {exc}"[:300], ok=False
            )
            self._advance(key, {"outcome": "exception"})
            return None
        ok = value is not None
        if not ok:
            with self._lock:
                self.failed_calls += 1
        self.ctx.recorder.event("note", role, "agent", f"{conversation} {outcome}", ok=ok)
        entry = {
            "key": key,
            "role": role,
            "tier": tier,
            "model": model,
            "conversation": conversation,
            "outcome": outcome,
            "text": value if isinstance(value, str) else None,
            "object": value.model_dump(mode="json") if isinstance(value, BaseModel) else None,
            "output_tokens": output,
            "diff": workspace_diff(self.ctx.workspace) if writes else None,
            "calls": [
                c.model_dump(mode="json", exclude={"run_id", "seq"})
                for c in self.ctx.recorder.calls_of(conversation)
            ],
        }
        if self.journal is not None:
            self.journal.append(entry)
        self._advance(key, entry)
        return value

    def _run_agent(
        self,
        prompt: str,
        schema: type[BaseModel] | None,
        role: str,
        tier: Tier,
        permissions: frozenset[str],
        system: str,
        max_steps: int | None,
        conversation: str,
    ) -> tuple[Any, str, int]:
        sub = self.ctx.agent(
            role,
            tier=tier,
            permissions=permissions,
            system_prompt=system,
            max_steps=max_steps,
            result_schema=schema,
            conversation=conversation,
        )
        sub.budget = self  # the runtime is a CallBudget: its output budget, then the run's
        result = sub.run(prompt)
        output = result.usage.output
        retries = 0
        while (
            schema is not None
            and result.outcome in ("format_errors", "capped")
            and retries < self.format_retries
        ):
            retries += 1
            nudge = (
                f"Stop now and give your answer: one JSON object matching the {schema.__name__} schema "
                f"(fields: {', '.join(schema.model_fields)})."
            )
            result = sub.run(nudge, max_steps=self.retry_steps)
            output += result.usage.output
        if result.outcome == "budget":  # a stop, not a failed agent: the script ends the run
            raise BudgetExceeded(f"{result.final.splitlines()[0] if result.final else 'budget used up'} "
                                 f"(during {conversation})")  # fmt: skip
        if result.outcome != "done":
            return None, result.outcome, output
        if schema is not None:
            return result.result, result.outcome, output
        return result.final, result.outcome, output

    def _replay(
        self, entry: dict[str, Any], schema: type[BaseModel] | None, role: str, conversation: str
    ) -> Any:
        if entry.get("diff") is not None:
            restore(self.ctx.workspace, entry["diff"])
        records = [
            CallRecord.model_validate(
                {**raw, "run_id": self.run_id, "conversation": conversation, "replayed": True}
            )
            for raw in entry.get("calls") or []
        ]
        for record in records:
            self.ctx.recorder.call(record)
        if self.ctx.budget is not None:  # every step of a journaled agent ended in one ok call
            self.ctx.budget.add_calls(sum(r.ok for r in records))
        with self._lock:
            self.journal_hits += 1
            self.replayed_calls += len(records)
            if entry.get("text") is None and entry.get("object") is None:
                self.failed_calls += 1
        self.ctx.recorder.event(
            "note",
            role,
            "journal",
            f"{conversation} replayed {entry.get('conversation')} ({entry.get('outcome')}, "
            f"{len(records)} call records)",
        )
        if entry.get("object") is not None and schema is not None:
            return schema.model_validate(entry["object"])
        return entry.get("text")

    # -- the chain -----------------------------------------------------------------------------
    def _head(self) -> str:
        return getattr(self._chain, "head", CHAIN_ROOT)

    def _advance(self, key: str, entry: dict[str, Any]) -> None:
        """Move this thread's chain head past one call: its key and what it produced."""
        result = {k: entry.get(k) for k in ("outcome", "text", "object", "diff")}
        self._chain.head = chain_digest(self._head(), key, result)

    # -- concurrency -------------------------------------------------------------------------
    def parallel(self, thunks: Sequence[Callable[[], T]]) -> list[T | None]:
        """Run ``thunks`` concurrently (at most ``concurrency`` at a time) and wait for all of them.
        Results keep the thunks' order; a thunk that raised is None (filter before use)."""
        if not thunks:
            return []
        start = self._head()
        heads = [start] * len(thunks)

        def sibling(i: int, thunk: Callable[[], T]) -> T:
            self._chain.head = chain_digest(
                start, "parallel", i
            )  # siblings chain on the head before the group
            try:
                return thunk()
            finally:
                heads[i] = self._head()

        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(thunks))) as pool:
            futures = [pool.submit(sibling, i, t) for i, t in enumerate(thunks)]
            outcomes = [_settle(f) for f in futures]
        self._chain.head = chain_digest(start, "joined", heads)
        _raise_stops(outcomes)
        return [self._unwrap(value, exc, f"parallel thunk {i}") for i, (value, exc) in enumerate(outcomes)]

    def pipeline(self, items: Sequence[Any], *stages: Callable[[Any], Any]) -> list[Any]:
        """Send every item through ``stages`` in order, each item on its own: item A may be in stage 3
        while item B is still in stage 1. A stage that raises or returns None ends that item (None)."""

        def flow(item: Any) -> Any:
            value = item
            for stage in stages:
                value = stage(value)
                if value is None:
                    return None
            return value

        return self.parallel([lambda item=item: flow(item) for item in items])

    def _unwrap(self, value: Any, exc: BaseException | None, what: str) -> Any:
        if exc is None:
            return value
        self.log(f"{what} failed: {type(exc).__name__}: {exc}", ok=False)
        return None

    # -- counters ----------------------------------------------------------------------------
    def counters(self) -> dict[str, Any]:
        return {
            "agent_calls": self.calls,
            "journal_hits": self.journal_hits,
            "replayed_model_calls": self.replayed_calls,
            "model_agent_calls": self.calls - self.journal_hits,
            "failed_agent_calls": self.failed_calls,
            "provider_failures": self.provider_failures,
            "output_tokens": self.output_tokens,
        }


def _settle(future: Any) -> tuple[Any, BaseException | None]:
    """Wait for a future; re-raise a stop only after the caller has waited for every future."""
    try:
        return future.result(), None
    except Exception as exc:  # noqa: BLE001
        return None, exc
    except BaseException as exc:  # noqa: BLE001 - interrupts: keep it, raise after all finished
        return None, exc


def _raise_stops(outcomes: list[tuple[Any, BaseException | None]]) -> None:
    for _, exc in outcomes:
        if exc is not None and (isinstance(exc, STOPS) or not isinstance(exc, Exception)):
            raise exc
