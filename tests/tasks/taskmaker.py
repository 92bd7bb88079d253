"""Small task folders the scoring tests write themselves (no third-party code): a repo, its hidden
tests and a reference solution, each given as ``{relative path: source}``."""

from __future__ import annotations

import textwrap
from pathlib import Path

import yaml

from kit.tasks.task import Task, apply_solution, load_task
from kit.tasks.workspace import Workspace, create_workspace


def write_tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")


def make_task(
    folder: Path,
    repo: dict[str, str],
    acceptance: dict[str, str],
    solution: dict[str, str] | None = None,
    **fields: object,
) -> Task:
    """A task folder at ``folder`` (task.yaml from ``fields`` over a minimal default), loaded."""
    spec = {"id": folder.name, "title": "t", "prompt": "p", "limits": {"scoring_timeout_s": 60}}
    spec.update(fields)
    folder.mkdir(parents=True)
    (folder / "task.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    write_tree(folder / "repo", repo)
    write_tree(folder / "acceptance", acceptance)
    write_tree(folder / "solution", solution or {})
    return load_task(folder)


def workspace(task: Task, tmp_path: Path, solved: bool = True) -> Workspace:
    ws = create_workspace(task, tmp_path / "ws")
    if solved:
        apply_solution(task, ws.root)
    return ws
