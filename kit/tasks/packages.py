"""A task's ``packages`` (task.yaml): the top-level import names its repo provides, and where they are
imported from -- always the tree under test, never the kit's own environment.

**What it closes.** The kit's environment (its ``.venv``) may hold a package of the same name as the
task's -- a newer release, say. Scoring starts pytest with ``python -I`` and puts the repo copy LAST
on ``sys.path`` (so the repo cannot shadow pytest or the standard library: ``launcher.py``): without
more, ``import more_itertools`` in a hidden test would find the installed copy and score *it*, not
the agent's code. So, for a task with ``packages``:

- every scoring session imports each named package through a finder placed first on
  ``sys.meta_path`` (``launcher.py``) that looks only in the copy's import roots
  (:func:`import_roots`); a package missing from the tree fails to import -- it never falls back to
  the installed one;
- a test command that is not pytest, and every command of the agent (its ``run`` tool, the harness's
  and linear's test gates), gets ``PYTHONPATH`` set to the clone's import roots (:func:`command_env`),
  so the tree's package comes before site-packages.

**What it does not close.** In the agent's own commands a package the agent deleted from its tree
falls back to the installed one, and the installed copy stays readable in the sandbox (the
interpreter's prefix is bound read-only): the importer refuses a project whose package is importable
from the kit's environment (docs/tasks.md). The names of the standard library and of what pytest
imports before any code under test (:data:`RESERVED`) cannot be a task's packages.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

#: Folders of a repo, besides its root, that hold its packages (the "src layout").
ROOT_CANDIDATES = ("", "src")
#: Imported by the scoring session before any code under test: they cannot come from the tree.
RESERVED = frozenset({"pytest", "_pytest", "pluggy", "iniconfig", "packaging", "py"})


def name_problems(names: Iterable[str]) -> list[str]:
    """Why ``names`` cannot be a task's ``packages`` ([] when they can)."""
    problems = []
    for name in names:
        if not name.isidentifier():
            problems.append(f"{name!r} is not a top-level import name (an identifier, no dots)")
        elif name in sys.stdlib_module_names or name in RESERVED:
            problems.append(f"{name!r} is a standard library or pytest module: the tree cannot provide it")
    return problems


def _holds(folder: Path, name: str) -> bool:
    return (folder / name).is_dir() or (folder / f"{name}.py").is_file()


def import_roots(tree: Path, names: Iterable[str]) -> list[str]:
    """The folders of ``tree`` (relative, "" for its root) that hold ``names`` -- the root or ``src/``,
    first match per name; the root when a name is in neither (a package the change creates)."""
    roots: list[str] = []
    for name in names:
        found = next((r for r in ROOT_CANDIDATES if _holds(tree / r, name)), "")
        if found not in roots:
            roots.append(found)
    return roots


def root_paths(tree: Path, roots: Iterable[str]) -> list[str]:
    """``roots`` (from :func:`import_roots`) as absolute paths in ``tree``."""
    return [str((Path(tree) / r).resolve()) if r else str(Path(tree).resolve()) for r in roots]


def command_env(packages: list[str], base: Path, clone: Path) -> dict[str, str]:
    """The environment a command in ``clone`` gets on top of the sandbox's (:func:`kit.sandbox.base.
    sandbox_env`) so the task's ``packages`` import from the clone: ``PYTHONPATH`` = the import roots
    the base tree ``base`` has them in. Nothing for a task without ``packages``."""
    if not packages:
        return {}
    return {"PYTHONPATH": ":".join(root_paths(clone, import_roots(base, packages)))}
