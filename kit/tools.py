"""The agent's tools: list/read/search/write/edit/delete files and run commands, inside one clone.

A :class:`Toolbox` is bound to a folder (the clone) and a role's permissions (read, write, exec).
Every call goes through :meth:`Toolbox.execute`, which

* refuses tools the role may not use (a "denied" event, counted by the recorder);
* refuses paths that leave the clone -- absolute paths, ``..`` escapes, symlinks pointing outside --
  and writes under ``.git`` (also "denied" events);
* records every executed call as a "tool" event with a short summary of its arguments;
* runs commands -- and searches, whose regexes cannot be interrupted in-process -- in the run's
  sandbox (:mod:`kit.sandbox`); a role without ``write`` gets the clone read-only there too. The
  command's time limit is the experiment's; the agent's ``timeout_s`` may only lower it;
* gives every call a time limit, reads and writes regular files only, and writes without following
  a symlink swapped in after the check (:mod:`kit.safefs`); bad input (a NUL byte, an over-long or
  over-deep argument) is a tool error for the agent, never a crashed run.

Results are plain text for the model; ``ok=False`` results say what to do instead.
"""

from __future__ import annotations

import ast
import contextlib
import math
import os
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from kit import safefs
from kit.records import RunRecorder
from kit.sandbox import default_sandbox, get_sandbox

PERMISSIONS = ("read", "write", "exec")
TOOL_PERMISSION = {
    "list_files": "read",
    "read_file": "read",
    "search": "read",
    "write_file": "write",
    "edit_file": "write",
    "delete_file": "write",
    "replace_definitions": "write",
    "run": "exec",
}

_SUMMARY_CHARS = 200
#: Longest string argument accepted (a file's whole content); paths and patterns get far less.
_MAX_ARG_CHARS = 5_000_000
_MAX_PATH_CHARS = 4096
_PATH_ARGS = ("path", "pattern", "command")


# --------------------------------------------------------------------------- the toolbox


@dataclass
class ToolSpec:
    name: str
    description: str
    parameters: dict  # JSON schema of the args object


@dataclass
class ToolResult:
    ok: bool
    output: str
    denied: bool = False


class _Refused(Exception):
    """A containment refusal (path outside the clone, write under .git): counted as denied."""


class _BadArgs(Exception):
    pass


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _first_line(node: ast.stmt) -> int:
    """A definition's first line, decorators included."""
    return min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])


def _import_slot(lines: list[str]) -> int:
    """Where new imports go: after the module docstring and the existing top-level imports."""
    try:
        tree = ast.parse("\n".join(lines))
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


def _obj(props: dict[str, dict], required: list[str]) -> dict:
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


