"""Validating a task's contract on a fresh workspace: its own tests pass at the start, every acceptance
test fails at the start (unless marked ``@pytest.mark.baseline_pass``), and with the reference solution
applied every acceptance and own test passes."""

from __future__ import annotations

import ast
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel, Field

from kit.errors import KitError
from kit.paths import is_ignored
from kit.tasks.requirements import test_files
from kit.tasks.scoring.scorer import evaluate
from kit.tasks.task import Task, apply_solution
from kit.tasks.workspace import create_workspace


class ValidationReport(BaseModel):
    task_id: str
    ok: bool
    problems: list[str] = Field(default_factory=list)
    durations: dict[str, float] = Field(default_factory=dict)


def validate_task(task: Task, sandbox: str | None = None) -> ValidationReport:
    """Check the task contract on a fresh workspace (see the module docstring); ``sandbox`` is the
    scoring sandbox (``bwrap`` or ``none``; default the platform's)."""
    problems: list[str] = []
    durations: dict[str, float] = {}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="orchbench-validate-") as tmp:
        try:
            t = time.monotonic()
            ws = create_workspace(task, Path(tmp) / "repo")
            durations["workspace_s"] = time.monotonic() - t

            problems += uncollected_test_files(task)
            t = time.monotonic()
            start = evaluate(task, ws.root, ws, sandbox=sandbox)
            durations["start_s"] = time.monotonic() - t
            problems += start.problems
            if start.tampered or start.unscored_reason:
                problems.append(f"scoring the start failed: {start.unscored_reason or start.tampered}")
            if not start.own.complete or start.own_failed:
                problems.append(
                    f"own tests fail at the start: {', '.join(start.own_failed) or _tail(start.own)}"
                )
            if not start.own.outcomes:
                problems.append("own tests: none ran at the start")
            for req in start.requirements:
                passed, _ = start.results[req.key]
                if passed and not req.baseline_pass:
                    problems.append(
                        f"acceptance test passes at the start: {req.key} "
                        "(mark it @pytest.mark.baseline_pass if that is intended)"
                    )

            if not task.solution_dir.is_dir():
                problems.append("no solution/ folder")
            else:
                t = time.monotonic()
                apply_solution(task, ws.root)
                end = evaluate(task, ws.root, ws, sandbox=sandbox)
                durations["solution_s"] = time.monotonic() - t
                for req in end.failed_requirements:
                    problems.append(
                        f"with the solution, acceptance test fails: {req.key}: {end.results[req.key][1]}"
                    )
                if end.acceptance.errors:
                    problems.append(
                        f"with the solution, acceptance run errors: {'; '.join(end.acceptance.errors)}"
                    )
                if end.tampered or end.unscored_reason:
                    problems.append(f"scoring the solution failed: {end.unscored_reason or end.tampered}")
                if end.suspicious:  # the audit hook must not see legitimate code as introspection
                    problems.append(f"with the solution, scoring saw introspection: {end.suspicious[:3]}")
                if not end.own.complete or end.own_failed:
                    problems.append(
                        f"with the solution, own tests fail: {', '.join(end.own_failed) or _tail(end.own)}"
                    )
        except KitError as e:
            problems.append(str(e))
    durations["total_s"] = time.monotonic() - started
    durations = {k: round(v, 3) for k, v in durations.items()}
    return ValidationReport(task_id=task.id, ok=not problems, problems=problems, durations=durations)


def uncollected_test_files(task: Task) -> list[str]:
    """Python files under acceptance/ that define ``test*`` functions but that pytest would never
    collect (their name is not ``test_*.py`` / ``*_test.py``): requirements that silently never run."""
    collected = set(test_files(task.acceptance_dir))
    problems = []
    for path in sorted(task.acceptance_dir.rglob("*.py")):
        if (
            path in collected
            or path.name == "conftest.py"
            or is_ignored(path.relative_to(task.acceptance_dir))
        ):
            continue
        try:
            tree = ast.parse(path.read_bytes())
        except (SyntaxError, ValueError):
            continue  # not a test file by name; its import errors show when a test file imports it
        if any(isinstance(n, ast.FunctionDef) and n.name.startswith("test") for n in ast.walk(tree)):
            rel = path.relative_to(task.acceptance_dir).as_posix()
            problems.append(
                f"acceptance/{rel} defines tests but pytest will not collect it (name it test_*.py)"
            )
    return problems


def _tail(run) -> str:  # noqa: ANN001 - a kit.tasks.scoring.scorer.PytestRun
    lines = [ln for ln in run.output.strip().splitlines() if ln.strip()]
    return f"exit code {run.exit_code}: {lines[-1] if lines else '(no output)'}"
