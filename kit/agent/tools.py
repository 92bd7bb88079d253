"""The agent's tools: one small function each, in a registry (``TOOLS``), as mini-swe-agent keeps its
actions. A tool is ``fn(box, **args) -> ToolResult``; ``@tool`` records its name, the permission it
needs, its description and its JSON schema; ``box`` is a :class:`~kit.agent.tool_api.ToolHost`, the one
interface a tool may use (:mod:`kit.agent.tool_api` holds it, the result type and the registry). :class:`kit.agent.toolbox.Toolbox` checks permissions, arguments
and paths, records events and calls the function; the functions use the box's containment helpers
(``box.resolve``, ``box.inside``, ``box.rel``, ``box.deadline``, ``box.step_timeout``) and
:mod:`kit.agent.safefs` for every file access. To add a tool: write one function here with ``@tool``.
"""

from __future__ import annotations

import ast
import os
import re
import sys
from pathlib import Path

from kit import pyast
from kit.agent import safefs
from kit.agent.tool_api import (  # noqa: F401 - re-exported: the names tools and the toolbox share
    TOOLS,
    BadArgs,
    Refused,
    Tool,
    ToolHost,
    ToolResult,
    ToolSpec,
    tool,
)
from kit.sandbox.backends import sandbox_env

_STR = {"type": "string"}


# --------------------------------------------------------------------------- helpers

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _first_line(node: ast.stmt) -> int:
    """A definition's first line, decorators included."""
    return min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])


def _import_slot(lines: list[str]) -> int:
    """Where new imports go: after the module docstring and the existing top-level imports."""
    try:
        tree = pyast.parse("\n".join(lines))
    except SyntaxError:
        return 0
    slot = 0
    for i, node in enumerate(tree.body):
        is_doc = (
            i == 0 and isinstance(node, ast.Expr) and isinstance(getattr(node, "value", None), ast.Constant)
        )
        if is_doc or isinstance(node, ast.Import | ast.ImportFrom):
            slot = node.end_lineno or node.lineno
        else:
            break
    return slot


def _python_files(box: ToolHost, deadline: safefs.Deadline) -> list[Path]:
    return [
        p for p in safefs.walk(box.root, deadline) if p.suffix == ".py" and not p.is_symlink() and p.is_file()
    ]


#: A Python file larger than this is never parsed in the kit's process (``ast`` takes hundreds of
#: times a file's size in memory: a 2 MB file cost 1 GB); replace_definitions refuses it.
MAX_PARSE_BYTES = 256 * 1024
#: list_files lists at most this many paths, whatever ``max_entries`` asks.
MAX_LIST_ENTRIES = 5000
#: replace_definitions without ``path`` scans at most this much Python source for the names.
MAX_SCAN_BYTES = 64 * 1024 * 1024


class _TooMuch(Exception):
    """More Python source than replace_definitions scans."""


def _defining(box: ToolHost, names: list[str], deadline: safefs.Deadline) -> list[Path]:
    """The .py files holding a top-level ``def``/``class`` line of one of ``names``: a line scan in
    pieces of 64 KB (memory stays flat whatever the files hold); only those files are parsed."""
    alternatives = b"|".join(re.escape(n.encode()) for n in names)
    start = re.compile(rb"(?:async[ \t]+def|def|class)[ \t]+(?:" + alternatives + rb")\b")
    found, scanned = [], 0
    for file in _python_files(box, deadline):
        try:
            with safefs.open_read(box.root, box.inside(file)) as fh:
                while piece := fh.readline(65536):
                    scanned += len(piece)
                    if scanned > MAX_SCAN_BYTES:
                        raise _TooMuch(
                            f"the repository holds over {MAX_SCAN_BYTES // 2**20} MB of Python: give `path`"
                        )
                    if start.match(piece):
                        found.append(file)
                        break
        except OSError:
            continue
        deadline.check()
    return found


def _parse_file(box: ToolHost, file: Path) -> ast.Module:
    """The module in ``file``; NotRegular when it is over :data:`MAX_PARSE_BYTES`."""
    text = safefs.read_text(box.root, box.inside(file), MAX_PARSE_BYTES)
    return pyast.parse(text)


