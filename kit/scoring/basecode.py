"""Which code of a scoring copy is the base's, so the audit hook (``audit.py``) charges introspection
to the code the agent wrote and not to what the project's own code already did at the base.

Real projects introspect: boltons' library code calls ``sys._getframe``, test suites walk the stack,
libraries start processes. Charged to "any file of the repo", every run of such a task would be
flagged ``suspicious``. So, per scoring copy, :func:`base_code` tells the audit hook:

- ``same``: the Python files identical, byte for byte, to the base commit's;
- ``changed``: for each Python file the base has but the copy changed, the line ranges (in the copy's
  version) of its **units** identical to the base's -- a unit is a top-level statement (a function or
  class definition with its decorators, an import, an assignment ...) or, inside a top-level class,
  one statement of its body (a method), recursively for nested classes. A function body is one unit:
  a nested function inside a changed function is the agent's (it may close over changed code).

Everything else (a new file, a changed unit, code compiled under a name no file of the copy has) is
the agent's. The audit hook looks through base frames as it looks through the stdlib's helpers:
an event is flagged when the nearest frame of the repo that is not base code is the agent's -- the
agent's code calling a base helper that takes frames is still seen, a hidden test calling it is not.

**What it does not close.** The agent's code can steer unchanged base code without being on the
stack when the base code acts -- patch a global the base code calls (``sys._getframe`` itself, say)
or hand it arguments -- so base code that takes frames or opens files on the agent's behalf, called
from a hidden test, is not seen. (Code the agent's code compiles under a base file's name is seen by
the audit hook when it is compiled; a line an unchanged unit shares with the agent's -- ``x = 1; peek
= lambda: ...`` -- is the agent's.)
"""

from __future__ import annotations

import ast
import functools
import os
from collections import Counter
from pathlib import Path, PurePosixPath

from kit import pyast
from kit.scoring.clean_copy import SKIP_NAMES, is_test_path

#: A changed file larger than this is not parsed: all of it counts as the agent's. Parsing takes
#: hundreds of times a file's size in the kit's memory (a 2 MB file cost 1 GB), and the agent writes
#: these files; nor is more than MAX_PARSE_TOTAL parsed per scoring copy (docs/sandbox.md).
MAX_PARSE_BYTES = 256 * 1024
MAX_PARSE_TOTAL = 4 * 1024 * 1024


def _span(node: ast.stmt) -> tuple[int, int]:
    start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    return start, node.end_lineno or node.lineno


def units(body: list[ast.stmt], prefix: str = "") -> list[tuple[str, tuple[int, int]]]:
    """(identity, line span) of each unit of ``body``: a definition is known by its qualified name and
    its ``ast.dump`` (line numbers are not in it), any other statement by its dump; a class's body is
    split into its own units."""
    out: list[tuple[str, tuple[int, int]]] = []
    for node in body:
        if isinstance(node, ast.ClassDef):
            bare = ast.ClassDef(
                name=node.name,
                bases=node.bases,
                keywords=node.keywords,
                body=[],
                decorator_list=node.decorator_list,
            )
            head = ast.dump(bare)
            out.append((f"class {prefix}{node.name} {head}", (_span(node)[0], node.lineno)))
            out += units(node.body, f"{prefix}{node.name}.")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            out.append((f"def {prefix}{node.name} {ast.dump(node)}", _span(node)))
        else:
            out.append((f"stmt {prefix} {ast.dump(node)}", _span(node)))
    return out


def unchanged_lines(source: bytes, base: bytes) -> list[list[int]]:
    """The line spans of ``source`` whose units are the base's (a unit appearing as often as it does
    at the base at most); [] when either does not parse."""
    try:
        now = pyast.parse(source)
        kept = Counter(_base_units(base))
        spans, agents = [], set()
        for key, span in units(now.body):
            if kept[key] > 0:
                kept[key] -= 1
                spans.append(span)
            else:
                agents.update(range(span[0], span[1] + 1))
        return _without(spans, agents)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []


@functools.lru_cache(maxsize=64)
def _base_units(base: bytes) -> Counter:
    """The units of a base file (the same for every scoring of a task: parsed once per process)."""
    return Counter(key for key, _ in units(pyast.parse(base).body))


def _without(spans: list[tuple[int, int]], lines: set[int]) -> list[list[int]]:
    """``spans`` less ``lines``: a line an unchanged unit shares with the agent's (``x = 1; peek =
    lambda: ...``) is the agent's -- the audit hook tells units apart by line only."""
    out: list[list[int]] = []
    for first, last in spans:
        run: list[int] | None = None
        for line in range(first, last + 1):
            if line in lines:
                run = None
            elif run is None:
                run = [line, line]
                out.append(run)
            else:
                run[1] = line
    return out


def _read(path: Path) -> bytes | None:
    try:
        if path.is_symlink() or not path.is_file():
            return None
        return path.read_bytes()
    except OSError:
        return None


def _py_files(root: Path) -> list[str]:
    out = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP_NAMES]
        out += [Path(folder, f).relative_to(root).as_posix() for f in files if f.endswith(".py")]
    return out


def with_base_tests(code: dict, base: Path) -> dict:
    """:func:`base_code` of a copy once its test side is the base's (``use_base_tests``: the own-tests
    copy), from the copy's ``code``: no file is read again."""
    same = [r for r in code["same"] if not is_test_path(PurePosixPath(r))]
    same += [r for r in _py_files(base) if is_test_path(PurePosixPath(r))]
    changed = {r: s for r, s in code["changed"].items() if not is_test_path(PurePosixPath(r))}
    return {"same": sorted(same), "changed": changed}


def base_code(copy: Path, base: Path) -> dict:
    """``{"same": [rel, ...], "changed": {rel: [[first, last], ...]}}`` for the Python files of the
    scoring copy ``copy`` against the base commit's tree ``base`` (paths relative, POSIX)."""
    same: list[str] = []
    changed: dict[str, list[list[int]]] = {}
    parsed = 0
    for rel in _py_files(copy):
        then = _read(base / rel)
        if then is None:
            continue  # a new file: the agent's
        now = _read(copy / rel)
        if now == then:
            same.append(rel)
        elif now is not None:
            big = max(len(now), len(then)) > MAX_PARSE_BYTES
            big = big or parsed + len(now) + len(then) > MAX_PARSE_TOTAL
            parsed += 0 if big else len(now) + len(then)
            changed[rel] = [] if big else unchanged_lines(now, then)
    return {"same": sorted(same), "changed": changed}
