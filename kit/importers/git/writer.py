"""Writing an imported task's folder: ``solution/`` (the change's non-test files as full copies, and
``DELETED.txt``), ``acceptance/`` (hidden modules and the files laid with them, at repo-relative
paths) and ``task.yaml``. ``repo/`` is the exported base tree, moved in as it is."""

from __future__ import annotations

import shutil
from pathlib import Path

from kit.errors import TaskError
from kit.importers.git.gitread import Change
from kit.tasks.task import DELETED_FILE
from kit.tasks.taskyaml import write_task_file
from kit.untrusted.confine import confined


def write_solution(
    folder: Path, head: Path, changes: list[Change], left_out: list[str] | None = None
) -> list[str]:
    """``folder/solution``: the head's version of each added or modified file, and the deleted ones
    listed in DELETED.txt (one a line, exactly; a deleted name starting with ``#`` is refused: it
    would read as a comment). Returns the deleted paths; ``left_out`` gets the changed paths the
    export did not hold as files (symlinks, submodules), which are not written."""
    solution = folder / "solution"
    solution.mkdir(parents=True, exist_ok=True)
    deleted = []
    for change in changes:
        if change.status == "D":
            deleted.append(change.path)
            continue
        src = confined(head, change.path, "a changed file")
        if not src.is_file() or src.is_symlink():
            if left_out is not None:
                left_out.append(change.path)
            continue  # a symlink or submodule the export left out
        dest = confined(solution, change.path, "a changed file")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest)
    for rel in deleted:
        confined(head, rel, f"a {DELETED_FILE} line", leaf_link=True)
        if rel.startswith("#"):  # (a line break is refused by confined)
            raise TaskError(
                f"the change deletes {rel!r}, a name {DELETED_FILE} cannot list (a line starting with "
                "'#' is a comment)",
                "rename the file in the repository's history or import another commit",
            )
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
        dest = confined(acceptance, rel, "a file laid with the hidden tests")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(confined(head, rel, "a file laid with the hidden tests"), dest)
    for rel, text in modules.items():
        dest = confined(acceptance, rel, "a hidden test module")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text, encoding="utf-8")


def write_spec(folder: Path, spec: dict) -> None:
    write_task_file(folder, spec)
