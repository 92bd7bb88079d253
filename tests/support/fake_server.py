"""A fake Anthropic server to try the kit by hand, as a new user would, with no key and no network:

    PYTHONPATH=. .venv/bin/python -m tests.support.fake_server [--port 8765] [--tasks my-tasks ...]

It prints its URL and serves until Ctrl-C. Every call is answered through litellm's real Anthropic code
(:mod:`tests.support.fake_providers`: the request rules enforced, prompt caching simulated with each
model's minimum) by the oracle the ``oracle`` profile runs in process (:mod:`kit.model.oracle`): the
task's reference solution played through every strategy's roles -- vibe's coder and workflow's
implementer write it and say done, linear does each step, pdca's cast plans with every field, applies it
and passes CHECK, workflow's analyzers report clean, harness's initializer writes a feature list and a
coder session applies the solution and flips it. So every strategy's run should end done and solved, on
any task the server knows: the shipped ones, and every task folder ``--tasks`` names (a task folder, or
a folder of them: ``kit tasks import-git --out my-tasks``). The task is recognised by its prompt in the
conversation (a pdca sub-agent's by the brief its orchestrator wrote), the strategy and role by the
system prompt. Point a profile at it with ``--api-base URL`` (and any ``ANTHROPIC_API_KEY``).

Not a benchmark: the numbers are the fake's (4 characters a token), for trying the pipeline only.
"""

from __future__ import annotations

import argparse
import re
import threading
import time
from pathlib import Path
from typing import Any

from kit.model.oracle import Oracle
from kit.paths import TASKS_DIR
from kit.tasks.task import Task, load_task
from tests.support.fake_providers import FakeAnthropic, WireRequest, role_phrases

#: pdca's roles, each told by its prompt (the status writer's file is status_writer.md)
PDCA_ROLES = ["orchestrator", "scout", "analyst", "auditor", "expert", "executor", "status_writer"]
#: strategy -> its roles with a system prompt of their own (vibe's coder, linear's coder and workflow's
#: implementer share one first line: told apart by linear's step messages, and played alike otherwise)
ROLES = {
    "pdca": PDCA_ROLES,
    "vibe": ["coder"],
    "linear": ["reviewer"],
    "workflow": ["analyzer", "refuter", "editor"],
    "harness": ["system"],
}
LINEAR_STEP = re.compile(r"^Step \d+ of \d+: ", re.MULTILINE)


def _code_files(repo: Path) -> set[str]:
    """The names a brief may use for a task's own code: each .py file's path and name (not package
    markers, conftests or test files, which every task has alike)."""
    out: set[str] = set()
    for f in repo.rglob("*.py"):
        rel = f.relative_to(repo)
        if f.name not in ("__init__.py", "conftest.py") and not f.name.startswith("test_"):
            out |= {rel.as_posix(), f.name}
    return out


def _text(content: Any) -> str:
    """A message's text: a string as is, content blocks (the newest message carries its cache breakpoint
    in one) joined -- never their repr, whose escaped newlines no brief would match."""
    if isinstance(content, list):
        return "\n".join(_text(b.get("text") if isinstance(b, dict) else b) for b in content)
    return "" if content is None else str(content)


def find_tasks(folders: list[Path]) -> list[Task]:
    """The shipped tasks, then each folder's: a task folder (task.yaml), or a folder of task folders."""
    found = [p for p in sorted(TASKS_DIR.iterdir()) if (p / "task.yaml").is_file()]
    for folder in folders:
        found += (
            [folder]
            if (folder / "task.yaml").is_file()
            else sorted(p.parent for p in folder.glob("*/task.yaml"))
        )
    tasks = [load_task(p if p.parent != TASKS_DIR else p.name) for p in found]
    return list({t.path.resolve(): t for t in tasks}.values())


class Responder:
    """Picks the task from the conversation and the strategy and role from the system prompt, then asks
    the oracle (a new pdca cast for each run: a run is one orchestrator conversation)."""

    def __init__(self, tasks: list[Path] | None = None) -> None:
        self.tasks = find_tasks([Path(t) for t in tasks or []])
        phrases = {
            (st, role): phrase
            for st, roles in ROLES.items()
            for role, phrase in role_phrases(st, roles).items()
        }
        self.phrases = sorted(phrases.items(), key=lambda kv: -len(kv[1]))  # longest first: editor, coder
        self.files = {t.id: _code_files(t.path / "repo") for t in self.tasks}
        self.oracle = Oracle()
        self.handed: dict[str, set[str]] = {}  # each brief an orchestrator wrote -> the tasks it was for
        self.lock = threading.Lock()
        self.index = 0

    def _task(self, request: WireRequest) -> Any:
        """The task whose prompt the conversation quotes; else the task of the orchestrator whose brief it
        is (a pdca sub-agent's brief quotes no prompt); else the one it names (a status update: ``task:
        micro-slugify``); else the one whose code files it names most. The first task only when nothing
        tells them apart."""
        text = " ".join(_text(m.get("content")) for m in request.messages if m["role"] == "user")
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

    def _who(self, request: WireRequest) -> tuple[str, str]:
        """(strategy, role) from the system prompt and, for linear and harness, the first user message."""
        strategy, role = next(
            (key for key, phrase in self.phrases if phrase in request.system), ("vibe", "coder")
        )
        first = next((_text(m.get("content")) for m in request.messages if m["role"] == "user"), "")
        if (strategy, role) == ("vibe", "coder") and LINEAR_STEP.search(" ".join(
                _text(m.get("content")) for m in request.messages if m["role"] == "user")):  # fmt: skip
            strategy = "linear"
        if strategy == "harness":
            role = "initializer" if "you are the initializer" in first else "coder"
        return strategy, role

    def __call__(self, request: WireRequest) -> dict[str, Any]:
        from kit.model import scripted

        strategy, role = self._who(request)
        task = self._task(request)
        tools = [t for t in request.tools or [] if t["function"]["name"] != request.forced_tool] or None
        structured = bool(
            request.forced_tool or request.body.get("output_format") or request.body.get("response_format")
        )
        context = {"task_path": str(task.path), "test_command": task.test_command, "role": role,
                   "strategy": strategy, "run_id": task.id, "conversation": role, "action_mode": "native",
                   "schema": True if structured and not tools else None}  # fmt: skip
        with self.lock:
            self.index += 1
            index = self.index
        if role == "orchestrator" and sum(m["role"] == "user" for m in request.messages) == 1:
            self.oracle.cast(task.id, fresh=True)  # a new pdca run of this task
        req = scripted.Request(
            messages=list(request.messages), tools=tools, response_format=request.body.get("response_format"),
            context=context, index=index,
        )  # fmt: skip
        reply = scripted.to_reply(self.oracle(req))
        if role == "orchestrator" and reply.content and reply.content.strip():
            with self.lock:
                self.handed[reply.content.strip()] = {task.id}  # the latest run that wrote it
        time.sleep(0.05)  # a model takes some time: the progress bar has something to show
        return {"content": reply.content, "tool_calls": reply.tool_calls}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    ap.add_argument(
        "--tasks", nargs="*", default=[], help="task folders, or folders of them, beside the shipped tasks"
    )
    args = ap.parse_args()
    server = FakeAnthropic(Responder(args.tasks), port=args.port)
    with server:
        print(server.url, flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
