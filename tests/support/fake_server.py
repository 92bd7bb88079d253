"""A fake Anthropic server to try the kit by hand, as a new user would, with no key and no network:

    PYTHONPATH=. .venv/bin/python -m tests.support.fake_server [--port 8765]

It prints its URL and serves until Ctrl-C. Every call is answered by a scripted policy through
litellm's real Anthropic code (:mod:`tests.support.fake_providers`): vibe's and linear's coder write the
task's reference solution, run its tests and say done (the oracle); pdca's roles play the cast of
:mod:`tests.support.pdca` (a plan, an executor that applies the solution, a passing CHECK). The task
is recognised by its prompt in the conversation's first user message. Point a profile at it with
``--api-base URL`` (and any ``ANTHROPIC_API_KEY``), or a profile whose tiers set ``api_base``.

Not a benchmark: the numbers are the fake's (4 characters a token), for trying the pipeline only.
"""

from __future__ import annotations

import argparse
import re
import threading
import time
from pathlib import Path
from typing import Any

from kit.model import policies
from kit.paths import TASKS_DIR
from kit.tasks.task import load_task
from tests.support.fake_providers import FakeAnthropic, WireRequest, role_phrases
from tests.support.pdca import Cast

#: pdca's roles, each told by its prompt (the status writer's file is status_writer.md)
PDCA_ROLES = ["orchestrator", "scout", "analyst", "auditor", "expert", "executor", "status_writer"]


def _code_files(repo: Path) -> set[str]:
    """The names a brief may use for a task's own code: each .py file's path and name (not package
    markers, conftests or test files, which every task has alike)."""
    out: set[str] = set()
    for f in repo.rglob("*.py"):
        rel = f.relative_to(repo)
        if f.name not in ("__init__.py", "conftest.py") and not f.name.startswith("test_"):
            out |= {rel.as_posix(), f.name}
    return out


class Responder:
    """Picks the task from the first user message and the role from the system prompt, then asks the
    role's policy (a new pdca cast for each run: a run is one orchestrator conversation)."""

    def __init__(self) -> None:
        self.tasks = [load_task(p.name) for p in sorted(TASKS_DIR.iterdir()) if (p / "task.yaml").is_file()]
        self.phrases = {**role_phrases("pdca", PDCA_ROLES), **role_phrases("vibe", ["coder"])}
        self.files = {t.id: _code_files(t.path / "repo") for t in self.tasks}
        self.casts: dict[str, Cast] = {}
        self.handed: dict[str, set[str]] = {}  # each brief an orchestrator wrote -> the tasks it was for
        self.lock = threading.Lock()
        self.index = 0

    def _task(self, request: WireRequest) -> Any:
        """The task whose prompt the conversation quotes; else the task of the orchestrator whose brief it
        is (a pdca sub-agent's brief quotes no prompt); else the one it names (a status update: ``task:
        micro-slugify``); else the one whose code files it names most. The first task only when nothing
        tells them apart."""
        text = " ".join(str(m.get("content")) for m in request.messages if m["role"] == "user")
        quoted = [t for t in self.tasks if t.prompt.strip()[:200] in text]
        with self.lock:
            ids = {i for brief, owners in self.handed.items() if brief in text for i in owners}
        handed = [t for t in self.tasks if t.id in ids]
        named = [t for t in self.tasks if re.search(rf"(?<![\w-]){re.escape(t.id)}(?![\w-])", text)]
        hits = {t.id: sum(bool(re.search(rf"(?<![\w.-]){re.escape(f)}\b", text)) for f in self.files[t.id])
                for t in self.tasks}  # fmt: skip
        best = max(hits.values(), default=0)
        by_files = [t for t in self.tasks if best and hits[t.id] == best]
        for found in (quoted, handed, named, by_files):
            if len(found) == 1:
                return found[0]
        return self.tasks[0]

    def __call__(self, request: WireRequest) -> dict[str, Any]:
        from kit.model import scripted

        system = request.system
        role = next((r for r, phrase in self.phrases.items() if phrase in system), "coder")
        task = self._task(request)
        tools = [t for t in request.tools or [] if t["function"]["name"] != request.forced_tool] or None
        structured = bool(
            request.forced_tool or request.body.get("output_format") or request.body.get("response_format")
        )
        context = {"task_path": str(task.path), "test_command": task.test_command, "role": role,
                   "conversation": role, "action_mode": "native", "schema": True if structured and not tools else None}  # fmt: skip
        with self.lock:
            self.index += 1
            index = self.index
            if role == "orchestrator" and sum(m["role"] == "user" for m in request.messages) == 1:
                self.casts[task.id] = Cast(task_tests=True)
            cast = self.casts.setdefault(task.id, Cast(task_tests=True))
        req = scripted.Request(
            messages=list(request.messages), tools=tools, response_format=request.body.get("response_format"),
            context=context, index=index,
        )  # fmt: skip
        policy = cast if role in PDCA_ROLES else policies.oracle
        reply = scripted.to_reply(policy(req))
        if role == "orchestrator" and reply.content and reply.content.strip():
            with self.lock:
                self.handed.setdefault(reply.content.strip(), set()).add(task.id)
        time.sleep(0.05)  # a model takes some time: the progress bar has something to show
        return {"content": reply.content, "tool_calls": reply.tool_calls}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    args = ap.parse_args()
    server = FakeAnthropic(Responder(), port=args.port)
    with server:
        print(server.url, flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
