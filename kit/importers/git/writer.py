"""Writing an imported task's folder: ``solution/`` (the change's non-test files as full copies, and
``DELETED.txt``), ``acceptance/`` (hidden modules and the files laid with them, at repo-relative
paths) and ``task.yaml``. ``repo/`` is the exported base tree, moved in as it is."""

from __future__ import annotations

import shutil
from pathlib import Path

from kit.importers.git.gitread import Change
from kit.tasks.task import DELETED_FILE
from kit.tasks.taskyaml import write_task_file


def write_solution(folder: Path, head: Path, changes: list[Change]) -> list[str]:
    """``folder/solution``: the head's version of each added or modified file, and the deleted ones
    listed in DELETED.txt. Returns the deleted paths."""
    solution = folder / "solution"
    solution.mkdir(parents=True, exist_ok=True)
    deleted = []
    for change in changes:
        if change.status == "D":
            deleted.append(change.path)
            continue
        src = head / change.path
        if not src.is_file():
            continue  # a symlink or submodule the export left out
        (solution / change.path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, solution / change.path)
    if deleted:
        (solution / DELETED_FILE).write_text("".join(f"{p}\n" for p in sorted(deleted)), encoding="utf-8")
    return deleted


def write_acceptance(folder: Path, head: Path, support: list[str], modules: dict[str, str]) -> None:
    """``folder/acceptance`` afresh: the support files copied from ``head``, the hidden modules'
    texts written, each at its repo-relative path."""
    acceptance = folder / "acceptance"
    if acceptance.exists():
        shutil.rmtree(acceptance)
    acceptance.mkdir(parents=True)
    for rel in support:
        (acceptance / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(head / rel, acceptance / rel)
    for rel, text in modules.items():
        (acceptance / rel).parent.mkdir(parents=True, exist_ok=True)
        (acceptance / rel).write_text(text, encoding="utf-8")


def write_spec(folder: Path, spec: dict) -> None:
    write_task_file(folder, spec)
