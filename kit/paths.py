"""Where things live. The results folder can be moved with ORCHBENCH_RESULTS_DIR (tests do)."""

from __future__ import annotations

import os
from pathlib import Path, PurePath

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
