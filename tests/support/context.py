"""The one way a test builds a RunContext: a fresh clone of a task, a recorder, a gateway on a profile."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kit.agent.budget import Budget
from kit.config import Limits, PriceSheet, Profile
from kit.model.gateway import Gateway
from kit.prompts import PromptBook
from kit.records.recorder import RunRecorder
from kit.strategies.context import RunContext
from kit.tasks.task import Task, load_task
from kit.tasks.workspace import create_workspace


def run_context(
    root: Path,
    strategy: str,
    profile: Profile,
    sheet: PriceSheet,
    *,
    task: Task | str = "micro-slugify",
    run_id: str = "r1",
    records: str = "run",
    gateway_context: dict[str, Any] | None = None,
    limits: Limits | None = None,
    options: dict[str, Any] | None = None,
    budget: dict[str, Any] | None = None,
    overrides: dict[str, str] | None = None,
    journal_dir: Path | None = None,
    **gateway_options: Any,
) -> RunContext:
    """A RunContext for ``strategy`` with its clone in ``root/repo`` and its records in ``root/<records>``.

    ``gateway_context`` is what the scripted model sees of the run (``task_path``, ``workspace`` ...;
    the keys ``task_path``, ``workspace`` and ``test_command`` may be given as ``...`` to be filled in);
    ``budget`` holds the run budget's caps (``{}`` for a budget with none, None for no budget at all);
    ``gateway_options`` go to the Gateway (``max_retries``, ``sleep``)."""
    task = load_task(task) if isinstance(task, str) else task
    workspace = create_workspace(task, root / "repo")
    recorder = RunRecorder(root / records, run_id)
    known = {"task_path": str(task.path), "workspace": str(workspace.root), "test_command": task.test_command}
    context = (
        {k: known[k] if v is ... else v for k, v in gateway_context.items()} if gateway_context else None
    )
    return RunContext(
        task=task,
        workspace=workspace,
        gateway=Gateway(profile, sheet, recorder, context=context, **gateway_options),
        recorder=recorder,
        profile=profile,
        prompts=PromptBook(strategy, overrides),
        limits=limits or Limits(),
        options=dict(options or {}),
        budget=Budget(recorder, **budget) if budget is not None else None,
        journal_dir=journal_dir,
    )
