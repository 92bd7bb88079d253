"""Fake provider servers on 127.0.0.1 that speak the real wire formats, for tests and benchmarks.

* :class:`FakeAnthropic` -- the Anthropic Messages API (``POST /v1/messages``). It enforces the
  documented request rules with 400 ``invalid_request_error`` replies like the real API:
  roles alternate user/assistant starting with user, no empty text, every ``tool_use`` answered by
  a ``tool_result`` in the next message (and no ``tool_result`` without its ``tool_use``),
  ``cache_control`` never nested inside ``tool_result.content``, at most 4 cache breakpoints. It
  simulates prefix caching: the prefix up to a marked block is written to the cache the first time
  it is seen if it is at least the model's minimum cacheable size
  (:func:`kit.caching_rules.min_cacheable_tokens`), and read afterwards (looking back up to 20
  blocks from each breakpoint, as Anthropic does). A write whose last breakpoint asks for
  ``"ttl": "1h"`` is reported as 1-hour write tokens (``usage.cache_creation``), else as 5-minute ones.
* :class:`FakeOpenAI` -- the OpenAI chat API (``POST /v1/chat/completions``): tool messages must
  answer a preceding assistant ``tool_calls``; automatic prefix caching from 1,024 tokens in
  128-token steps, reported as ``prompt_tokens_details.cached_tokens``.

Tokens are counted roughly: 4 characters of the block's canonical JSON per token (the real
tokenizers are not available offline). Good enough to exercise the minimum sizes and the
accounting, not to reproduce a provider's exact counts.

What the servers answer comes from a *responder*: a callable that gets a :class:`WireRequest`
(the conversation converted back to OpenAI shape) and returns ``{"content", "tool_calls":
[{"name", "arguments"}]}``. :class:`PolicyResponder` adapts the kit's scripted policies
(functions of :class:`kit.model.scripted.Request`), inferring the role from the system prompt,
so strategies make progress through litellm's real provider code.

Faults are queued with :meth:`FakeServer.inject` and consumed one per request: ``429``
(``retry-after``), ``429ms`` (``retry-after-ms``), ``500``, ``529`` (overloaded), ``timeout``
(sleeps past the client's timeout), ``reset`` (TCP reset), ``empty`` (no choices / no content
blocks), ``empty_text`` (an empty text reply), ``no_usage`` (a reply without ``usage``),
``garbage`` (a 200 whose body is not JSON). ``hits`` counts every request the server saw.
"""

from __future__ import annotations

import hashlib
import json
import socket
import struct
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from kit.caching_rules import LOOKBACK_BLOCKS, min_cacheable_tokens
from kit.model import scripted

CHARS_PER_TOKEN = 4
MAX_BREAKPOINTS = 4
OPENAI_CACHE_STEP = 128


