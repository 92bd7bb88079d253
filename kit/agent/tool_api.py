"""What a tool is and what it may use: the :class:`ToolHost` interface (the clone, its limits, the
containment helpers), the result and refusal types, and the ``TOOLS`` registry that ``@tool`` fills.
The tools themselves are in :mod:`kit.agent.tools`; :class:`kit.agent.toolbox.Toolbox` implements
:class:`ToolHost`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from kit.agent import safefs
from kit.sandbox.backends import Sandbox
from kit.sandbox.throwaway import Writable


class ToolHost(Protocol):
    """What a tool may use: the clone, its limits, and the containment helpers. The toolbox
    (:class:`kit.agent.toolbox.Toolbox`) implements it; a tool sees nothing else of the kit."""

    root: Path  # the clone, resolved
    sandbox: Sandbox  # where commands (and searches) run
    writable: Writable  # True: the role may write; "throwaway": exec without write (Toolbox.writable)
    timeout_s: float  # the experiment's per-command limit
    max_read_bytes: int
    max_output_chars: int
    env: dict[str, str]  # added to the sandbox's environment of every command (the task's PYTHONPATH)

    def resolve(self, path: str, *, write: bool = False) -> Path:
        """``path`` inside the clone, or raise Refused (absolute, ``..``, a symlink out, under .git)."""

    def inside(self, target: Path) -> Path:
        """``target`` (already resolved, inside the clone) relative to the clone's root."""

    def rel(self, p: Path) -> str:
        """``p`` as the model should see it (relative to the clone)."""

    def deadline(self) -> safefs.Deadline:
        """A fresh deadline for one call (the step's time limit)."""

    def step_timeout(self, requested: float | None) -> float:
        """The command timeout: the agent's request may only lower the experiment's."""


@dataclass
class ToolSpec:
    name: str
    description: str
    parameters: dict  # JSON schema of the args object


@dataclass
class ToolResult:
    ok: bool
    output: str  # what the model sees
    denied: bool = False
    exit_code: int | None = None  # the run tool's exit code; None when killed on timeout or not run
    timed_out: bool = False  # the run tool killed the command after its timeout


class Refused(Exception):
    """A containment refusal (path outside the clone, write under .git): counted as denied."""


class BadArgs(Exception):
    """Arguments the tool cannot use: a tool error for the agent, saying what was expected."""


@dataclass(frozen=True)
class Tool:
    name: str
    permission: str  # read | write | exec
    description: str
    parameters: dict  # JSON schema of the args object
    run: Callable[..., ToolResult]  # run(box, **args)


#: name -> tool, in the order the agent sees them.
TOOLS: dict[str, Tool] = {}


def tool(
    name: str, permission: str, description: str, props: dict[str, dict], required: list[str]
) -> Callable[[Callable[..., ToolResult]], Callable[..., ToolResult]]:
    """Register the decorated function as the tool ``name``."""
    schema = {"type": "object", "properties": props, "required": required, "additionalProperties": False}

    def register(fn: Callable[..., ToolResult]) -> Callable[..., ToolResult]:
        TOOLS[name] = Tool(name, permission, description, schema, fn)
        return fn

    return register
