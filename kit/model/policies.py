"""Built-in scripted policies, usable by name as ``scripted/<name>`` in a profile.

They validate the pipeline end to end (tests, CI notebooks); they are not models and their runs
are never benchmark results.

* ``oracle`` -- writes the task's reference solution through ``write_file`` actions, runs the
  repo's tests, then says it is done. Scores 0 defects when the pipeline is right.
* ``done``   -- says it is done straight away. Scores every requirement as a defect, and is
  "claimed done but failed".

Both speak whichever action mode the agent uses (native tool calls, JSON actions or text blocks)
and are stateless: the step is read from the conversation, so they are safe under concurrency.
An optional latency (``ORCHBENCH_SCRIPTED_LATENCY_S``) makes them look like a slow model.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kit.model.actions import FINISH, render
from kit.model.script_io import Request
from kit.paths import is_ignored


def _latency() -> float:
    return float(os.environ.get("ORCHBENCH_SCRIPTED_LATENCY_S") or 0.0)


def _mode(request: Request) -> str:
    return request.context.get("action_mode") or ("native" if request.tools else "json")


def _said(request: Request, needle: str) -> int:
    """How many assistant turns of this conversation mention ``needle`` (content or tool calls)."""
    return sum(
        needle in str(m.get("content") or "") + str(m.get("tool_calls") or "")
        for m in request.messages
        if m.get("role") == "assistant"
    )


def solution_files(task_path: str | None) -> list[tuple[str, str]]:
    if not task_path:
        return []
    root = Path(task_path) / "solution"
    return [
        (str(p.relative_to(root)), p.read_text(encoding="utf-8"))
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "DELETED.txt" and not is_ignored(p.relative_to(root))
    ]


def oracle(request: Request) -> dict[str, Any]:
    mode = _mode(request)
    if request.context.get("schema") is not None and not request.tools and mode != "text":
        return {"content": "{}", "latency_s": _latency()}  # a structured question it cannot answer
    files = solution_files(request.context.get("task_path"))
    written = sum(_said(request, f"Write {path}.") > 0 for path, _ in files)
    test_command = request.context.get("test_command")
    if written < len(files):
        path, content = files[written]
        reply = render(mode, "write_file", {"path": path, "content": content}, f"Write {path}.")
    elif test_command and not _said(request, "Run the tests."):
        reply = render(mode, "run", {"command": test_command}, "Run the tests.")
    else:
        reply = render(mode, FINISH, {"summary": "Implemented the change and ran the tests."}, "Done.")
    return {**reply, "latency_s": _latency()}


def done(request: Request) -> dict[str, Any]:
    return {**render(_mode(request), FINISH, {"summary": "Done."}, "Done."), "latency_s": _latency()}


POLICIES: dict[str, Callable[[], Callable[[Request], Any]]] = {
    "oracle": lambda: oracle,
    "done": lambda: done,
}
