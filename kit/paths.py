"""Where things live. The results folder can be moved with ORCHBENCH_RESULTS_DIR (tests do)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import Any

KIT_DIR = Path(__file__).resolve().parent
REPO_ROOT = KIT_DIR.parent
DATASETS = REPO_ROOT / "datasets"
TASKS_DIR = DATASETS / "tasks"
PROFILES_DIR = DATASETS / "profiles"
PRICES_DIR = DATASETS / "prices"
REFERENCE_DIR = DATASETS / "reference"
EXPERIMENTS_DIR = REPO_ROOT / "experiments"
PROMPTS_DIR = KIT_DIR / "prompts"
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"


def built_tasks_dir() -> Path:
    """Where ``kit tasks build-suite`` writes the tasks it builds from a suite's manifest (git-ignored
    ``datasets/built/`` unless ORCHBENCH_BUILT_DIR is set); the task loader looks there after
    ``datasets/tasks/``. Absolute, like :func:`results_root`."""
    return Path(os.environ.get("ORCHBENCH_BUILT_DIR") or DATASETS / "built").expanduser().resolve()


def results_root() -> Path:
    """The folder experiments write into (``results/`` unless ORCHBENCH_RESULTS_DIR is set), as an
    absolute path (a relative ORCHBENCH_RESULTS_DIR is taken from the current folder): git and the
    commands run in other folders."""
    return Path(os.environ.get("ORCHBENCH_RESULTS_DIR") or REPO_ROOT / "results").expanduser().resolve()


#: The one ignore list: folders and file endings the kit never copies into a clone or a scoring copy,
#: never walks for requirements and never shows in a diff (git's folder and test / build litter).
IGNORED_DIRS = (".git", "__pycache__", ".pytest_cache", ".ruff_cache")
IGNORED_SUFFIXES = (".pyc", ".pyo")


def is_ignored(rel: PurePath) -> bool:
    """Whether a path (relative to a repository) is under an ignored folder or has an ignored ending."""
    return any(part in IGNORED_DIRS for part in rel.parts) or rel.name.endswith(IGNORED_SUFFIXES)


# --------------------------------------------------------------------------- the strategies' working files

#: strategy -> (name -> path in the clone) of the files and folders it keeps there for itself, the
#: one place they are declared (the strategies take their names from here): see :func:`owned_paths`.
STRATEGY_FILES: dict[str, dict[str, str]] = {
    "vibe": {},
    "linear": {"plan_file": "PLAN.md"},
    "pdca": {"status": ".pdca/status"},
    "workflow": {},
    "harness": {
        "feature_list": "feature_list.json",
        "init_sh": "init.sh",
        "progress": "harness-progress.md",
    },
}

#: strategy -> the names of :data:`STRATEGY_FILES` that are options of the same name
#: (``strategy_options.<strategy>.<name>``) an experiment may set to another path.
PATH_OPTIONS: dict[str, tuple[str, ...]] = {"linear": ("plan_file",)}


def owned_paths(options: Mapping[str, Mapping[str, Any]] | None = None) -> tuple[str, ...]:
    """Every strategy's working files in the clone (sorted), with the paths ``options`` (an
    experiment's ``strategy_options``) give the :data:`PATH_OPTIONS` beside their defaults.

    A strategy keeps its bookkeeping in the clone beside the agent's code -- linear's plan file,
    harness's feature list, init script and progress notes, pdca's status folder. None of it is the
    agent's code, and a hidden test must not be able to tell which strategy ran by looking for it
    (``assert not os.path.exists('feature_list.json')`` failed every harness run and no other). So
    scoring holds, at every one of these paths, what the base commit holds there (nothing, for a path
    the base lacks): :func:`kit.scoring.clean_copy.as_at_base` on the scored copy; and the lines
    changed (:mod:`kit.scoring.diffstats`) do not count them.

    The rule is by **every** strategy's paths, whatever strategy ran: a vibe run that writes
    ``PLAN.md`` has it set back too. Then the tree the hidden tests and the own tests see is the same,
    path for path, whichever strategy ran -- a test that needs ``PLAN.md`` (or its absence) treats
    every strategy alike; by the strategy that ran, a test asking for ``PLAN.md`` would fail linear's
    runs only. The defaults always stay in: they are what every task is validated with.

    A path is relative to the clone's root, ``/``-separated; a folder's path covers everything under
    it (:func:`is_owned`)."""
    found = {path for files in STRATEGY_FILES.values() for path in files.values()}
    for strategy, names in PATH_OPTIONS.items():
        chosen = (options or {}).get(strategy) or {}
        found.update(chosen[name] for name in names if isinstance(chosen.get(name), str))
    return tuple(sorted(normal(p) for p in found if bad_path(p) is None))  # (an unchecked option's too)


def bad_path(path: str) -> str | None:
    """Why ``path`` cannot be a working file's path in the clone (None when it can): the clone's root
    itself (``.``), out of it (``..``, absolute), under ``.git``, or with a NUL or control character."""
    if any(ord(c) < 32 for c in path):
        return "no NUL or control character"
    parts = normal(path).split("/")
    if path.replace("\\", "/").startswith("/") or ".." in parts or parts[0][1:2] == ":":
        return "a relative path inside the clone (no '..')"
    if parts == [""] or ".git" in (part.lower() for part in parts):
        return "a file inside the clone (not the clone itself, not under .git)"
    return None


def normal(path: str) -> str:
    """``path`` as the kit compares it: ``/``-separated, no ``./`` parts, no trailing ``/``."""
    return "/".join(part for part in path.replace("\\", "/").split("/") if part not in ("", "."))


def is_owned(rel: str, paths: tuple[str, ...]) -> bool:
    """Is ``rel`` (relative to the clone's root, ``/``-separated: a ``\\`` is part of a name, as in the
    scored copy) one of ``paths`` or under one?"""
    rel = "/".join(part for part in rel.split("/") if part not in ("", "."))
    return any(rel == p or rel.startswith(p + "/") for p in paths)
