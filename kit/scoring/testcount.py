"""How many test functions a tree's test files hold (``Score.tests_at_base`` and the count of the
final tree), each file parsed once per process and content: a task's test files are mostly the
base's, every scoring (more-itertools' parse took 0.09 s of each, before the sessions could start)."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from pathlib import Path

from kit import pyast
from kit.scoring.naming import DEFAULT, Collecting
from kit.tasks.requirements import test_files

#: A test file larger than this is not parsed in the kit's process (its functions are not counted):
#: parsing takes hundreds of times a file's size in memory (a 2 MB file cost 1 GB), and the agent
#: writes these files. Nor is more than :data:`MAX_PARSE_TOTAL` parsed per count.
MAX_PARSE_BYTES = 256 * 1024
MAX_PARSE_TOTAL = 4 * 1024 * 1024


def count_test_functions(folder: Path, collecting: Collecting = DEFAULT) -> int:
    """Test functions (``def test*``, module level or in ``Test*`` classes -- or the names the
    session's configuration collects: ``collecting``, :mod:`.naming`) in test files under folder
    (files over :data:`MAX_PARSE_BYTES`, and any after :data:`MAX_PARSE_TOTAL` bytes were parsed, count
    none: one parse at a time, each bounded)."""
    n = parsed = 0
    for path in test_files(folder):
        try:
            size = path.lstat().st_size
            if path.is_symlink() or size > MAX_PARSE_BYTES or parsed + size > MAX_PARSE_TOTAL:
                continue
            parsed += size
            n += _tests_in(path.read_bytes(), collecting)
        except (SyntaxError, ValueError, OSError, RecursionError, MemoryError):
            continue  # the agent's files may be anything
    return n


_COUNTED: OrderedDict[tuple[bytes, Collecting], int] = OrderedDict()  # (digest, configuration) -> tests
_COUNTED_LOCK = threading.Lock()
COUNTED_KEPT = 4096


def _tests_in(source: bytes, collecting: Collecting = DEFAULT) -> int:
    """The test functions of one test file's source, remembered by its digest."""
    digest = (hashlib.blake2b(source, digest_size=20).digest(), collecting)
    with _COUNTED_LOCK:
        if digest in _COUNTED:
            return _COUNTED[digest]
    tree = pyast.parse(source)  # (bytes: a byte-order mark or a coding line read as Python reads them)
    n = sum(1 for node in tree.body if collecting.is_test_func(node)) + len(collecting.class_tests(tree.body))
    with _COUNTED_LOCK:
        _COUNTED[digest] = n
        while len(_COUNTED) > COUNTED_KEPT:
            _COUNTED.popitem(last=False)
    return n
