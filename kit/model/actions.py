"""The three ways an agent can ask for a tool, parsed and rendered in one place.

* ``native`` -- the provider's tool calls (function calling); ``finish`` is a tool too.
* ``json``   -- one action per turn as a JSON object obeying a response-format schema:
  ``{"thought": str, "tool": <name>|"finish", "args": {...}}`` (for models without tool calls).
* ``text``   -- one fenced block per turn, parsed by the kit (as mini-swe-agent does):
  ```` ```bash ```` runs a command, ```` ```python path/to/file.py ```` writes that file,
  ```` ```tool NAME ```` with a JSON body calls any tool, and ``DONE`` on its own line finishes.

``render`` produces what a model would say for a given action in each mode (the scripted policies
use it, so tests exercise the same parser in all modes).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from string import Template
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from kit.prompts import PromptBook
from kit.records.schema import encodable

FINISH = "finish"
Mode = Literal["native", "json", "text"]


@dataclass
class Action:
    tool: str
    args: dict[str, Any] = field(default_factory=dict)
    call_id: str | None = None


#: The kit's own words to the model about its actions (kit/prompts/agent/*.md); an experiment
#: overrides one with ``prompt_overrides: {"agent/<name>": text}`` (the agent renders it, see
#: :func:`message`).
MESSAGES = PromptBook("agent")


def message(book: PromptBook, name: str, **values: object) -> str:
    """Message ``name`` of ``book`` (its file without the final newline) with ``$placeholders`` filled."""
    return Template(book.get(name).removesuffix("\n")).safe_substitute({k: str(v) for k, v in values.items()})


class FormatError(ValueError):
    """The model's reply is not a valid action; the message is the correction sent back. ``key`` and
    ``values`` name the kit/prompts/agent/ message it reads, so the agent can send an experiment's
    override of it instead."""

    def __init__(self, text: str, key: str | None = None, values: dict[str, object] | None = None) -> None:
        super().__init__(text)
        self.key = key
        self.values = dict(values or {})


def format_error(name: str, **values: object) -> FormatError:
    """A FormatError whose text is kit/prompts/agent/<name>.md with ``values`` filled in."""
    return FormatError(message(MESSAGES, name, **values), name, values)


# --------------------------------------------------------------------------- JSON actions


class JsonAction(BaseModel):
    """One action per turn (schema sent as the response format)."""

    model_config = ConfigDict(extra="forbid")
    thought: str = Field("", description="One or two sentences of reasoning.")
    tool: str = Field(description="The tool to call, or 'finish' when the work is done.")
    args: dict[str, Any] = Field(default_factory=dict, description="The tool's arguments.")


def json_action_schema(tool_names: list[str]) -> dict[str, Any]:
    """JSON schema restricting ``tool`` to the allowed names (grammar-constrained servers obey it)."""
    return {
        "type": "object",
        "properties": {
            "thought": {"type": "string"},
            "tool": {"type": "string", "enum": [*tool_names, FINISH]},
            "args": {"type": "object"},
        },
        "required": ["thought", "tool", "args"],
        "additionalProperties": False,
    }


_FENCE = re.compile(r"^```[\w+-]*[^\S\n]*\n?|```\s*$")


def strip_fence(text: str | None) -> str:
    """``text`` without one surrounding fenced block (```` ```json ... ``` ````), stripped; the one
    fence stripper of the kit (JSON actions, structured answers, reports)."""
    text = (text or "").strip()
    return _FENCE.sub("", text).strip() if text.startswith("```") else text


#: Deepest nesting accepted in JSON an agent sends (tool arguments, actions, answers): deeper input
#: would overflow the parser or a later walk of it (RecursionError) inside the kit's own process.
MAX_JSON_DEPTH = 64


def load_json(text: str) -> Any:
    """JSON a model sent, parsed; ``ValueError`` for anything the kit cannot use -- malformed, or
    nested deeper than :data:`MAX_JSON_DEPTH` (which ``json.loads`` may answer with RecursionError)."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels") from None
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list):
            if depth > MAX_JSON_DEPTH:
                raise ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
            items = value.values() if isinstance(value, dict) else value
            stack.extend((v, depth + 1) for v in items if isinstance(v, dict | list))
    return encodable(data)


def parse_json_action(content: str | None, allowed: list[str]) -> Action:
    text = strip_fence(content)
    try:
        data = load_json(text)
    except ValueError:
        raise format_error("json_not_object") from None
    if not isinstance(data, dict) or not isinstance(data.get("tool"), str):
        raise format_error("json_no_tool")
    args = data.get("args") or {}
    if not isinstance(args, dict):
        raise format_error("json_args_not_object")
    tool = data["tool"].strip()
    if not tool:
        raise format_error("json_empty_tool", tools=", ".join([*allowed, FINISH]))
    return Action(tool, args)


# --------------------------------------------------------------------------- text actions

_BLOCK = re.compile(r"```([^\n`]*)\n(.*?)```", re.DOTALL)
_OPEN_BLOCK = re.compile(r"```([^\n`]*)\n(.*)\Z", re.DOTALL)  # cut off by the output-token cap
_PYTHON = {"python", "py", "python3"}
_SHELL = {"bash", "sh", "shell", "console", "zsh"}
_DONE = re.compile(r"^\s*(DONE|FINISHED|TASK COMPLETE)\b", re.MULTILINE | re.IGNORECASE)


