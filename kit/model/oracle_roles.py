"""The oracle's roles for vibe, linear, workflow and harness, and what every role shares: the reference
solution as actions and the proving command (:mod:`kit.model.oracle` has the whole picture)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import yaml

from kit.model.actions import FINISH, render
from kit.model.policies import solution_files
from kit.model.script_io import Request, text_of

FEATURES = "feature_list.json"
COMMIT = "git add -A && git -c user.name=oracle -c user.email=oracle@example.com commit -qm"
STEP_HEADER = re.compile(r"^Step (\d+) of (\d+): ", re.MULTILINE)


def _mode(request: Request) -> str:
    return request.context.get("action_mode") or ("native" if request.tools else "json")


def _steps(request: Request) -> int:
    return sum(m.get("role") == "assistant" for m in request.messages)


def deleted_files(task_path: str | None) -> list[str]:
    """The files the reference change deletes (``solution/DELETED.txt``: one a line, split at
    ``\\n`` only and taken exactly, empty lines and lines starting with ``#`` left out)."""
    listed = Path(task_path or "") / "solution" / "DELETED.txt"
    if not task_path or not listed.is_file():
        return []
    if listed.stat().st_size > 1024 * 1024:  # (kit.untrusted.confine.MAX_LISTING_BYTES: validate refuses it)
        return []
    text = listed.read_text(encoding="utf-8")  # (read as kit.tasks.task.deleted_lines reads it)
    return [line for line in text.split("\n") if line and not line.startswith("#")]


def proving_command(context: dict[str, Any]) -> str:
    """The task's test command less the own tests it deselects."""
    test = context.get("test_command") or "python -m pytest -q"
    task_yaml = Path(context.get("task_path") or "") / "task.yaml"
    data = yaml.safe_load(task_yaml.read_text(encoding="utf-8")) if task_yaml.is_file() else None
    deselect = (data or {}).get("own_tests_deselect") or []
    return " ".join([test, *(f"--deselect={shlex.quote(str(n))}" for n in deselect)])


def apply_actions(context: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The solution as actions: one ``write_file`` per file, one ``run`` that deletes what it deletes."""
    task_path = context.get("task_path")
    out = [("write_file", {"path": p, "content": c}) for p, c in solution_files(task_path)]
    gone = deleted_files(task_path)
    if gone:
        out.append(("run", {"command": "rm -rf -- " + " ".join(shlex.quote(p) for p in gone)}))
    return out


def _first_file(context: dict[str, Any]) -> str:
    files = solution_files(context.get("task_path"))
    return files[0][0] if files else "."


def _play(request: Request, plan: list[tuple[str, dict[str, Any]]], summary: str) -> dict[str, Any]:
    """The plan's next action by the number of turns so far, then finish."""
    step = _steps(request)
    if step < len(plan):
        tool, args = plan[step]
        return render(_mode(request), tool, args, f"{tool} ({step + 1} of {len(plan)})")
    return render(_mode(request), FINISH, {"summary": summary}, summary)


def vibe(request: Request) -> dict[str, Any]:
    """vibe's coder (and workflow's implementer): apply, test, done."""
    plan = [*apply_actions(request.context), ("run", {"command": proving_command(request.context)})]
    return _play(request, plan, "Implemented the change and ran the tests.")


def linear(request: Request) -> dict[str, Any]:
    """linear: the current step's work (the step header of the newest step message), then end it."""
    mode = _mode(request)
    if request.context.get("role") == "reviewer":
        return render(mode, FINISH, {"issues": []}, "Nothing to report.")
    number, calls = 0, 0
    for m in reversed(request.messages):
        if m.get("role") == "assistant":
            calls += 1
        elif m.get("role") == "user" and (found := STEP_HEADER.search(text_of(m.get("content")))):
            number = int(found.group(1))
            break
    todo = {
        2: [("read_file", {"path": _first_file(request.context)})],
        3: [("write_file", {"path": "PLAN.md", "content": "1. make the change\n2. test it\n"})],
        4: apply_actions(request.context),
        5: [("run", {"command": proving_command(request.context)})],
        6: [("run", {"command": "git diff --stat"})],
    }.get(number, [])
    if calls < len(todo):
        tool, args = todo[calls]
        return render(mode, tool, args, f"step {number} action {calls + 1}")
    return render(mode, FINISH, {"summary": f"step {number} complete"}, f"End of step {number}.")


def workflow(request: Request) -> dict[str, Any]:
    """workflow: the implementer applies the solution; analyzers report clean; skeptics refute."""
    role, mode = request.context.get("role", ""), _mode(request)
    if role == "analyzer":
        return render(mode, FINISH, {"verdict": "clean", "issues": []}, "Reviewed: clean.")
    if role == "refuter":
        return render(mode, FINISH, {"confirmed": False, "reason": "the change is the reference"}, "Checked.")
    if role == "editor":
        return render(mode, FINISH, {"summary": "Nothing to fix."}, "Done.")
    return _play(request, apply_actions(request.context), "Implemented.")


def _feature(context: dict[str, Any], passes: bool) -> str:
    feature = {"id": "F1", "category": "functional", "description": "the task is done as specified",
               "steps": [proving_command(context)], "passes": passes}  # fmt: skip
    return json.dumps([feature], indent=2)


def harness(request: Request) -> dict[str, Any]:
    """harness: the initializer's four actions, or a coder session's (apply, test, flip, commit)."""
    context = request.context
    test = proving_command(context)
    if context.get("role") == "initializer" or "you are the initializer" in request.first_user:
        plan = [
            ("write_file", {"path": FEATURES, "content": _feature(context, False)}),
            ("write_file", {"path": "init.sh", "content": f"#!/bin/sh\n{test}\n"}),
            ("write_file", {"path": "harness-progress.md", "content": "# Progress\n- initializer\n"}),
            ("run", {"command": f"{COMMIT} 'harness: feature list'"}),
        ]
    else:
        plan = [
            *apply_actions(context),
            ("run", {"command": test}),
            ("write_file", {"path": FEATURES, "content": _feature(context, True)}),
            ("run", {"command": f"echo '- coder: F1 done' >> harness-progress.md && {COMMIT} F1"}),
        ]
    return _play(request, plan, "Done.")
