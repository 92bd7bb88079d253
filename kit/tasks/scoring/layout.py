"""The ``repo`` acceptance layout (task.yaml ``acceptance_layout: repo``): the hidden tests run where
they live in the real project, inside the scoring copy of the final tree.

``acceptance/`` mirrors repo-relative paths: the hidden test modules (reduced to their hidden tests),
the repo's ``conftest.py`` files, the task's pytest configuration and the test data the hidden tests
use. :func:`lay` puts the kit's injected copy of each (canaries, twins, sealed checks:
:mod:`.inject`) at its own path in the acceptance session's copy, replacing whatever the agent left
there, and removes every other ``conftest.py`` of the copy. The session then collects the hidden
modules only, named on the command line, with ``-c`` on the task's configuration (or the kit's own
when the task has none), ``--rootdir`` and ``--confcutdir`` at the copy's root.

**What it closes.** A conftest, a pytest configuration (``addopts = -p rig``, ``python_functions``),
an ``__init__.py`` or a data file the agent wrote cannot change which tests run or how: the laid
files replace the agent's on their paths, no other conftest is left, no other configuration is read,
and the laid files are bound read-only into the sandbox (a test cannot be rewritten on disk before
pytest imports it). The audit hook treats the laid Python files as test code and the laid files the
agent could not see at the base (every hidden module; conftests, configuration and data the change
added or changed) as hidden (``audit.py``).

**What it does not close.** What the agent's code does in-process once imported (as in the
``folder`` layout: canaries, twins, sealed checks and the audit hook answer that). A folder holding a
laid file can still be renamed by the code under test before pytest reaches it (only the files are
read-only): a module that then fails to import fails its tests, and its missing canaries make the run
tampered.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from kit.tasks.requirements import test_files
from kit.tasks.scoring.clean_copy import SKIP_NAMES, lay_file, pytest_config_file


@dataclass
class Laid:
    """What :func:`lay` put into the copy."""

    modules: list[str] = field(default_factory=list)  # the hidden test modules, relative (collected)
    config: Path | None = None  # the task's pytest configuration, laid
    files: list[Path] = field(default_factory=list)  # every laid file, absolute
    tests: list[str] = field(default_factory=list)  # the laid Python files (test code)
    secret: list[str] = field(default_factory=list)  # laid files the agent could not see at the base

    def audit(self) -> dict:
        """The audit hook's view of the laid files (``audit.py``)."""
        return {"tests": self.tests, "secret": self.secret}


def _tree_files(root: Path) -> list[PurePosixPath]:
    out = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_NAMES)
        out += [PurePosixPath(Path(folder, f).relative_to(root).as_posix()) for f in sorted(files)]
    return out


def _same(a: Path, b: Path) -> bool:
    try:
        return b.is_file() and not b.is_symlink() and a.read_bytes() == b.read_bytes()
    except OSError:
        return False


def lay(injected: Path, original: Path, copy: Path, base: Path) -> Laid:
    """Lay the files of ``injected`` (the kit's injected copy of ``original``, the task's
    ``acceptance/``) at their paths in ``copy`` (the acceptance session's copy), after removing every
    ``conftest.py`` of ``copy``. ``base`` (the task's ``repo/``) tells which laid files the agent
    could see: one the base has, byte for byte, is no secret (a test module always is: it holds the
    kit's twins and canaries)."""
    copy = copy.resolve()
    for rel in _tree_files(copy):
        if rel.name == "conftest.py":
            (copy / rel).unlink()
    laid = Laid()
    modules = {p.relative_to(injected).as_posix() for p in test_files(injected)}
    for rel in _tree_files(injected):
        target = lay_file(injected / rel, copy, rel)
        laid.files.append(target)
        if rel.suffix == ".py":
            laid.tests.append(str(target))
        if rel.as_posix() in modules or not _same(original / rel, base / rel):
            laid.secret.append(str(target))
    laid.modules = sorted(modules)
    config = pytest_config_file(injected)
    laid.config = copy / config.name if config is not None else None
    return laid
