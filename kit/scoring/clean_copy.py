"""The trees scoring runs on: a clean copy of the final clone, and the repo's own tests as of the base.

:func:`copy_clean` copies regular files and folders only. A symlink is kept (as a copy of its target)
only when it points to a regular file inside the clone; symlinks pointing outside or to folders,
FIFOs, sockets, devices, unreadable entries, very large files and very deep folders are dropped, each
with a note. ``.git``, ``__pycache__``, ``.pytest_cache`` and compiled ``*.pyc`` files are never copied
(a stale or sourceless ``.pyc`` would be imported in place of the source). Nothing the clone holds can
make the copy hang (files are opened non-blocking and checked to be regular) or crash it, and a sparse
file stays sparse (:func:`copy_data` skips holes): the copy takes no more disk than the original.

:func:`use_base_tests` makes a copy judge regressions the way the base commit would: every test
file, conftest, file under a ``tests/``-like folder and pytest configuration file (pytest.ini,
tox.ini, setup.cfg, pyproject.toml, ...) is replaced by the base's version, and the ones the agent
added are removed.

:func:`as_at_base` sets the strategies' own working files (:func:`kit.paths.owned_paths`: linear's
``PLAN.md``, harness's ``feature_list.json`` ...) back to the base's in the scored copy, whatever
strategy ran: the hidden tests cannot tell the strategies apart by them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from kit import trees
from kit.paths import IGNORED_DIRS, IGNORED_SUFFIXES, bad_path, normal
from kit.records.schema import file_name
from kit.scoring import pytestconfig
from kit.tasks.requirements import TEST_FILE_RE

SKIP_NAMES = frozenset(IGNORED_DIRS)
SKIP_SUFFIXES = IGNORED_SUFFIXES
MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_DEPTH = 48
MAX_NOTES = 200
TEST_DIRS = frozenset({"tests", "test", "testing"})
#: The files pytest reads its configuration from, in pytest's order of precedence (pytest 9).
CONFIG_NAMES = (
    "pytest.toml",
    ".pytest.toml",
    "pytest.ini",
    ".pytest.ini",
    "pyproject.toml",
    "tox.ini",
    "setup.cfg",
)


def copy_data(src: int, dst: int, size: int) -> None:
    """Copy ``size`` bytes from descriptor ``src`` to ``dst`` skipping holes (``SEEK_DATA`` /
    ``SEEK_HOLE``), so a sparse file is not made dense."""
    pos = 0
    while pos < size:
        try:
            start = os.lseek(src, pos, os.SEEK_DATA)
        except OSError:
            break  # only a hole is left
        end = min(os.lseek(src, start, os.SEEK_HOLE), size)
        os.lseek(src, start, os.SEEK_SET)
        os.lseek(dst, start, os.SEEK_SET)
        left = end - start
        while left > 0:
            chunk = os.read(src, min(left, 1 << 20))
            if not chunk:
                break
            view = memoryview(chunk)
            while view:
                view = view[os.write(dst, view) :]
            left -= len(chunk)
        pos = max(end, start + 1)
    os.ftruncate(dst, size)


def copy_sparse(src: str, dst: str) -> str:
    """``shutil.copytree``'s copy function for kit-owned trees: contents (holes kept) and mode."""
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        copy_data(fin.fileno(), fout.fileno(), os.fstat(fin.fileno()).st_size)
    shutil.copymode(src, dst)
    return dst


class _Notes(list):
    def add(self, rel: str, why: str) -> None:
        if len(self) < MAX_NOTES:
            self.append(file_name(f"{rel}: {why}"))
        elif len(self) == MAX_NOTES:
            self.append("... more dropped entries not listed")


