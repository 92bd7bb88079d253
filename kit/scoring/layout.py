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
an ``__init__.py`` the agent added on a hidden module's path is removed (pytest would import it as
the module's package), and the sandbox binds the laid files read-only. Nor can the code under test
move them while it runs (attack-scoring-1: 08): a folder of the test side holding laid data is bound
read-only whole (holding only the task's files and the base's), and every other folder on a laid
file's path is bound onto itself -- a mount point cannot be renamed or removed -- so every path the
hidden tests use leads to the task's files. Every laid Python file is compiled before any code under
test runs (``preload.py``). The audit hook treats the laid Python files as test code and the laid
files the agent could not see at the base (every hidden module; conftests, configuration and data the
change added or changed) as hidden (``audit.py``).

**What it does not close.** What the agent's code does in-process once imported (as in the
``folder`` layout: canaries, twins, sealed checks and the audit hook answer that). New files in a
pinned folder (``tests/``) can still be written during the session; a hidden test that globs such a
folder sees them. The unsandboxed backend (``none``) binds nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from kit.scoring.clean_copy import SKIP_NAMES, is_test_path, lay_file, pytest_config_file
from kit.tasks.requirements import test_files


@dataclass
class Laid:
    """What :func:`lay` put into the copy."""

    modules: list[str] = field(default_factory=list)  # the hidden test modules, relative (collected)
    config: Path | None = None  # the task's pytest configuration, laid
    files: list[Path] = field(default_factory=list)  # every laid file, absolute
    tests: list[str] = field(default_factory=list)  # the laid Python files (test code)
    secret: list[str] = field(default_factory=list)  # laid files the agent could not see at the base
    data_dirs: list[Path] = field(default_factory=list)  # folders of laid data, read-only whole
    pins: list[Path] = field(default_factory=list)  # the other folders on a laid file's path

    def audit(self) -> dict:
        """The audit hook's view of the laid files (``audit.py``)."""
        return {"tests": self.tests, "secret": self.secret}

    def read_only(self) -> list[Path]:
        """What the sandbox binds read-only: the data folders whole, every other laid file."""
        return self.data_dirs + [
            f for f in self.files if not any(f.is_relative_to(d) for d in self.data_dirs)
        ]


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
    kit's twins and canaries). Then the folders on the laid files' paths: :func:`_settle`."""
    copy = copy.resolve()
    for rel in _tree_files(copy):
        if rel.name == "conftest.py":
            (copy / rel).unlink()
    laid = Laid()
    modules = {p.relative_to(injected).as_posix() for p in test_files(injected)}
    rels = _tree_files(injected)
    for rel in rels:
        target = lay_file(injected / rel, copy, rel)
        laid.files.append(target)
        if rel.suffix == ".py":
            laid.tests.append(str(target))
        if rel.as_posix() in modules or not _same(original / rel, base / rel):
            laid.secret.append(str(target))
    laid.modules = sorted(modules)
    config = pytest_config_file(injected)
    laid.config = copy / config.name if config is not None else None
    _settle(laid, copy, base, set(rels), {PurePosixPath(m) for m in modules})
    return laid


def _settle(
    laid: Laid, copy: Path, base: Path, rels: set[PurePosixPath], modules: set[PurePosixPath]
) -> None:
    """The folders on the laid files' paths, in ``copy``:

    - an ``__init__.py`` on a hidden module's path that the task does not lay is removed when it is
      on the test side or the base has none (the agent's: pytest would import it as the hidden
      module's package); a package of the project (``pkg/`` of ``pkg/tests/test_x.py``) keeps its own;
    - a folder of the test side holding laid data and no laid Python file keeps only the laid files and the base's own
      (the base's version): nothing the agent put there; the sandbox binds it read-only whole;
    - every other folder on a laid file's path is pinned (bound onto itself): it cannot be renamed
      or removed, so no path the hidden tests use can be swapped for a folder of the agent's.
    """
    for module in modules:
        for folder in [PurePosixPath(), *reversed(module.parents[:-1])]:
            init = folder / "__init__.py"
            agents = init not in rels and (copy / init).is_file()
            if agents and (is_test_path(init) or not (base / init).is_file()):
                (copy / init).unlink()
    folders = {parent for rel in rels for parent in rel.parents[:-1]}
    data = sorted(
        f
        for f in folders
        if is_test_path(f / "_")  # (under a tests/-like folder: never a package of the code under test)
        and any(r.parent == f and r.suffix != ".py" for r in rels)
        and not any(r.parent == f and r.suffix == ".py" for r in rels)
    )
    data = [f for f in data if not any(f != d and f.is_relative_to(d) for d in data)]  # outermost
    for folder in data:
        for rel in _tree_files(copy / folder):
            path = folder / rel
            if path in rels:
                continue
            if (base / path).is_file() and not (base / path).is_symlink():
                lay_file(base / path, copy, path)
            else:
                (copy / path).unlink()
        laid.data_dirs.append(copy / folder)
    laid.pins = [copy / f for f in sorted(folders) if not any(f.is_relative_to(d) for d in data)]