# --------------------------------------------------------------------------- the tools


@tool(
    "list_files",
    "read",
    "List files under a folder of the repository, recursively (skips .git), one relative path a line.",
    {
        "path": {**_STR, "description": "Folder relative to the repository root.", "default": "."},
        "max_entries": {"type": "integer", "description": "Cap on lines listed.", "default": 500},
    },
    [],
)
def list_files(box: ToolHost, path: str = ".", max_entries: int = 500) -> ToolResult:
    base = box.resolve(path)
    if not base.exists():
        return ToolResult(False, f"no such folder: {path}")
    lines, more = [], 0
    cap = min(max(max_entries, 1), MAX_LIST_ENTRIES)  # (the output is capped anyway: hold no more)
    for p in safefs.walk(base, box.deadline()):
        if len(lines) < cap:
            lines.append(box.rel(p))
        else:
            more += 1
    if more:
        lines.append(f"[... {more} more entries not shown; list a subfolder ...]")
    return ToolResult(True, "\n".join(lines) if lines else "(no files)")


@tool(
    "read_file",
    "read",
    "Read a text file with numbered lines; optionally only lines start_line..end_line (1-based, inclusive). Large files are truncated with a marker.",
    {
        "path": {**_STR, "description": "File path relative to the repository root."},
        "start_line": {"type": ["integer", "null"], "description": "First line (1-based)."},
        "end_line": {"type": ["integer", "null"], "description": "Last line, inclusive."},
    },
    ["path"],
)
def read_file(
    box: ToolHost, path: str, start_line: int | None = None, end_line: int | None = None
) -> ToolResult:
    target = box.resolve(path)
    if target.is_dir():
        return ToolResult(False, f"no such file: {path} (it is a folder)")
    if not target.exists():
        return ToolResult(False, f"no such file: {path}")
    deadline = box.deadline()
    start = max(start_line or 1, 1)
    out: list[str] = []
    used = 0
    truncated = False
    with safefs.open_read(box.root, box.inside(target)) as fh:
        size = os.fstat(fh.fileno()).st_size
        if b"\0" in fh.read(8192):
            return ToolResult(False, f"{path} is a binary file ({size} bytes); not shown")
        fh.seek(0)
        lineno = 0
        while True:
            deadline.check()
            raw = fh.readline(box.max_read_bytes + 1)
            if not raw:
                break
            lineno += 1
            if lineno < start:
                continue
            if end_line is not None and lineno > end_line:
                break
            if used + len(raw) > box.max_read_bytes:
                truncated = True
                break
            used += len(raw)
            out.append(f"{lineno:>6}| {raw.decode('utf-8', 'replace').rstrip(chr(10)).rstrip(chr(13))}")
    if truncated:
        out.append(
            f"[... truncated: {path} is {size} bytes; shown up to {box.max_read_bytes} bytes; "
            f"read further with start_line={lineno} ...]"
        )
    if not out:
        return ToolResult(True, f"(no lines in range; {path} has {lineno} lines)")
    return ToolResult(True, "\n".join(out))


@tool(
    "search",
    "read",
    "Search text files for a string (or a Python regex when regex=true); prints file:line: text.",
    {
        "pattern": {**_STR, "description": "Text (or regex) to look for."},
        "path": {**_STR, "description": "Folder or file to search in.", "default": "."},
        "regex": {"type": "boolean", "description": "Treat pattern as a regex.", "default": False},
    },
    ["pattern"],
)
def search(box: ToolHost, pattern: str, path: str = ".", regex: bool = False) -> ToolResult:
    """Runs ``safefs.SEARCH`` in the sandbox, clone read-only: a catastrophic regex is killed."""
    base = box.resolve(path)
    if not base.exists():
        return ToolResult(False, f"no such file or folder: {path}")
    rel = box.rel(base) if base != box.root else "."
    argv = [sys.executable, "-I", "-S", "-c", safefs.SEARCH, pattern, rel, "1" if regex else "0"]
    res = box.sandbox.run(
        [*argv, str(box.max_output_chars)],
        box.root,
        writable=False,
        timeout_s=box.timeout_s,
        max_output_chars=box.max_output_chars * 2 + 200,
        neutral=True,  # the agent's view: nothing names the experiment (kit.sandbox.view)
    )
    if res.timed_out:
        raise safefs.TimeUp(f"took longer than {box.timeout_s:g} s and was stopped")
    out = res.output.rstrip("\n")
    if res.exit_code != 0:
        return ToolResult(False, out or f"search failed (exit code {res.exit_code})")
    return ToolResult(True, out or "no matches")


