"""The agent loop every strategy reuses: ask the model for an action, run it, repeat.

One :class:`Agent` is one conversation of one role. ``run(message)`` adds a user turn and loops
until the agent finishes, hits its step cap, its budget, or too many invalid actions in a row.
Calling ``run`` again continues the same conversation (the linear skill sends one step per turn);
a strategy that wants a fresh context creates a new Agent.

Context management: the system prompt and the first user message are never changed, so the
prompt prefix stays byte-identical and provider prompt caches keep hitting; when the conversation
grows past ~70 % of the model's window, the oldest tool outputs are shortened (once, oldest first;
with ``compact_turns`` the oldest user turns too).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from kit.agent.budget import Budget, CallBudget
from kit.agent.toolbox import Toolbox
from kit.config import Tier
from kit.errors import BudgetExceeded, KitError
from kit.model import actions
from kit.model.actions import FINISH, Action, FormatError, format_error
from kit.model.gateway import Gateway, Reply
from kit.prompts import PromptBook
from kit.records.recorder import RunRecorder
from kit.records.schema import encodable
from kit.usage import Usage

Outcome = Literal["done", "capped", "budget", "format_errors"]
SHORTENED = actions.message(actions.MESSAGES, "shortened")  # kit/prompts/agent/shortened.md


@dataclass
class AgentConfig:
    role: str
    tier: Tier
    system_prompt: str
    max_steps: int = 60
    max_format_errors: int = 3
    result_schema: type[BaseModel] | None = None
    action_mode: actions.Mode | None = None  # None: the gateway's default for the tier's model
    max_output_tokens: int | None = None
    #: also shorten old user turns, not only tool outputs: a conversation fed reports as its turns
    #: (pdca's orchestrator) grows by user turns
    compact_turns: bool = False
    # the kit's messages to the model (kit/prompts/agent/), with the experiment's agent/<name> overrides
    prompts: PromptBook | None = None


@dataclass
class ToolUse:
    """One tool call the agent executed, with its arguments exactly as the model gave them and what
    the tool returned (the tool log strategies check claims against). Not the model's request
    (``kit.model.gateway.ToolCall``): a ToolUse is what actually ran."""

    tool: str
    args: dict[str, Any]
    ok: bool
    denied: bool
    output: str
    exit_code: int | None = None  # the run tool's exit code (None: killed on timeout, or another tool)
    timed_out: bool = False


@dataclass
class AgentResult:
    outcome: Outcome
    final: str = ""
    result: BaseModel | None = None
    steps: int = 0
    format_errors: int = 0
    tool_calls: int = 0
    usage: Usage = field(default_factory=Usage)
    tool_log: list[ToolUse] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return self.outcome == "done"


class Agent:
    def __init__(
        self,
        config: AgentConfig,
        gateway: Gateway,
        toolbox: Toolbox,
        recorder: RunRecorder | None = None,
        *,
        conversation: str | None = None,
        budget: CallBudget | None = None,
    ) -> None:
        self.config = config
        self.prompts = config.prompts or actions.MESSAGES
        self.gateway = gateway
        self.toolbox = toolbox
        self.recorder = recorder
        self.conversation = conversation or config.role
        self.budget = budget or Budget()
        self.mode: actions.Mode = config.action_mode or gateway.action_mode(config.tier)
        self.allowed = toolbox.allowed()
        self.window_chars = int(gateway.context_window(config.tier) * 4 * 0.7)
        self.messages: list[dict[str, Any]] = []
        self._shortened: set[int] = set()
        self._native_tools: list[dict[str, Any]] | None = None
        self._add({"role": "system", "content": self._system_prompt()})

    # -- the loop ------------------------------------------------------------------------------
    def run(self, message: str, max_steps: int | None = None) -> AgentResult:
        """Send ``message`` as a user turn and loop until done or a cap; returns what happened."""
        self._add({"role": "user", "content": message})
        res = AgentResult(outcome="capped")
        cap = max_steps if max_steps is not None else self.config.max_steps
        errors_in_a_row = 0
        while res.steps < cap:
            try:
                self.budget.start_call()
            except BudgetExceeded as e:
                res.outcome, res.final = "budget", str(e)
                return res
            res.steps += 1
            try:
                reply = self._ask()
            finally:
                self.budget.end_call()
            res.usage = res.usage + reply.usage
            self._add(self._assistant_message(reply))
            try:
                batch = self._read_actions(reply)
                finish = next((a for a in batch if a.tool == FINISH), None)
                for action in batch:
                    if action is not finish:
                        res.tool_calls += 1
                        out = self.toolbox.execute(action.tool, action.args)
                        res.tool_log.append(
                            ToolUse(
                                action.tool,
                                dict(action.args),
                                out.ok,
                                out.denied,
                                out.output,
                                exit_code=out.exit_code,
                                timed_out=out.timed_out,
                            )
                        )
                        self._observe(out.output, action)
                if finish is not None:
                    res.result = self._validate(finish)
                    if finish.call_id:  # every native tool call gets an answer
                        self._observe("ok", finish)
                    res.outcome = "done"
                    res.final = str(finish.args.get("summary", reply.content or ""))
                    return res
                errors_in_a_row = 0
            except FormatError as e:
                res.format_errors += 1
                errors_in_a_row += 1
                text = self._text(e.key, **e.values) if e.key else str(e)
                self._event("format_error", "parse", text, ok=False)
                if not getattr(e, "answered", False):
                    self._observe(text, None)
                if errors_in_a_row >= self.config.max_format_errors:
                    res.outcome, res.final = "format_errors", text
                    return res
        return res

    # -- one model call ------------------------------------------------------------------------
    def _ask(self) -> Reply:
        tools = None
        schema = None
        if not self.allowed:
            schema = self.config.result_schema  # no tools at all: a (structured) answer
        elif self.mode == "native":
            if self._native_tools is None:
                self._native_tools = [
                    spec_to_openai(s) for s in self.toolbox.specs() if s.name in self.allowed
                ]
                self._native_tools.append(finish_tool(self.config.result_schema))
            tools = self._native_tools
        self._fit_window()
        json_schema = (
            actions.json_action_schema(self.allowed) if self.mode == "json" and self.allowed else None
        )
        return self.gateway.call(
            role=self.config.role,
            tier=self.config.tier,
            messages=self.messages,
            tools=tools or None,
            schema=schema,
            conversation=self.conversation,
            max_tokens=self.config.max_output_tokens,
            action_mode=self.mode,
            json_schema=json_schema,
        )

    def _read_actions(self, reply: Reply) -> list[Action]:
        """The reply's actions; anything in it the kit cannot read is a format error for the agent
        (the reply is the model's, so no exception it causes may end the run as ``error``)."""
        try:
            return self._parse(reply)
        except (FormatError, KitError):
            raise
        except Exception as e:  # noqa: BLE001 - agent input: never a crashed run
            self._event(
                "note", "unreadable-reply", f"the kit could not read the reply: {type(e).__name__}: {e}"
            )
            raise format_error("unreadable_reply", error=type(e).__name__) from None

    def _parse(self, reply: Reply) -> list[Action]:
        if reply.tool_calls:  # whatever the mode, a tool call is an action (and may be denied)
            bad = [tc for tc in reply.tool_calls if tc.error]
            if bad:
                error = format_error("tool_call_error", name=bad[0].name, error=bad[0].error)
                for tc in reply.tool_calls:  # every native tool call gets an answer
                    self._observe(self._text(error.key or "", **error.values), Action(tc.name, {}, tc.id))
                error.answered = True  # type: ignore[attr-defined]
                raise error
            return [Action(tc.name, tc.arguments, tc.id) for tc in reply.tool_calls]
        if not self.allowed:  # a tool written into the answer is still an attempt: denied, counted
            attempt = actions.tool_attempt(reply.content)
            return [attempt if attempt is not None else self._structured_finish(reply)]
        if self.mode == "native":
            if self.config.result_schema is None:
                return [Action(FINISH, {"summary": reply.content or ""})]
            return [self._structured_finish(reply)]
        if self.mode == "json":
            return [actions.parse_json_action(reply.content, self.allowed)]
        return [actions.parse_text_action(reply.content, self.allowed)]

    def _structured_finish(self, reply: Reply) -> Action:
        if self.config.result_schema is None:
            return Action(FINISH, {"summary": reply.content or ""})
        if reply.parsed is not None:
            return Action(FINISH, reply.parsed.model_dump())
        text = actions.strip_fence(reply.content)
        try:
            data = actions.load_json(text) if text else None
        except ValueError:
            data = None
        if isinstance(data, dict):
            return Action(FINISH, data)
        raise format_error("schema_answer", schema=self.config.result_schema.__name__)

    def _validate(self, finish: Action) -> BaseModel | None:
        schema = self.config.result_schema
        if schema is None:
            return None
        try:
            return schema.model_validate(finish.args)
        except (ValidationError, ValueError, TypeError, RecursionError) as e:
            if finish.call_id:
                self._observe("rejected", finish)
            raise format_error("schema_mismatch", schema=schema.__name__, error=str(e)[:500]) from None

    # -- conversation bookkeeping ----------------------------------------------------------
    def _system_prompt(self) -> str:
        prompt = self.config.system_prompt.strip()
        if not self.allowed or self.mode == "native":
            return prompt
        tools = "\n".join(f"- {describe(s)}" for s in self.toolbox.specs() if s.name in self.allowed)
        schema = self.config.result_schema
        fields = list(schema.model_fields) if schema is not None else None
        how = (
            actions.text_mode_help(self.allowed, fields, self.prompts)
            if self.mode == "text"
            else actions.json_mode_help(self.allowed, fields, self.prompts)
        )
        return f"{prompt}\n\nTools:\n{tools}\n\n{how}"

    def _assistant_message(self, reply: Reply) -> dict[str, Any]:
        if self.mode == "native" and reply.tool_calls:
            return reply.message
        return {"role": "assistant", "content": reply.content or ""}

    def _observe(self, output: str, action: Action | None) -> None:
        if self.mode == "native" and action is not None and action.call_id:
            self._add({"role": "tool", "tool_call_id": action.call_id, "content": output})
        else:
            self._add(
                {"role": "user", "content": self._text("observation", output=output) if action else output}
            )

    def _text(self, name: str, **values: object) -> str:
        """The kit's message ``name`` to the model (kit/prompts/agent/<name>.md, or the override)."""
        return actions.message(self.prompts, name, **values)

    def _add(self, message: dict[str, Any]) -> None:
        message = encodable(message)  # a file name or output that is not UTF-8 must not fail the next call
        self.messages.append(message)
        if self.recorder is not None:
            self.recorder.transcript(self.conversation, self.config.role, message)

    def _event(self, kind: str, name: str, detail: str, ok: bool = True) -> None:
        if self.recorder is not None:
            self.recorder.event(kind, self.config.role, name, detail[:300], ok=ok)  # type: ignore[arg-type]

    def _fit_window(self) -> None:
        """Shorten the oldest tool outputs (and, with ``compact_turns``, user turns; never the first two
        messages) until the prompt fits; a ``note`` event ``context_trimmed`` says so (it changes the
        prompt prefix: the provider's cache misses from the first shortened message on -- the analysis
        prices that bust)."""
        size = sum(len(str(m.get("content") or "")) for m in self.messages)
        before, count = size, len(self._shortened)
        observed = self._text("observation", output="")  # what an observation (a tool output) starts with
        for i, msg in enumerate(self.messages):
            if size <= self.window_chars:
                break
            if i < 2 or i in self._shortened or msg["role"] not in ("tool", "user"):
                continue
            content = str(msg.get("content") or "")
            turn = msg["role"] == "user" and not content.startswith(observed)
            if len(content) <= 400 or (turn and not self.config.compact_turns):
                continue
            msg["content"] = content[:300] + "\n" + self._text("shortened")
            self._shortened.add(i)
            size -= len(content) - len(msg["content"])
        if len(self._shortened) > count and self.recorder is not None:
            detail = (
                f"shortened {len(self._shortened) - count} old output(s): {before - size} characters removed"
            )
            self.recorder.event(
                "note", self.config.role, "context_trimmed", detail, conversation=self.conversation
            )


# --------------------------------------------------------------------------- tool specs


def spec_to_openai(spec: Any) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": spec.name, "description": spec.description, "parameters": spec.parameters},
    }


def finish_tool(schema: type[BaseModel] | None) -> dict[str, Any]:
    params = (
        schema.model_json_schema()
        if schema is not None
        else {
            "type": "object",
            "properties": {"summary": {"type": "string", "description": "What you did."}},
            "required": ["summary"],
        }
    )
    return {
        "type": "function",
        "function": {"name": FINISH, "description": "Call when the work is complete.", "parameters": params},
    }


def describe(spec: Any) -> str:
    props = spec.parameters.get("properties", {})
    required = set(spec.parameters.get("required", []))
    args = ", ".join(p if p in required else f"{p}?" for p in props)
    return f"{spec.name}({args}): {spec.description}"


def __getattr__(name: str) -> object:  # names renamed in the layout move, for one release (kit.aliases)
    from kit import aliases

    return aliases.renamed(__name__, name)
