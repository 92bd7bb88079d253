"""What an imported task's ``acceptance/`` holds besides the hidden test modules (the
``acceptance_layout: repo`` contract: every file at its repo-relative path), and the repository's
own import names (``packages:``).

Laid with each hidden module, from the head tree: the ``conftest.py`` files and test packages'
``__init__.py`` on its path, the local helper modules it (or they) import -- test-side files only:
the code under test is never laid --, the test data files their string literals name (a file's name,
or the name of a folder it sits in), the data files the hidden tests were seen to read in the
importer's probes (:func:`read_data`, wherever they live: the probes lay every test-side data file,
:func:`candidate_data`, and the audit hook reports what the tests open), and the file pytest takes
its configuration from.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path, PurePosixPath

from kit.importers.git.testfiles import is_test_module, is_test_side, local_imports, parse, string_literals
from kit.scoring.clean_copy import pytest_config_file
from kit.untrusted.confine import confined

#: Test data laid with the hidden tests may not exceed this (the rest is left to the agent's tree).
MAX_DATA_BYTES = 32 * 1024 * 1024
#: Top-level names that are no package of the project (build and task scripts).
NOT_PACKAGES = frozenset({"setup", "conftest", "noxfile", "fabfile", "tasks", "docs", "doc", "examples"})


def _on_path(head: Path, module: str, name: str) -> list[str]:
    """``name`` (conftest.py, __init__.py) in every folder from the root down to the module's."""
    parents = list(reversed(PurePosixPath(module).parents))
    return [str(d / name) if str(d) != "." else name for d in parents if (head / d / name).is_file()]


def _helpers(head: Path, start: list[str], globs: list[str] | None) -> set[str]:
    """Test-side modules (not test modules) that the files in ``start`` import, transitively."""
    found: set[str] = set()
    todo = list(start)
    while todo:
        rel = todo.pop()
        tree = parse((head / rel).read_bytes(), rel) if (head / rel).is_file() else None
        if tree is None:
            continue
        for cand in local_imports(tree, rel):
            if cand in found or not (head / cand).is_file():
                continue
            if is_test_side(cand, globs) and not is_test_module(cand, globs):
                found.add(cand)
                todo.append(cand)
    return found


def _data_files(head: Path, modules: list[str], python: set[str], globs: list[str] | None) -> set[str]:
    """Non-Python test-side files under the hidden modules' top test folders that a string literal
    of the laid Python files names (by file name or by a folder name on its path)."""
    tokens: set[str] = set()
    for rel in python:
        tree = parse((head / rel).read_bytes(), rel) if (head / rel).is_file() else None
        for text in string_literals(tree) if tree is not None else ():
            if len(text) < 200:
                tokens |= {part for part in text.replace("\\", "/").split("/") if part not in ("", ".", "..")}
    roots = {PurePosixPath(m).parts[0] for m in modules if len(PurePosixPath(m).parts) > 1}
    out: set[str] = set()
    total = 0
    for root in sorted(roots):
        for path in sorted((head / root).rglob("*")):
            rel = path.relative_to(head).as_posix()
            if not path.is_file() or rel.endswith((".py", ".pyc")) or not is_test_side(rel, globs):
                continue
            parts = PurePosixPath(rel).parts
            if path.name in tokens or any(p in tokens for p in parts[1:-1]):
                total += path.stat().st_size
                if total > MAX_DATA_BYTES:
                    return out
                out.add(rel)
    return out


def candidate_data(head: Path, modules: list[str], globs: list[str] | None = None) -> list[str]:
    """Every non-Python test-side file under the hidden modules' top test folders (up to
    MAX_DATA_BYTES): laid while the importer's probes run, so it can see which ones the hidden tests
    read (:func:`read_data`) whatever their names are made of."""
    roots = {PurePosixPath(m).parts[0] for m in modules if len(PurePosixPath(m).parts) > 1}
    out: list[str] = []
    total = 0
    for root in sorted(roots):
        for path in sorted((head / root).rglob("*")):
            rel = path.relative_to(head).as_posix()
            data = path.is_file() and not path.is_symlink() and not rel.endswith((".py", ".pyc"))
            if data and is_test_side(rel, globs):
                total += path.stat().st_size
                if total > MAX_DATA_BYTES:
                    return out
                out.append(rel)
    return out


def read_data(head: Path, reads: dict[str, set[str]], files: set[str]) -> list[str]:
    """The files of the head tree the hidden tests read in the probes with the change, and the code
    under test did not (that would be the project's own data, not a test's): data files wherever
    they live -- a golden file outside any test folder too.

    What a session reports is data, not a command: code under test can write report lines, so only
    paths of ``files`` (the head tree as the kit wrote it) are taken -- a forged line can at most
    lay a file of the repository's own head tree --, and a path that is no plain relative path
    (absolute, ``..``, a control character: never one the audit hook reports) refuses the import,
    named (:func:`kit.untrusted.confine.confined`)."""
    out = []
    for rel, by in reads.items():
        confined(head, rel, "a probe session reported reading the path")
        if by == {"test"} and rel in files and not rel.endswith((".py", ".pyc")):
            out.append(rel)
    return sorted(out)


def support_files(head: Path, modules: list[str], globs: list[str] | None = None) -> list[str]:
    """The repo-relative paths (in the head tree ``head``) laid with the hidden ``modules``."""
    python: set[str] = set()
    for module in modules:
        python |= set(_on_path(head, module, "conftest.py"))
        python |= {p for p in _on_path(head, module, "__init__.py") if is_test_side(p, globs)}
    python |= _helpers(head, [*modules, *python], globs)
    files = python | _data_files(head, modules, python | set(modules), globs)
    config = pytest_config_file(head)
    if config is not None:
        files.add(config.relative_to(head).as_posix())
    return sorted(files - set(modules))


def packages(base: Path, globs: list[str] | None = None) -> list[str]:
    """Top-level import names the tree provides: packages (folders with ``__init__.py``) and modules
    at its top or under ``src/``, test-side ones and build scripts left out."""
    names: set[str] = set()
    for root in (base, base / "src"):
        if not root.is_dir():
            continue
        for entry in root.iterdir():
            rel = entry.relative_to(base).as_posix()
            if entry.name.startswith((".", "_")) or is_test_side(
                rel + ("/x" if entry.is_dir() else ""), globs
            ):
                continue
            if entry.is_dir() and (entry / "__init__.py").is_file() and entry.name.isidentifier():
                names.add(entry.name)
            elif entry.is_file() and entry.suffix == ".py" and entry.stem.isidentifier():
                names.add(entry.stem)
    return sorted(names - NOT_PACKAGES - {"tests", "test", "testing"})


def shadowed(names: list[str]) -> dict[str, str]:
    """name -> where it is found, for each of ``names`` that the kit's interpreter imports from its
    own environment (isolated, as the scoring sessions start it: no current folder, no PYTHONPATH)."""
    if not names:
        return {}
    code = (
        "import importlib.util, json, sys\n"
        "out = {}\n"
        "for n in sys.argv[1:]:\n"
        "    try:\n"
        "        s = importlib.util.find_spec(n)\n"
        "    except Exception:\n"
        "        s = None\n"
        "    if s is not None:\n"
        "        out[n] = s.origin or ', '.join(s.submodule_search_locations or []) or 'built in'\n"
        "print(json.dumps(out))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-I", "-c", code, *names], cwd="/", capture_output=True, text=True, timeout=60
    )
    return json.loads(proc.stdout) if proc.returncode == 0 and proc.stdout.strip() else {}