@tool(
    "write_file",
    "write",
    "Create or overwrite a file with the given content (parent folders are created).",
    {
        "path": {**_STR, "description": "File path relative to the repository root."},
        "content": {**_STR, "description": "The complete new content of the file."},
    },
    ["path", "content"],
)
def write_file(box: ToolHost, path: str, content: str) -> ToolResult:
    target = box.resolve(path, write=True)
    if target.is_dir():
        return ToolResult(False, f"{path} is a folder")
    existed = target.exists()
    safefs.write_text(box.root, box.inside(target), content)
    return ToolResult(True, f"{'overwrote' if existed else 'created'} {path} ({len(content)} chars)")


@tool(
    "edit_file",
    "write",
    "Replace one exact occurrence of `old` with `new` in a file. `old` must match exactly (whitespace included) and be unique in the file.",
    {
        "path": {**_STR, "description": "File path relative to the repository root."},
        "old": {**_STR, "description": "Exact text to replace (must occur exactly once)."},
        "new": {**_STR, "description": "Replacement text."},
    },
    ["path", "old", "new"],
)
def edit_file(box: ToolHost, path: str, old: str, new: str) -> ToolResult:
    target = box.resolve(path, write=True)
    if not target.exists() or target.is_dir():
        return ToolResult(False, f"no such file: {path}; use write_file to create it")
    if old == "":
        return ToolResult(False, "`old` is empty; give the exact text to replace")
    text = safefs.read_text(box.root, box.inside(target))
    n = text.count(old)
    if n == 0:
        return ToolResult(
            False,
            f"`old` not found in {path} (0 matches); read the file and copy the exact text, "
            "whitespace included",
        )
    if n > 1:
        return ToolResult(
            False, f"`old` matches {n} times in {path}; include more surrounding lines to make it unique"
        )
    safefs.write_text(box.root, box.inside(target), text.replace(old, new, 1))
    return ToolResult(True, f"edited {path}: replaced 1 occurrence")