_STR = {"type": "string"}
_TOOLS: dict[str, tuple[str, dict]] = {
    "list_files": (
        "List files under a folder of the repository, recursively (skips .git), one relative path a line.",
        _obj(
            {
                "path": {**_STR, "description": "Folder relative to the repository root.", "default": "."},
                "max_entries": {"type": "integer", "description": "Cap on lines listed.", "default": 500},
            },
            [],
        ),
    ),
    "read_file": (
        "Read a text file with numbered lines; optionally only lines start_line..end_line (1-based, "
        "inclusive). Large files are truncated with a marker.",
        _obj(
            {
                "path": {**_STR, "description": "File path relative to the repository root."},
                "start_line": {"type": ["integer", "null"], "description": "First line (1-based)."},
                "end_line": {"type": ["integer", "null"], "description": "Last line, inclusive."},
            },
            ["path"],
        ),
    ),
    "search": (
        "Search text files for a string (or a Python regex when regex=true); prints file:line: text.",
        _obj(
            {
                "pattern": {**_STR, "description": "Text (or regex) to look for."},
                "path": {**_STR, "description": "Folder or file to search in.", "default": "."},
                "regex": {"type": "boolean", "description": "Treat pattern as a regex.", "default": False},
            },
            ["pattern"],
        ),
    ),
    "write_file": (
        "Create or overwrite a file with the given content (parent folders are created).",
        _obj(
            {
                "path": {**_STR, "description": "File path relative to the repository root."},
                "content": {**_STR, "description": "The complete new content of the file."},
            },
            ["path", "content"],
        ),
    ),
    "edit_file": (
        "Replace one exact occurrence of `old` with `new` in a file. `old` must match exactly "
        "(whitespace included) and be unique in the file.",
        _obj(
            {
                "path": {**_STR, "description": "File path relative to the repository root."},
                "old": {**_STR, "description": "Exact text to replace (must occur exactly once)."},
                "new": {**_STR, "description": "Replacement text."},
            },
            ["path", "old", "new"],
        ),
    ),
    "replace_definitions": (
        "Replace top-level Python functions or classes by name: `code` holds complete `def`/`class` "
        "definitions; each replaces the definition of the same name in the one .py file that defines it "
        "(or in `path`). Imports at the top of `code` are added to that file when missing.",
        _obj(
            {
                "code": {**_STR, "description": "Python code with complete top-level definitions."},
                "path": {"type": ["string", "null"], "description": "Only look in this .py file."},
            },
            ["code"],
        ),
    ),
    "delete_file": (
        "Delete a file.",
        _obj({"path": {**_STR, "description": "File path relative to the repository root."}}, ["path"]),
    ),
    "run": (
        "Run a shell command in the repository root (e.g. `python -m pytest -q`); returns its combined "
        "output and exit code. Commands are killed after the timeout.",
        _obj(
            {
                "command": {**_STR, "description": "Shell command."},
                "timeout_s": {"type": ["number", "null"], "description": "Seconds before it is killed."},
            },
            ["command"],
        ),
    ),
}

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def _summary(name: str, args: dict) -> str:
    parts = []
    for key, value in args.items():
        if key in ("content", "old", "new", "code") and isinstance(value, str):
            parts.append(f"{key}=<{len(value)} chars>")
        else:
            parts.append(f"{key}={value!r}")
    text = ", ".join(parts)
    return text if len(text) <= _SUMMARY_CHARS else text[: _SUMMARY_CHARS - 3] + "..."