def _looks_like_path(token: str) -> bool:
    return bool(re.fullmatch(r"[\w./-]+\.\w+", token)) or "/" in token


def parse_text_action(content: str | None, allowed: list[str]) -> Action:
    text = content or ""
    blocks = _BLOCK.findall(text) or _OPEN_BLOCK.findall(text)
    if not blocks:
        if _DONE.search(text):
            return Action(FINISH, {"summary": text.strip()})
        raise format_error("text_no_action")
    info, body = blocks[0]
    words = info.strip().split()
    lang = words[0].lower() if words else ""
    if lang == "tool":
        if len(words) < 2:
            raise format_error("text_tool_no_name")
        try:
            args = load_json(body) if body.strip() else {}
        except ValueError:
            raise format_error("text_tool_bad_args") from None
        if not isinstance(args, dict):
            raise format_error("text_tool_bad_args")
        return Action(words[1], args)
    if lang in _SHELL:
        return Action("run", {"command": body.strip()})
    paths = [w for w in words[1:] if _looks_like_path(w)] or (
        [words[0]] if words and _looks_like_path(words[0]) else []
    )
    if paths:
        return Action("write_file", {"path": paths[0].removeprefix("path="), "content": body})
    if lang in _PYTHON:  # no path: replace the definitions it holds wherever they are defined
        return Action("replace_definitions", {"code": body})
    if lang == "json":
        try:
            data = load_json(body)
        except ValueError:
            data = None
        if isinstance(data, dict):
            return Action(FINISH, data)
    raise format_error("text_not_an_action", info=info.strip() or "(no language)")


# --------------------------------------------------------------------------- tool-less roles


def tool_attempt(content: str | None) -> Action | None:
    """A tool call written into the answer of a role that has no tools, in either written form
    (the JSON action object, or a fenced text-mode action block); None when the reply is an answer
    (a JSON action naming ``finish`` comes back as the finish action carrying the answer).
    The agent executes it anyway so the toolbox denies it and the denial is counted."""
    text = (content or "").strip()
    body = strip_fence(text)
    try:
        data = load_json(body)
    except ValueError:
        data = None
    if isinstance(data, dict):  # an answer, unless it is shaped as a JSON action naming a tool
        tool, args = data.get("tool"), data.get("args", {})
        if set(data) <= {"thought", "tool", "args"} and isinstance(tool, str) and isinstance(args, dict):
            return Action(tool.strip(), args) if tool.strip() else None  # finish: its args are the answer
        return None
    if not _BLOCK.search(text) and not _OPEN_BLOCK.search(text):
        return None
    try:
        action = parse_text_action(text, [])
    except FormatError:
        return None
    return None if action.tool == FINISH else action


# --------------------------------------------------------------------------- rendering


def render(mode: Mode, tool: str, args: dict[str, Any] | None = None, thought: str = "") -> dict[str, Any]:
    """What a model would reply to perform ``tool(args)`` in ``mode`` (a scripted-reply dict)."""
    args = args or {}
    if mode == "native":
        if tool == FINISH:
            return (
                {"content": args.get("summary", thought or "Done.")}
                if set(args) <= {"summary"}
                else {"tool_calls": [{"name": FINISH, "arguments": args}]}
            )
        return {"content": thought, "tool_calls": [{"name": tool, "arguments": args}]}
    if mode == "json":
        return {"content": json.dumps({"thought": thought, "tool": tool, "args": args})}
    # text
    if tool == FINISH:
        if set(args) <= {"summary"}:
            return {"content": f"{thought}\nDONE"}
        return {"content": f"{thought}\n```json\n{json.dumps(args)}\n```"}
    if tool == "run":
        return {"content": f"{thought}\n```bash\n{args['command']}\n```"}
    if tool == "write_file":
        body = args["content"] if args["content"].endswith("\n") else args["content"] + "\n"
        return {"content": f"{thought}\n```text {args['path']}\n{body}```"}
    return {"content": f"{thought}\n```tool {tool}\n{json.dumps(args)}\n```"}


def text_mode_help(
    allowed: list[str], result_fields: list[str] | None = None, book: PromptBook = MESSAGES
) -> str:
    """The part of the system prompt that teaches the text action format (kit/prompts/agent/text_help*.md).
    With ``result_fields`` the agent finishes by giving its result as a ```json block instead of
    saying DONE."""
    lines = [message(book, "text_help")]
    for tool in ("run", "write_file", "replace_definitions"):
        if tool in allowed:
            lines.append(message(book, f"text_help_{tool}"))
    others = [t for t in allowed if t not in ("run", "write_file", "replace_definitions")]
    if others:
        lines.append(message(book, "text_help_other_tools", tools=", ".join(others)))
    if result_fields:
        example = ", ".join(f'"{f}": ...' for f in result_fields)
        lines.append(message(book, "text_help_finish_result", example=example))
    else:
        lines.append(message(book, "text_help_finish"))
    return "\n".join(lines)


def json_mode_help(
    allowed: list[str], result_fields: list[str] | None = None, book: PromptBook = MESSAGES
) -> str:
    """The part of the system prompt that teaches the JSON action format (kit/prompts/agent/json_help.md)."""
    finish_args = ", ".join(f'"{f}": ...' for f in result_fields) if result_fields else '"summary": "..."'
    return message(book, "json_help", tools=", ".join(allowed), finish_args=finish_args)