def tokens(text: str) -> int:
    return max(1, -(-len(text) // CHARS_PER_TOKEN))


class BadRequest(Exception):
    """A request the real API would refuse with 400 invalid_request_error."""


@dataclass
class WireRequest:
    """One request as the responder sees it (OpenAI-shaped, whatever the provider)."""

    provider: str
    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    forced_tool: str | None
    body: dict[str, Any]

    @property
    def system(self) -> str:
        return "".join(str(m["content"]) for m in self.messages if m["role"] == "system")


Responder = Callable[[WireRequest], dict[str, Any]]


def say(text: str = "ok") -> Responder:
    return lambda req: {"content": text}


# --------------------------------------------------------------------------- the server


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:  # keep test output clean
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        self.server.fake.handle(self, raw)  # type: ignore[attr-defined]


@dataclass
class Seen:
    path: str
    body: dict[str, Any] | None
    status: int = 0
    fault: str | None = None
    usage: dict[str, Any] | None = None


class FakeServer:
    """Common machinery: a threaded HTTP server, a fault queue, a log of every request."""

    provider = ""

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        retry_after: str = "1",
        stall_s: float = 3.0,
        port: int = 0,
    ) -> None:
        self.responder = responder or say()
        self.retry_after = retry_after
        self.stall_s = stall_s  # how long a `timeout` fault sleeps
        self.seen: list[Seen] = []
        self._faults: deque[str] = deque()
        self._lock = threading.Lock()
        self._cache: dict[str, int] = {}
        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.fake = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> FakeServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    # -- control ----------------------------------------------------------------------------
    def inject(self, *faults: str) -> None:
        with self._lock:
            self._faults.extend(faults)

    @property
    def hits(self) -> int:
        return len(self.seen)

    @property
    def usages(self) -> list[dict[str, Any]]:
        return [s.usage for s in self.seen if s.usage is not None]

    # -- one request ------------------------------------------------------------------------
    def handle(self, h: BaseHTTPRequestHandler, raw: bytes) -> None:
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = None
        seen = Seen(h.path, body)
        with self._lock:
            self.seen.append(seen)
            seen.fault = self._faults.popleft() if self._faults else None
        fault = seen.fault
        if fault == "reset":
            seen.status = -1
            h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            h.connection.close()
            h.close_connection = True
            return
        if fault == "timeout":
            time.sleep(self.stall_s)
        if fault in ("429", "429ms"):
            header = ("retry-after", self.retry_after) if fault == "429" else ("retry-after-ms", "200")
            return self._send(h, seen, 429, self.error_body("rate_limit_error", "slow down"), [header])
        if fault == "500":
            return self._send(h, seen, 500, self.error_body("api_error", "internal error"))
        if fault == "529":
            return self._send(h, seen, 529, self.error_body("overloaded_error", "Overloaded"))
        if fault == "garbage":
            return self._send_raw(h, seen, 200, b"<html>bad gateway</html>", "text/html")
        if not h.path.endswith(self.path) or body is None:
            return self._send(h, seen, 404, self.error_body("not_found_error", f"no route {h.path}"))
        try:
            self.check_headers(h)
            request = self.parse(body)
        except BadRequest as e:
            return self._send(h, seen, 400, self.error_body("invalid_request_error", str(e)))
        try:
            reply = self.responder(request)
        except Exception as e:  # a broken test policy: say so in the error the client sees
            return self._send(h, seen, 500, self.error_body("api_error", f"responder failed: {e!r}"))
        usage = self.usage(body, reply)
        payload = self.reply_body(request, reply, usage, fault)
        if fault == "no_usage":
            payload.pop("usage", None)
        else:
            seen.usage = usage
        self._send(h, seen, 200, payload)

    def _send(
        self,
        h: BaseHTTPRequestHandler,
        seen: Seen,
        status: int,
        payload: dict[str, Any],
        headers: list[tuple[str, str]] = (),  # type: ignore[assignment]
    ) -> None:
        self._send_raw(h, seen, status, json.dumps(payload).encode(), "application/json", headers)

    def _send_raw(
        self,
        h: BaseHTTPRequestHandler,
        seen: Seen,
        status: int,
        data: bytes,
        ctype: str,
        headers: list[tuple[str, str]] = (),  # type: ignore[assignment]
    ) -> None:
        seen.status = status
        try:
            h.send_response(status)
            h.send_header("content-type", ctype)
            h.send_header("content-length", str(len(data)))
            for k, v in headers:
                h.send_header(k, v)
            h.end_headers()
            h.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout fault)

    # -- provider specifics -------------------------------------------------------------------
    path = ""

    def check_headers(self, h: BaseHTTPRequestHandler) -> None:
        raise NotImplementedError

    def parse(self, body: dict[str, Any]) -> WireRequest:
        raise NotImplementedError

    def error_body(self, kind: str, message: str) -> dict[str, Any]:
        raise NotImplementedError

    def usage(self, body: dict[str, Any], reply: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def reply_body(
        self, request: WireRequest, reply: dict[str, Any], usage: dict[str, Any], fault: str | None
    ) -> dict[str, Any]:
        raise NotImplementedError


def _canon(block: Any) -> str:
    if isinstance(block, dict):
        block = {k: v for k, v in block.items() if k != "cache_control"}
    return json.dumps(block, sort_keys=True)


def _output_tokens(reply: dict[str, Any]) -> int:
    return tokens((reply.get("content") or "") + json.dumps(reply.get("tool_calls") or []))


def _arguments(tc: dict[str, Any]) -> dict[str, Any]:
    args = tc.get("arguments") or {}
    return json.loads(args) if isinstance(args, str) else args


# --------------------------------------------------------------------------- Anthropic


class FakeAnthropic(FakeServer):
    provider = "anthropic"
    path = "/v1/messages"

    def check_headers(self, h: BaseHTTPRequestHandler) -> None:
        if not h.headers.get("x-api-key"):
            raise BadRequest("x-api-key header is required")
        if not h.headers.get("anthropic-version"):
            raise BadRequest("anthropic-version header is required")

    def error_body(self, kind: str, message: str) -> dict[str, Any]:
        return {"type": "error", "error": {"type": kind, "message": message}}

    # -- request rules ----------------------------------------------------------------------
    def parse(self, body: dict[str, Any]) -> WireRequest:
        if not isinstance(body.get("model"), str):
            raise BadRequest("model: Field required")
        if not isinstance(body.get("max_tokens"), int):
            raise BadRequest("max_tokens: Field required")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise BadRequest("messages: at least one message is required")
        breakpoints = sum("cache_control" in t for t in body.get("tools") or [])
        system = body.get("system")
        if isinstance(system, list):
            breakpoints += sum("cache_control" in b for b in system)
        previous_tool_uses: set[str] = set()
        for i, msg in enumerate(messages):
            role = msg.get("role")
            if role not in ("user", "assistant"):
                raise BadRequest(f"messages.{i}.role: Input should be 'user' or 'assistant'")
            if i == 0 and role != "user":
                raise BadRequest("messages: first message must use the user role")
            if i > 0 and role == messages[i - 1]["role"]:
                raise BadRequest(
                    f"messages.{i}: roles must alternate between 'user' and 'assistant', "
                    f"but found multiple '{role}' roles in a row"
                )
            blocks = self._blocks(msg, i, last=i == len(messages) - 1)
            breakpoints += sum("cache_control" in b for b in blocks)
            results = [b for b in blocks if b.get("type") == "tool_result"]
            for j, b in enumerate(results):
                nested = [c for c in b.get("content") or [] if isinstance(c, dict) and "cache_control" in c]
                if isinstance(b.get("content"), list) and nested:
                    raise BadRequest(
                        f"messages.{i}.content.{j}.tool_result.content.0.cache_control: cache_control "
                        "cannot be set on content nested inside a tool_result block; place it "
                        "directly on the tool_result block"
                    )
                if b.get("tool_use_id") not in previous_tool_uses:
                    raise BadRequest(
                        f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` "
                        f"blocks: {b.get('tool_use_id')}. Each `tool_result` block must have a "
                        "corresponding `tool_use` block in the previous message."
                    )
            if previous_tool_uses:
                answered = {b.get("tool_use_id") for b in results}
                missing = sorted(previous_tool_uses - answered)
                if missing:
                    raise BadRequest(
                        f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                        f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
                        "corresponding `tool_result` block in the next message."
                    )
            previous_tool_uses = {b["id"] for b in blocks if b.get("type") == "tool_use"}
        if previous_tool_uses:
            raise BadRequest(
                f"messages.{len(messages) - 1}: `tool_use` ids were found without `tool_result` "
                f"blocks immediately after: {', '.join(sorted(previous_tool_uses))}"
            )
        if breakpoints > MAX_BREAKPOINTS:
            raise BadRequest(
                f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
                f"Found {breakpoints}."
            )
        return WireRequest(
            provider=self.provider,
            model=body["model"],
            messages=self._openai_shape(body),
            tools=[
                {
                    "type": "function",
                    "function": {"name": t["name"], "parameters": t.get("input_schema", {})},
                }
                for t in body.get("tools") or []
            ]
            or None,
            forced_tool=(body.get("tool_choice") or {}).get("name"),
            body=body,
        )

    @staticmethod
    def _blocks(msg: dict[str, Any], i: int, last: bool) -> list[dict[str, Any]]:
        content = msg.get("content")
        if isinstance(content, str):
            if not content.strip() and not (last and msg["role"] == "assistant"):
                raise BadRequest(
                    f"messages.{i}: all messages must have non-empty content except for the "
                    "optional final assistant message"
                )
            return [{"type": "text", "text": content}]
        if not isinstance(content, list) or (not content and not last):
            raise BadRequest(f"messages.{i}.content: Input should be a valid list")
        for j, b in enumerate(content):
            if b.get("type") not in ("text", "image", "document", "tool_use", "tool_result", "thinking"):
                raise BadRequest(f"messages.{i}.content.{j}.type: unknown block type {b.get('type')!r}")
            if b.get("type") == "text" and not str(b.get("text", "")).strip():
                raise BadRequest(f"messages.{i}.content.{j}.text: text content blocks must be non-empty")
            if b.get("type") == "tool_use" and msg["role"] != "assistant":
                raise BadRequest(
                    f"messages.{i}.content.{j}: tool_use blocks are only allowed in assistant turns"
                )
            if b.get("type") == "tool_result" and msg["role"] != "user":
                raise BadRequest(
                    f"messages.{i}.content.{j}: tool_result blocks are only allowed in user turns"
                )
        return content

    @staticmethod
    def _openai_shape(body: dict[str, Any]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        system = body.get("system")
        if system:
            text = system if isinstance(system, str) else "".join(b.get("text", "") for b in system)
            out.append({"role": "system", "content": text})
        for msg in body["messages"]:
            content = msg["content"]
            if isinstance(content, str):
                out.append({"role": msg["role"], "content": content})
                continue
            texts = [b.get("text", "") for b in content if b.get("type") == "text"]
            if msg["role"] == "assistant":
                calls = [
                    {
                        "id": b["id"],
                        "type": "function",
                        "function": {"name": b["name"], "arguments": json.dumps(b.get("input") or {})},
                    }
                    for b in content
                    if b.get("type") == "tool_use"
                ]
                out.append(
                    {
                        "role": "assistant",
                        "content": "".join(texts),
                        **({"tool_calls": calls} if calls else {}),
                    }
                )
                continue
            for b in content:
                if b.get("type") == "tool_result":
                    c = b.get("content")
                    text = c if isinstance(c, str) else "".join(x.get("text", "") for x in c or [])
                    out.append({"role": "tool", "tool_call_id": b["tool_use_id"], "content": text})
            if texts:
                out.append({"role": "user", "content": "".join(texts)})
        return out

    # -- prefix caching -----------------------------------------------------------------------
    def usage(self, body: dict[str, Any], reply: dict[str, Any]) -> dict[str, Any]:
        blocks: list[Any] = list(body.get("tools") or [])
        system = body.get("system")
        blocks += [system] if isinstance(system, str) else list(system or [])
        for msg in body["messages"]:
            c = msg["content"]
            blocks += [{"role": msg["role"], "text": c}] if isinstance(c, str) else c
        hashes, totals = [], []
        h, total = hashlib.sha256(body["model"].encode()), 0
        for b in blocks:
            h = h.copy()
            h.update(_canon(b).encode())
            total += tokens(_canon(b))
            hashes.append(h.hexdigest())
            totals.append(total)
        marks = [i for i, b in enumerate(blocks) if isinstance(b, dict) and "cache_control" in b]
        minimum = min_cacheable_tokens(body["model"])
        read = write = 0
        with self._lock:
            for bp in marks:
                for j in range(bp, max(-1, bp - LOOKBACK_BLOCKS), -1):
                    if hashes[j] in self._cache:
                        read = max(read, totals[j])
                        break
            if marks and totals[marks[-1]] >= minimum and totals[marks[-1]] > read:
                write = totals[marks[-1]] - read
                for bp in marks:
                    if totals[bp] >= minimum:
                        self._cache[hashes[bp]] = totals[bp]
        ttl = (blocks[marks[-1]].get("cache_control") or {}).get("ttl", "5m") if marks else "5m"
        return {
            "input_tokens": total - read - write,
            "cache_creation_input_tokens": write,
            "cache_read_input_tokens": read,
            "cache_creation": {
                "ephemeral_5m_input_tokens": 0 if ttl == "1h" else write,
                "ephemeral_1h_input_tokens": write if ttl == "1h" else 0,
            },
            "output_tokens": _output_tokens(reply),
        }

    def reply_body(
        self, request: WireRequest, reply: dict[str, Any], usage: dict[str, Any], fault: str | None
    ) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        calls = list(reply.get("tool_calls") or [])
        if request.forced_tool and not calls:  # litellm's JSON-mode tool: the answer is its input
            try:
                calls = [{"name": request.forced_tool, "arguments": json.loads(reply.get("content") or "")}]
            except json.JSONDecodeError:
                pass
            else:
                reply = {**reply, "content": None}
        if reply.get("content"):
            content.append({"type": "text", "text": reply["content"]})
        for tc in calls:
            content.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_{uuid.uuid4().hex[:12]}",
                    "name": tc["name"],
                    "input": _arguments(tc),
                }
            )
        if fault == "empty":
            content = []
        elif fault == "empty_text":
            content = [{"type": "text", "text": ""}]
        return {
            "id": f"msg_{uuid.uuid4().hex[:12]}",
            "type": "message",
            "role": "assistant",
            "model": request.model,
            "content": content,
            "stop_reason": "tool_use" if calls else "end_turn",
            "stop_sequence": None,
            "usage": usage,
        }


# --------------------------------------------------------------------------- OpenAI


class FakeOpenAI(FakeServer):
    provider = "openai"
    path = "/chat/completions"

    def check_headers(self, h: BaseHTTPRequestHandler) -> None:
        if not (h.headers.get("authorization") or "").startswith("Bearer "):
            raise BadRequest("You didn't provide an API key.")

    def error_body(self, kind: str, message: str) -> dict[str, Any]:
        return {"error": {"message": message, "type": kind, "param": None, "code": None}}

    def parse(self, body: dict[str, Any]) -> WireRequest:
        messages = body.get("messages")
        if not isinstance(body.get("model"), str):
            raise BadRequest("you must provide a model parameter")
        if not isinstance(messages, list) or not messages:
            raise BadRequest("'messages' must contain at least one message")
        pending: set[str] = set()
        for i, m in enumerate(messages):
            if m.get("role") == "tool":
                if m.get("tool_call_id") not in pending:
                    raise BadRequest(
                        f"Invalid parameter: messages with role 'tool' must be a response to a "
                        f"preceeding message with 'tool_calls' (messages.[{i}])."
                    )
                pending.discard(m["tool_call_id"])
                continue
            if pending:
                raise BadRequest(
                    "An assistant message with 'tool_calls' must be followed by tool messages "
                    f"responding to each 'tool_call_id'. The following tool_call_ids did not have "
                    f"response messages: {', '.join(sorted(pending))}"
                )
            pending = {tc["id"] for tc in m.get("tool_calls") or []}
        msgs = [
            {
                **m,
                "content": m["content"]
                if isinstance(m.get("content"), str | None)
                else "".join(b.get("text", "") for b in m["content"]),
            }
            for m in messages
        ]
        return WireRequest(self.provider, body["model"], msgs, body.get("tools"), None, body)

    def usage(self, body: dict[str, Any], reply: dict[str, Any]) -> dict[str, Any]:
        text = json.dumps(body.get("tools") or []) + "".join(_canon(m) for m in body["messages"])
        prompt = tokens(text)
        key_len = len(text)
        cached = 0
        with self._lock:  # automatic caching: the longest stored prefix, in 128-token steps
            stored = [n for k, n in self._cache.items() if text.startswith(k)]
            cached = max(stored, default=0)
            if prompt >= 1024:
                self._cache[text[: key_len - key_len % (OPENAI_CACHE_STEP * CHARS_PER_TOKEN)]] = (
                    prompt - prompt % OPENAI_CACHE_STEP
                )
        output = _output_tokens(reply)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": output,
            "total_tokens": prompt + output,
            "prompt_tokens_details": {"cached_tokens": cached},
        }

    def reply_body(
        self, request: WireRequest, reply: dict[str, Any], usage: dict[str, Any], fault: str | None
    ) -> dict[str, Any]:
        calls = [
            {
                "id": f"call_{uuid.uuid4().hex[:12]}",
                "type": "function",
                "function": {"name": tc["name"], "arguments": json.dumps(_arguments(tc))},
            }
            for tc in reply.get("tool_calls") or []
        ]
        message: dict[str, Any] = {"role": "assistant", "content": reply.get("content")}
        if calls:
            message["tool_calls"] = calls
        choices = [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}]
        if fault == "empty":
            choices = []
        elif fault == "empty_text":
            choices = [{"index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": "stop"}]
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.model,
            "choices": choices,
            "usage": usage,
        }


# --------------------------------------------------------------------------- policies


@dataclass
class PolicyResponder:
    """Answers with a kit scripted policy (a function of :class:`kit.model.scripted.Request`).

    ``roles`` maps a role name to a phrase of its system prompt; the first role whose phrase
    appears in the request's system prompt is the caller's role (a real model also learns its
    role from the system prompt). ``context`` is passed through (task_path, test_command ...).
    """

    policy: Callable[[scripted.Request], Any]
    roles: dict[str, str] = field(default_factory=dict)
    context: dict[str, Any] = field(default_factory=dict)
    count: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, request: WireRequest) -> dict[str, Any]:
        system = request.system
        role = next((r for r, phrase in self.roles.items() if phrase in system), "")
        tools = [t for t in request.tools or [] if t["function"]["name"] != request.forced_tool] or None
        structured = bool(
            request.forced_tool or request.body.get("output_format") or request.body.get("response_format")
        )
        context = {
            **self.context,
            "role": role,
            "conversation": role,
            "action_mode": "native",
            "schema": True if structured and not tools else None,
        }
        req = scripted.Request(
            messages=list(request.messages),
            tools=tools,
            response_format=request.body.get("response_format"),
            context=context,
            index=self._next_index(),
        )
        reply = scripted.to_reply(self.policy(req))
        return {"content": reply.content, "tool_calls": reply.tool_calls}

    def _next_index(self) -> int:
        with self._lock:
            self.count += 1
            return self.count - 1


def role_phrases(strategy: str, roles: list[str]) -> dict[str, str]:
    """Each role's identifying phrase: the first non-empty line of its prompt file."""
    from kit.prompts import PromptBook

    book = PromptBook(strategy)
    out = {}
    for role in roles:
        first = next(line for line in book.get(role).splitlines() if line.strip())
        out[role] = first.strip()
    return out
