"""A task's size, measured by the kit the same way for every task -- hand-made, Exercism, a suite's,
a user's import -- from the task folder alone, never hand-written (:class:`~kit.records.schema.TaskSize`).

* **code lines**: the reference change's added + removed lines of Python *code*, ``repo/`` against
  ``repo/`` with ``solution/`` laid over it (a deleted file counts whole). Code lines are found with
  :mod:`tokenize`: blank lines, comments and string statements (docstrings, and any other string
  standing alone as a statement) are left out; the remaining lines of each file are diffed.
* **files**: the Python files whose code lines the change touches (a docstring-only edit, a data
  file, a changelog do not count).
* **hidden tests**: the requirements (not ``baseline_pass``, not in ``exclude_tests``).
* **base code lines**: the code lines of every Python file of ``repo/``.
* **prompt tokens**: the task's prompt as a first call carries it to every strategy, estimated as
  characters / 4 (no tokenizer: the figure is the same whatever the model; the strategies' own
  system prompts come on top and are the same for every task).
* **long**: derived: at least 150 code lines, 2 files and 8 hidden tests (:data:`LONG_CODE_LINES`,
  :data:`LONG_FILES`, :data:`LONG_HIDDEN_TESTS`).
"""

from __future__ import annotations

import difflib
import io
import tokenize
from pathlib import Path

from kit.errors import TaskError
from kit.paths import is_ignored
from kit.records.schema import TaskSize
from kit.tasks.requirements import read_requirements
from kit.tasks.task import DELETED_FILE, Task, read_deleted
from kit.untrusted.confine import confined, read_capped

LONG_CODE_LINES = 150
LONG_FILES = 2
LONG_HIDDEN_TESTS = 8
#: A Python file larger than this is not read (its lines do not count): the tree is the user's input.
MAX_FILE_BYTES = 2 * 1024 * 1024
_NOT_CODE = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENCODING,
    tokenize.ENDMARKER,
}


def code_lines(source: str) -> list[str]:
    """The lines of ``source`` that hold code (trailing space cut), in order: blank lines, comments and string
    statements (docstrings) left out. Source that does not tokenize: its non-blank lines that do not
    start with ``#``."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError, ValueError):
        return [ln.rstrip() for ln in source.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    keep: set[int] = set()
    statement: list[tokenize.TokenInfo] = []
    for tok in tokens:
        if tok.type in _NOT_CODE:
            if tok.type == tokenize.NEWLINE and statement:
                _keep_statement(statement, keep)
                statement = []
            continue
        statement.append(tok)
    if statement:
        _keep_statement(statement, keep)
    lines = source.splitlines()
    return [lines[i - 1].rstrip() for i in sorted(keep) if 0 < i <= len(lines)]


def _keep_statement(tokens: list[tokenize.TokenInfo], keep: set[int]) -> None:
    """A logical line's code lines, unless it is only strings (a docstring or a string statement)."""
    if all(t.type == tokenize.STRING for t in tokens):
        return
    for tok in tokens:
        keep.update(range(tok.start[0], tok.end[0] + 1))


def _read_in(root: Path, rel: str | Path) -> str:
    """``root/rel``'s text, or "" when the path would leave ``root`` (:mod:`kit.untrusted.confine`)."""
    try:
        return _read(confined(root, rel, "a file of the reference change"))
    except TaskError:
        return ""


def _read(path: Path) -> str:
    if not path.is_file() or path.is_symlink() or path.stat().st_size > MAX_FILE_BYTES:
        return ""
    return path.read_text(encoding="utf-8", errors="replace")


def change_size(repo: Path, solution: Path) -> tuple[int, int]:
    """(code lines added + removed, Python files whose code changed) of ``solution`` laid over ``repo``."""
    total = files = 0
    changed: list[tuple[str, str]] = []
    for path in sorted(solution.rglob("*.py")) if solution.is_dir() else []:
        rel = path.relative_to(solution)
        if not is_ignored(rel):
            changed.append((_read_in(repo, rel), _read_in(solution, rel)))
    deleted = solution / DELETED_FILE
    for rel in read_deleted(read_capped(deleted, f"solution/{DELETED_FILE}")) if deleted.is_file() else []:
        if rel.endswith(".py"):
            changed.append((_read_in(repo, rel), ""))
    for old, new in changed:
        diff = difflib.unified_diff(code_lines(old), code_lines(new), lineterm="", n=0)
        n = sum(1 for ln in diff if ln[:1] in "+-" and not ln.startswith(("+++", "---")))
        total, files = total + n, files + (n > 0)
    return total, files


def tree_code_lines(root: Path) -> int:
    """Code lines of every Python file under ``root`` (hidden folders and caches left out)."""
    n = 0
    for path in sorted(root.rglob("*.py")) if root.is_dir() else []:
        rel = path.relative_to(root)
        if not is_ignored(rel) and not any(p.startswith(".") for p in rel.parts[:-1]):
            n += len(code_lines(_read(path)))
    return n


def prompt_tokens(prompt: str) -> int:
    """The prompt's tokens, estimated as characters / 4 (rounded up)."""
    return -(-len(prompt) // 4)


def is_long(code: int | None, files: int | None, hidden: int | None) -> bool:
    return (
        (code or 0) >= LONG_CODE_LINES and (files or 0) >= LONG_FILES and (hidden or 0) >= LONG_HIDDEN_TESTS
    )


def measure(task: Task) -> TaskSize:
    """The task's size (see the module docstring); a measure that cannot be taken is None."""
    code = files = None
    if task.solution_dir.is_dir():
        code, files = change_size(task.repo_dir, task.solution_dir)
    reqs, _ = read_requirements(task.acceptance_dir, task.excluded)
    hidden = sum(not r.baseline_pass for r in reqs)
    return TaskSize(
        code_lines=code,
        files=files,
        hidden_tests=hidden,
        base_code_lines=tree_code_lines(task.repo_dir),
        prompt_tokens=prompt_tokens(task.prompt),
        long=is_long(code, files, hidden),
    )


def long_problem(task: Task, size: TaskSize) -> str | None:
    """Why the task's ``long: true`` is false by the measure (None when it holds)."""
    if not task.long or size.long:
        return None
    return (
        f"task {task.id!r} says long: true, but by the kit's measure it is not: {describe(size)} "
        f"(long = {LONG_CODE_LINES}+ code lines, {LONG_FILES}+ files, {LONG_HIDDEN_TESTS}+ hidden tests)"
    )


def describe(size: TaskSize) -> str:
    """``75 code lines, 2 files, 9 hidden tests`` (+ base and prompt)."""
    return (
        f"{size.code_lines if size.code_lines is not None else '?'} code lines, "
        f"{size.files if size.files is not None else '?'} files, {size.hidden_tests} hidden tests"
    )
