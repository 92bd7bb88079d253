"""Which data files of the repo copy a scoring session's tests read, and whether the tests or the code
under test read them: the importer's record (``record`` in the settings), heard by the audit hook
(``audit.py``) on each ``open``. It runs INSIDE the scoring sandbox, loaded by the plugin from its own
folder before any code under test loads, and imports nothing from the kit."""

from __future__ import annotations

import os
from collections.abc import Callable

_readlink, _abspath, _fsdecode, _isfile = os.readlink, os.path.abspath, os.fsdecode, os.path.isfile


def reader(audit: object, code_kinds: tuple[int, ...]) -> Callable[[tuple, object], tuple[str, str] | None]:
    """``read(args, frame)`` for ``audit`` (``audit.Audit``): ``code_kinds`` are its file kinds of the
    repo's code (the agent's and the base's)."""
    repo, tests, is_hidden, kind = audit.repo, audit.tests, audit.is_hidden, audit.kind  # type: ignore[attr-defined]

    def read(args: tuple, frame: object) -> tuple[str, str] | None:
        """(path relative to the repo copy, "test" or "code") of a data file of the copy opened for
        reading -- by the tests (the nearest frame that is neither the stdlib's nor pytest's is
        test code) or by the code under test -- or None."""
        path = args[0] if args else None
        if isinstance(path, int) and not isinstance(path, bool):
            try:
                path = _readlink(f"/proc/self/fd/{path}")
            except OSError:
                return None
        if not isinstance(path, str | bytes):
            return None
        mode, flags = (args[1] if len(args) > 1 else None), (args[2] if len(args) > 2 else 0)
        if (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            mode is None and isinstance(flags, int) and flags & 3
        ):
            return None  # written, not read
        full = _abspath(_fsdecode(path))
        if not full.startswith(repo) or full.endswith((".py", ".pyc")) or not _isfile(full):
            return None
        while frame is not None:
            name = frame.f_code.co_filename  # type: ignore[attr-defined]
            if name in tests or is_hidden(name):
                return full[len(repo) :], "test"
            if kind(name) in code_kinds:
                return full[len(repo) :], "code"
            frame = frame.f_back  # type: ignore[attr-defined]
        return None

    return read