@tool(
    "replace_definitions",
    "write",
    "Replace top-level Python functions or classes by name: `code` holds complete `def`/`class` definitions; each replaces the definition of the same name in the one .py file that defines it (or in `path`). Imports at the top of `code` are added to that file when missing.",
    {
        "code": {**_STR, "description": "Python code with complete top-level definitions."},
        "path": {"type": ["string", "null"], "description": "Only look in this .py file."},
    },
    ["code"],
)
def replace_definitions(box: ToolHost, code: str, path: str | None = None) -> ToolResult:
    if len(code) > MAX_PARSE_BYTES:  # parsed in the kit's process: ast takes hundreds of times its size
        return ToolResult(
            False,
            f"the code is over {MAX_PARSE_BYTES // 1024} KB: replace fewer definitions, or write the file",
        )
    try:
        new = pyast.parse(code)
    except SyntaxError as e:
        return ToolResult(
            False, f"the code does not parse: {e.msg} (line {e.lineno}); send complete definitions"
        )
    defs = [n for n in new.body if isinstance(n, _DEFS)]
    if not defs:
        return ToolResult(
            False, "no top-level def or class in the code; to write a whole file, give its path"
        )
    deadline = box.deadline()
    try:
        files = [box.resolve(path, write=True)] if path else _defining(box, [n.name for n in defs], deadline)
    except _TooMuch as exc:
        return ToolResult(False, str(exc))
    # only where each definition sits is kept, never a parsed tree: one file's tree at a time in
    # memory (each up to MAX_PARSE_BYTES: ~60 MB of ast), however many files define the names
    names = {n.name for n in defs}
    where: dict[str, list[tuple[Path, int, int]]] = {}
    for file in files:
        deadline.check()
        try:
            tree = _parse_file(box, file)
        except safefs.NotRegular as exc:  # larger than MAX_PARSE_BYTES
            return ToolResult(False, f"{exc} by replace_definitions: use edit_file")
        except (SyntaxError, OSError, ValueError, RecursionError, MemoryError):
            continue
        for node in tree.body:
            if isinstance(node, _DEFS) and node.name in names:
                where.setdefault(node.name, []).append(
                    (file, _first_line(node), node.end_lineno or node.lineno)
                )
        del tree
    code_lines = code.splitlines()
    edits: dict[Path, list[tuple[int, int, list[str]]]] = {}
    for node in defs:
        found = where.get(node.name, [])
        if len(found) != 1:
            places = ", ".join(sorted({box.rel(f) for f, _, _ in found})) or "no file"
            return ToolResult(
                False,
                f"`{node.name}` is defined in {places}; replace_definitions needs exactly one. "
                "Give `path`, or write the whole file.",
            )
        file, start, end = found[0]
        edits.setdefault(file, []).append((start, end, code_lines[_first_line(node) - 1 : node.end_lineno]))
    imports = [
        ast.get_source_segment(code, n) or "" for n in new.body if isinstance(n, ast.Import | ast.ImportFrom)
    ]
    for file, changes in edits.items():
        lines = safefs.read_text(box.root, box.inside(file)).splitlines()
        for start, end, replacement in sorted(changes, reverse=True):
            lines[start - 1 : end] = replacement
        missing = [imp for imp in imports if imp and imp not in lines]
        if missing:
            at = _import_slot(lines)
            lines[at:at] = missing
        safefs.write_text(box.root, box.inside(file), "\n".join(lines) + "\n")
    names = ", ".join(n.name for n in defs)
    return ToolResult(True, f"replaced {names} in {', '.join(box.rel(f) for f in edits)}")


@tool(
    "delete_file",
    "write",
    "Delete a file.",
    {
        "path": {**_STR, "description": "File path relative to the repository root."},
    },
    ["path"],
)
def delete_file(box: ToolHost, path: str) -> ToolResult:
    target = box.resolve(path, write=True)
    parent = box.resolve(os.path.dirname(path) or ".")  # the folder holding the entry itself
    entry = parent / os.path.basename(path.rstrip("/"))
    if not entry.is_symlink():
        entry = target
    if entry.is_dir():
        return ToolResult(False, f"{path} is a folder; delete the files in it")
    if not entry.is_symlink() and not entry.exists():
        return ToolResult(False, f"no such file: {path}")
    safefs.unlink(box.root, box.inside(entry))
    return ToolResult(True, f"deleted {path}")


@tool(
    "run",
    "exec",
    "Run a shell command in the repository root (e.g. `python -m pytest -q`); returns its combined output and exit code. Commands are killed after the timeout.",
    {
        "command": {**_STR, "description": "Shell command."},
        "timeout_s": {"type": ["number", "null"], "description": "Seconds before it is killed."},
    },
    ["command"],
)
def run(box: ToolHost, command: str, timeout_s: float | None = None) -> ToolResult:
    timeout = box.step_timeout(timeout_s)
    res = box.sandbox.run(
        command,
        box.root,
        writable=box.writable,
        timeout_s=timeout,
        env=sandbox_env(box.env),
        max_output_chars=box.max_output_chars,
        neutral=True,  # the agent's view: the clone at /work/repo, nothing names the experiment
    )
    tail = f"killed after {timeout:g} s (timeout)" if res.timed_out else f"exit code: {res.exit_code}"
    out = res.output.rstrip("\n")
    return ToolResult(
        not res.timed_out and res.exit_code == 0,
        f"{out}\n{tail}" if out else tail,
        exit_code=None if res.timed_out else res.exit_code,
        timed_out=res.timed_out,
    )