def _copy_file(path: str, dest: Path) -> str | None:
    """Copy one regular file (no symlink followed, no FIFO opened blocking); a reason when dropped."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        return f"unreadable ({e.strerror})"
    with os.fdopen(fd, "rb"):
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return "not a regular file"
        if st.st_size > MAX_FILE_BYTES:
            return f"larger than {MAX_FILE_BYTES // 2**20} MB"
        try:
            with open(dest, "wb") as out:
                copy_data(fd, out.fileno(), st.st_size)
        except OSError as e:
            return f"could not be copied ({e.strerror})"
        with contextlib.suppress(OSError):
            os.chmod(dest, stat.S_IMODE(st.st_mode) | stat.S_IRUSR | stat.S_IWUSR)
    return None


def _symlink_target(path: str, root: str) -> str | None:
    """The real path of a symlink pointing at a regular file inside ``root``, else None."""
    real = os.path.realpath(path)
    if os.path.commonpath([real, root]) != root or not os.path.isfile(real) or os.path.islink(real):
        return None
    return real


def copy_clean(src: Path, dest: Path) -> list[str]:
    """Copy the clone at ``src`` to ``dest`` (must not exist); returns what was dropped and why."""
    notes = _Notes()
    root = os.path.realpath(src)
    Path(dest).mkdir(parents=True)
    stack: list[tuple[str, Path, int]] = [(root, Path(dest), 0)]
    while stack:
        folder, out, depth = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as e:
            notes.add(os.path.relpath(folder, root), f"folder unreadable ({e.strerror})")
            continue
        for entry in entries:
            rel = os.path.relpath(entry.path, root)
            if entry.name in SKIP_NAMES or entry.name.endswith(SKIP_SUFFIXES):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError as e:
                notes.add(rel, f"unreadable ({e.strerror})")
                continue
            target = out / entry.name
            if stat.S_ISDIR(st.st_mode):
                if depth + 1 > MAX_DEPTH:
                    notes.add(rel, f"folder nested deeper than {MAX_DEPTH} levels")
                    continue
                target.mkdir()
                stack.append((entry.path, target, depth + 1))
            elif stat.S_ISREG(st.st_mode):
                why = _copy_file(entry.path, target)
                if why:
                    notes.add(rel, why)
            elif stat.S_ISLNK(st.st_mode):
                real = _symlink_target(entry.path, root)
                why = (
                    _copy_file(real, target) if real else "symlink pointing outside the clone or to a folder"
                )
                if why:
                    notes.add(rel, why)
            else:
                kind = (
                    "FIFO"
                    if stat.S_ISFIFO(st.st_mode)
                    else "socket"
                    if stat.S_ISSOCK(st.st_mode)
                    else "device"
                )
                notes.add(rel, f"{kind}, not a regular file")
    return list(notes)


def as_at_base(tree: Path, base: Path, paths: Iterable[str]) -> None:
    """Hold at each of ``paths`` (relative, ``/``-separated: :func:`kit.paths.owned_paths`)
    in ``tree`` (a kit-owned copy) what ``base`` holds there: what the run left goes, and the base's
    file or folder, if it has one, is laid back. A path out of ``tree`` (:func:`kit.paths.bad_path`) is
    passed over; a folder left empty above a path, that the base lacks, goes (pdca's ``.pdca/``)."""
    for rel in (normal(p) for p in paths if bad_path(p) is None):
        target, source = tree / rel, base / rel
        if os.path.lexists(target):
            trees.remove_tree(target)
        if source.is_symlink():  # (a task's link: as copy_clean takes one -- a file inside, or nothing)
            real = _symlink_target(str(source), os.path.realpath(base))
            if real:
                lay_file(Path(real), tree, PurePosixPath(rel))
        elif source.is_dir():
            _make_parents(tree, target)
            copy_clean(source, target)  # (no link followed out of it, or round a loop)
        elif source.is_file():
            lay_file(source, tree, PurePosixPath(rel))
        for parent in PurePosixPath(rel).parents[:-1]:
            folder = tree / parent
            if (
                (base / parent).is_dir()
                or folder.is_symlink()
                or not folder.is_dir()
                or any(folder.iterdir())
            ):
                break
            folder.rmdir()


# --------------------------------------------------------------------------- the base's own tests


def is_test_path(rel: PurePosixPath) -> bool:
    """Test files, conftests, pytest configuration, and anything under a tests/ (test/, testing/) folder."""
    name = rel.name
    return bool(
        TEST_FILE_RE.match(name)
        or name == "conftest.py"
        or name in CONFIG_NAMES
        or any(part in TEST_DIRS for part in rel.parts[:-1])
    )


def _files(tree: Path) -> list[PurePosixPath]:
    out = []
    for folder, dirs, files in os.walk(tree):
        dirs[:] = [d for d in dirs if d not in SKIP_NAMES]
        for name in files:
            out.append(PurePosixPath(Path(folder, name).relative_to(tree).as_posix()))
    return out


def use_base_tests(tree: Path, base: Path) -> None:
    """Replace the test side of ``tree`` (see :func:`is_test_path`) by the one of ``base``."""
    for rel in _files(tree):
        if is_test_path(rel):
            (tree / rel).unlink()
    for rel in _files(base):
        if is_test_path(rel):
            lay_file(base / rel, tree, rel)


def add_new_tests(tree: Path, final: Path, base: Path) -> list[str]:
    """Lay in ``tree`` (a copy with the base's test side) the test modules of ``final`` at paths the
    base has none at -- the test files the agent added --, to run in the own-tests session; their
    paths. (Tests the agent wrote into the base's files are not run: those files are the base's.)"""
    at_base = {rel for rel in _files(base) if is_test_path(rel)}
    added = [rel for rel in _files(final) if TEST_FILE_RE.match(rel.name) and rel not in at_base]
    for rel in added:
        lay_file(final / rel, tree, rel)
    return sorted(str(rel) for rel in added)


def lay_file(src: Path, tree: Path, rel: PurePosixPath) -> Path:
    """Copy ``src`` to ``tree/rel`` (a kit-owned copy), whatever the agent left on that path."""
    target = tree / rel
    _make_parents(tree, target)
    if target.is_dir():
        trees.remove_tree(target)  # ... or a folder where the base has a file (any depth)
    shutil.copyfile(src, target)
    return target


def _make_parents(tree: Path, target: Path) -> None:
    """The folders above ``target`` in ``tree``, a file on the way removed."""
    for parent in reversed(target.relative_to(tree).parents[:-1]):
        if (tree / parent).is_file():
            (tree / parent).unlink()  # the agent put a file where the base has a folder
    target.parent.mkdir(parents=True, exist_ok=True)


def pytest_config_file(root: Path) -> Path | None:
    """The file pytest would take its configuration from when started in ``root`` (pytest 9 rules:
    :func:`.pytestconfig.config_file`)."""
    return pytestconfig.config_file(root)