class Toolbox:
    """The tools one role may use on one clone. See the module docstring for the rules."""

    def __init__(
        self,
        root: Path,
        permissions: Iterable[str],
        *,
        recorder: RunRecorder | None = None,
        role: str = "",
        timeout_s: float = 120.0,
        max_read_bytes: int = 200_000,
        max_output_chars: int = 10_000,
        guard: Callable[[str, dict], str | None] | None = None,
        sandbox: str | None = None,
    ) -> None:
        self.root = Path(root).resolve()
        self.permissions = frozenset(permissions)
        unknown = self.permissions - set(PERMISSIONS)
        if unknown:
            raise ValueError(f"unknown permissions {sorted(unknown)}; valid: {', '.join(PERMISSIONS)}")
        self.recorder = recorder
        self.role = role
        self.timeout_s = timeout_s
        self.max_read_bytes = max_read_bytes
        self.max_output_chars = max_output_chars
        self.guard = guard
        self.sandbox = get_sandbox(sandbox or default_sandbox())
        #: roles without the write permission get the clone read-only in the sandbox as well
        self.writable = "write" in self.permissions

    # -- description -------------------------------------------------------------------------
    def specs(self) -> list[ToolSpec]:
        return [
            ToolSpec(name, f"{desc} Needs the '{TOOL_PERMISSION[name]}' permission.", params)
            for name, (desc, params) in _TOOLS.items()
        ]

    def allowed(self) -> list[str]:
        return [name for name in _TOOLS if TOOL_PERMISSION[name] in self.permissions]

    # -- dispatch ----------------------------------------------------------------------------
    def execute(self, name: str, args: dict) -> ToolResult:
        started = time.monotonic()
        args = dict(args or {}) if isinstance(args, dict) else args
        if name not in _TOOLS:
            result = ToolResult(False, f"unknown tool {name!r}; valid tools: {', '.join(_TOOLS)}")
            self._event("tool", name, str(args)[:_SUMMARY_CHARS], result.ok, started)
            return result
        needed = TOOL_PERMISSION[name]
        if needed not in self.permissions:
            has = ", ".join(p for p in PERMISSIONS if p in self.permissions) or "none"
            msg = (
                f"permission denied: role {self.role!r} may not call {name} (needs {needed!r}; "
                f"this role has: {has})"
            )
            self._event("denied", name, msg, False, started)
            return ToolResult(False, msg, denied=True)
        if not isinstance(args, dict):
            result = ToolResult(False, f"{name}: arguments must be an object; {self._expected(name)}")
            self._event("tool", name, str(args)[:_SUMMARY_CHARS], False, started)
            return result
        detail = _summary(name, args)
        try:
            clean = self._check_args(name, args)
            if self.guard is not None and needed == "write":
                refusal = self.guard(name, clean)
                if refusal:
                    raise _Refused(refusal)
            result = getattr(self, f"_{name}")(**clean)
        except _Refused as e:
            self._event("denied", name, f"{detail} -> {e}"[:_SUMMARY_CHARS], False, started)
            return ToolResult(False, str(e), denied=True)
        except _BadArgs as e:
            result = ToolResult(False, str(e))
        except safefs.TimeUp as e:
            result = ToolResult(False, f"{name} {e}; narrow the path or pattern")
        except OSError as e:
            result = ToolResult(False, f"{name} failed: {e.strerror or e}")
        except (ValueError, RecursionError, MemoryError, UnicodeError) as e:
            result = ToolResult(False, f"{name} failed on this input ({type(e).__name__}: {str(e)[:200]})")
        self._event("tool", name, detail, result.ok, started)
        return result

    def _event(self, kind: str, name: str, detail: str, ok: bool, started: float) -> None:
        if self.recorder is not None:
            self.recorder.event(
                kind,  # type: ignore[arg-type]
                self.role,
                name,
                detail,
                ok=ok,
                duration_s=time.monotonic() - started,
            )

    @staticmethod
    def _expected(name: str) -> str:
        schema = _TOOLS[name][1]
        req = schema["required"]
        opt = [k for k in schema["properties"] if k not in req]
        text = f"expected args: {', '.join(req) or '(none)'}"
        return text + (f" (optional: {', '.join(opt)})" if opt else "")

    def _check_args(self, name: str, args: dict) -> dict:
        schema = _TOOLS[name][1]
        props = schema["properties"]
        missing = [k for k in schema["required"] if k not in args or args[k] is None]
        extra = [k for k in args if k not in props]
        if missing or extra:
            what = []
            if missing:
                what.append(f"missing {', '.join(missing)}")
            if extra:
                what.append(f"unknown {', '.join(extra)}")
            raise _BadArgs(f"{name}: bad arguments ({'; '.join(what)}); {self._expected(name)}")
        clean = {}
        for key, value in args.items():
            if isinstance(value, str):
                cap = _MAX_PATH_CHARS if key in _PATH_ARGS and key != "command" else _MAX_ARG_CHARS
                if "\0" in value:
                    raise _BadArgs(f"{name}: argument {key!r} contains a NUL byte; remove it")
                if len(value) > cap:
                    raise _BadArgs(f"{name}: argument {key!r} is {len(value)} chars long; the limit is {cap}")
            types = props[key]["type"]
            types = [types] if isinstance(types, str) else types
            if value is None and "null" not in types:
                continue  # an optional argument given as null: use the default
            if "integer" in types and isinstance(value, str) and value.strip().lstrip("-").isdigit():
                value = int(value)
            elif "number" in types and isinstance(value, str):
                with contextlib.suppress(ValueError):
                    value = float(value)
            elif "boolean" in types and isinstance(value, str) and value.lower() in ("true", "false"):
                value = value.lower() == "true"
            ok = any(
                isinstance(value, _JSON_TYPES[t]) and not (t != "boolean" and isinstance(value, bool))
                for t in types
            )
            if not ok:
                raise _BadArgs(
                    f"{name}: argument {key!r} must be {' or '.join(types)}, got {type(value).__name__}; "
                    f"{self._expected(name)}"
                )
            clean[key] = value
        return clean

    # -- containment -------------------------------------------------------------------------
    def _resolve(self, path: str, *, write: bool = False) -> Path:
        if not isinstance(path, str) or path.strip() == "":
            raise _BadArgs("path must be a non-empty relative path")
        if os.path.isabs(path) or path.startswith("~"):
            raise _Refused(f"refused: {path!r} is an absolute path; use a path relative to the repository")
        target = (self.root / path).resolve()
        if not target.is_relative_to(self.root):
            raise _Refused(f"refused: {path!r} resolves outside the repository")
        rel = target.relative_to(self.root)
        if write:
            if rel.parts and rel.parts[0] == ".git":
                raise _Refused(f"refused: {path!r} is inside .git; the kit manages the git history")
            if rel == Path("."):
                raise _Refused("refused: cannot write to the repository root itself")
        return target

    def _rel(self, p: Path) -> str:
        return p.relative_to(self.root).as_posix()

    def _inside(self, target: Path) -> Path:
        """``target`` (already resolved, inside the clone) relative to the clone's root."""
        return target.relative_to(self.root)

    def _deadline(self) -> safefs.Deadline:
        return safefs.Deadline(self.timeout_s)

    def _step_timeout(self, requested: float | None) -> float:
        """The experiment's limit; the agent's own ``timeout_s`` may lower it, never raise it."""
        if requested is None or not math.isfinite(requested) or requested <= 0:
            return self.timeout_s
        return min(float(requested), self.timeout_s)

    # -- the tools ---------------------------------------------------------------------------
    def _list_files(self, path: str = ".", max_entries: int = 500) -> ToolResult:
        base = self._resolve(path)
        if not base.exists():
            return ToolResult(False, f"no such folder: {path}")
        lines, more = [], 0
        for p in safefs.walk(base, self._deadline()):
            if len(lines) < max(max_entries, 1):
                lines.append(self._rel(p))
            else:
                more += 1
        if more:
            lines.append(f"[... {more} more entries not shown; list a subfolder ...]")
        return ToolResult(True, "\n".join(lines) if lines else "(no files)")

    def _read_file(self, path: str, start_line: int | None = None, end_line: int | None = None) -> ToolResult:
        target = self._resolve(path)
        if target.is_dir():
            return ToolResult(False, f"no such file: {path} (it is a folder)")
        if not target.exists():
            return ToolResult(False, f"no such file: {path}")
        deadline = self._deadline()
        start = max(start_line or 1, 1)
        out: list[str] = []
        used = 0
        truncated = False
        with safefs.open_read(self.root, self._inside(target)) as fh:
            size = os.fstat(fh.fileno()).st_size
            if b"\0" in fh.read(8192):
                return ToolResult(False, f"{path} is a binary file ({size} bytes); not shown")
            fh.seek(0)
            lineno = 0
            while True:
                deadline.check()
                raw = fh.readline(self.max_read_bytes + 1)
                if not raw:
                    break
                lineno += 1
                if lineno < start:
                    continue
                if end_line is not None and lineno > end_line:
                    break
                if used + len(raw) > self.max_read_bytes:
                    truncated = True
                    break
                used += len(raw)
                out.append(f"{lineno:>6}| {raw.decode('utf-8', 'replace').rstrip(chr(10)).rstrip(chr(13))}")
        if truncated:
            out.append(
                f"[... truncated: {path} is {size} bytes; shown up to {self.max_read_bytes} bytes; "
                f"read further with start_line={lineno} ...]"
            )
        if not out:
            return ToolResult(True, f"(no lines in range; {path} has {lineno} lines)")
        return ToolResult(True, "\n".join(out))

    def _search(self, pattern: str, path: str = ".", regex: bool = False) -> ToolResult:
        """Runs ``safefs.SEARCH`` in the sandbox, clone read-only: a catastrophic regex is killed."""
        base = self._resolve(path)
        if not base.exists():
            return ToolResult(False, f"no such file or folder: {path}")
        rel = self._rel(base) if base != self.root else "."
        argv = [sys.executable, "-I", "-S", "-c", safefs.SEARCH, pattern, rel, "1" if regex else "0"]
        res = self.sandbox.run(
            [*argv, str(self.max_output_chars)],
            self.root,
            writable=False,
            timeout_s=self.timeout_s,
            max_output_chars=self.max_output_chars * 2 + 200,
        )
        if res.timed_out:
            raise safefs.TimeUp(f"took longer than {self.timeout_s:g} s and was stopped")
        out = res.output.rstrip("\n")
        if res.exit_code != 0:
            return ToolResult(False, out or f"search failed (exit code {res.exit_code})")
        return ToolResult(True, out or "no matches")

    def _write_file(self, path: str, content: str) -> ToolResult:
        target = self._resolve(path, write=True)
        if target.is_dir():
            return ToolResult(False, f"{path} is a folder")
        existed = target.exists()
        safefs.write_text(self.root, self._inside(target), content)
        return ToolResult(True, f"{'overwrote' if existed else 'created'} {path} ({len(content)} chars)")

    def _edit_file(self, path: str, old: str, new: str) -> ToolResult:
        target = self._resolve(path, write=True)
        if not target.exists() or target.is_dir():
            return ToolResult(False, f"no such file: {path}; use write_file to create it")
        if old == "":
            return ToolResult(False, "`old` is empty; give the exact text to replace")
        text = safefs.read_text(self.root, self._inside(target))
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
        safefs.write_text(self.root, self._inside(target), text.replace(old, new, 1))
        return ToolResult(True, f"edited {path}: replaced 1 occurrence")

    def _python_files(self, deadline: safefs.Deadline) -> list[Path]:
        return [
            p
            for p in safefs.walk(self.root, deadline)
            if p.suffix == ".py" and not p.is_symlink() and p.is_file()
        ]

    def _replace_definitions(self, code: str, path: str | None = None) -> ToolResult:
        try:
            new = ast.parse(code)
        except SyntaxError as e:
            return ToolResult(
                False, f"the code does not parse: {e.msg} (line {e.lineno}); send complete definitions"
            )
        defs = [n for n in new.body if isinstance(n, _DEFS)]
        if not defs:
            return ToolResult(
                False, "no top-level def or class in the code; to write a whole file, give its path"
            )
        deadline = self._deadline()
        files = [self._resolve(path, write=True)] if path else self._python_files(deadline)
        where: dict[str, list[tuple[Path, ast.stmt]]] = {}
        for file in files:
            deadline.check()
            try:
                tree = ast.parse(safefs.read_text(self.root, self._inside(file)))
            except (SyntaxError, OSError, ValueError, RecursionError, MemoryError):
                continue
            for node in tree.body:
                if isinstance(node, _DEFS):
                    where.setdefault(node.name, []).append((file, node))
        code_lines = code.splitlines()
        edits: dict[Path, list[tuple[int, int, list[str]]]] = {}
        for node in defs:
            found = where.get(node.name, [])
            if len(found) != 1:
                places = ", ".join(sorted({self._rel(f) for f, _ in found})) or "no file"
                return ToolResult(
                    False,
                    f"`{node.name}` is defined in {places}; replace_definitions needs exactly one. "
                    "Give `path`, or write the whole file.",
                )
            file, old = found[0]
            edits.setdefault(file, []).append(
                (
                    _first_line(old),
                    old.end_lineno or old.lineno,
                    code_lines[_first_line(node) - 1 : node.end_lineno],
                )
            )
        imports = [
            ast.get_source_segment(code, n) or ""
            for n in new.body
            if isinstance(n, ast.Import | ast.ImportFrom)
        ]
        for file, changes in edits.items():
            lines = safefs.read_text(self.root, self._inside(file)).splitlines()
            for start, end, replacement in sorted(changes, reverse=True):
                lines[start - 1 : end] = replacement
            missing = [imp for imp in imports if imp and imp not in lines]
            if missing:
                at = _import_slot(lines)
                lines[at:at] = missing
            safefs.write_text(self.root, self._inside(file), "\n".join(lines) + "\n")
        names = ", ".join(n.name for n in defs)
        return ToolResult(True, f"replaced {names} in {', '.join(self._rel(f) for f in edits)}")

    def _delete_file(self, path: str) -> ToolResult:
        target = self._resolve(path, write=True)
        parent = self._resolve(os.path.dirname(path) or ".")  # the folder holding the entry itself
        entry = parent / os.path.basename(path.rstrip("/"))
        if not entry.is_symlink():
            entry = target
        if entry.is_dir():
            return ToolResult(False, f"{path} is a folder; delete the files in it")
        if not entry.is_symlink() and not entry.exists():
            return ToolResult(False, f"no such file: {path}")
        safefs.unlink(self.root, self._inside(entry))
        return ToolResult(True, f"deleted {path}")

    def _run(self, command: str, timeout_s: float | None = None) -> ToolResult:
        timeout = self._step_timeout(timeout_s)
        res = self.sandbox.run(
            command,
            self.root,
            writable=self.writable,
            timeout_s=timeout,
            max_output_chars=self.max_output_chars,
        )
        tail = f"killed after {timeout:g} s (timeout)" if res.timed_out else f"exit code: {res.exit_code}"
        out = res.output.rstrip("\n")
        return ToolResult(not res.timed_out and res.exit_code == 0, f"{out}\n{tail}" if out else tail)
