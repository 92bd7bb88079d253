"""Hidden tests a task leaves out (``exclude_tests`` in task.yaml): in the scoring copy of
``acceptance/`` each is renamed so pytest never collects it -- no requirement, no twin, no canary is
made of it -- while the rest of its module stays as written."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable
from pathlib import Path

from kit import pyast
from kit.scoring.nodeids import index, under

#: The prefix an excluded test's name gets in the scoring copy (pytest collects ``test*`` only).
PREFIX = "_orchbench_excluded_"


def hide_excluded(folder: Path, keys: set[str]) -> list[str]:
    """Rename the test functions keyed in ``keys`` (``<file>::[Class::]name``, the file relative to
    ``folder``) in ``folder``'s modules; the keys found."""
    by_file: dict[str, set[str]] = {}
    for key in keys:
        rel, _, rest = key.partition("::")
        by_file.setdefault(rel, set()).add(rest)
    found: list[str] = []
    for rel, names in sorted(by_file.items()):
        path = folder / rel
        if not path.is_file() or path.is_symlink():
            continue
        source = path.read_text(encoding="utf-8")
        try:
            tree = pyast.parse(source)
        except (SyntaxError, ValueError):
            continue
        lines = source.splitlines(keepends=True)
        for qual, node in _functions(tree):
            if qual in names:
                i = node.lineno - 1
                lines[i] = lines[i].replace(f"def {node.name}", f"def {PREFIX}{node.name}", 1)
                found.append(f"{rel}::{qual}")
        path.write_text("".join(lines), encoding="utf-8")
    return found


def _functions(tree: ast.Module) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    out = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            out.append((node.name, node))
        elif isinstance(node, ast.ClassDef):
            out += [
                (f"{node.name}::{sub.name}", sub)
                for sub in node.body
                if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef)
            ]
    return out


def deselected(nodeid: str, ids: Iterable[str]) -> bool:
    """Is ``nodeid`` (a module, class or test) one of ``ids`` (``--deselect`` ids) or under one?"""
    return under(nodeid, _index(tuple(ids)), params=False)


@functools.lru_cache(maxsize=16)
def _index(ids: tuple[str, ...]) -> tuple[frozenset[str], frozenset[str]]:
    return index(ids)
