"""Every test-like name a tree may hold -- not only those in the test modules the kit injects into.

A scoring session matches a canary's or a twin's report by its test's name (a class of tests can be
collected in several modules), so the name the kit gives one must be no test's of the session. The
test modules it injects into are parsed for that; the names below are the rest:

- ``test_*`` written in any Python file. cachetools' test classes inherit ``test_clear_empty`` and
  15 others from a mixin in ``tests/__init__.py``, which is no test module: about one own-tests
  session in 200 named a must-fail canary ``test_clear_empty``, read the mixin's passing copies of it
  as the canary's report, and called the session tampered (an honest run ``suspicious``; at a
  task's first scoring, the base refused).
- in a session whose configuration collects other names (``python_functions = check_*``: the kit's
  names follow it, :mod:`.naming`), the names of its forms too (``check_*``, ``*_check``).
- ``test_`` and a file's stem (and the forms' prefix or suffix with it), for any file: Python-Markdown makes a test of each of its data files
  (``raw-html.txt`` is ``test_raw_html``) while collecting; 2 own-tests sessions in 100 took one of
  those names. (What no scan finds, the session tells apart by where the test was defined:
  :func:`kit.scoring.stream._placed`.)
- the tests the base's own-tests run reported (:func:`reported`), whatever made them.

A regular expression over the text, not a parse: a name only has to be avoided, and the agent's
files are in the tree. Python identifiers need not be ASCII, and the kit's names are made of a
module's words, whatever their letters: a mixin's ``test_grøn_blå`` was read as ``test_gr`` and the
kit's canary took its name (RT42-2). Each name is taken as Python takes it (NFKC: ``test_ﬁle`` is
``test_file``), from the text in the file's declared encoding. Files past :data:`MAX_TOTAL` bytes
are not read (their names can still collide: a false alarm on the run that wrote them, never a
credit)."""

from __future__ import annotations

import hashlib
import io
import os
import re
import stat
import threading
import tokenize
import unicodedata
from collections import OrderedDict
from collections.abc import Iterable
from pathlib import Path

from kit.scoring.clean_copy import SKIP_NAMES
from kit.scoring.naming import name_pattern
from kit.scoring.nodeids import split

#: The kit's test names (canaries, twins, shadows) start ``test_`` (or take the form the session's
#: configuration collects: :func:`.naming.name_pattern`); its other names never hold ``test``.
TEST_NAME = re.compile(r"(?<!\w)test_\w+")
Forms = tuple[tuple[str, str], ...] | list[tuple[str, str]]
MAX_TOTAL = 32 * 1024 * 1024


def used_test_names(*roots: Path, forms: Forms = ()) -> set[str]:
    """The ``test_*`` identifiers in the ``.py`` files under ``roots`` (and those of ``forms``:
    ``(prefix, suffix)``), and ``test_`` + each file's stem (each form's too; links not followed, the
    folders :data:`~.clean_copy.SKIP_NAMES` left out, at most :data:`MAX_TOTAL` bytes read)."""
    forms = tuple(f for f in forms if f != ("test_", ""))
    pattern = name_pattern(list(forms)) if forms else TEST_NAME
    found: set[str] = set()
    budget = MAX_TOTAL
    for root in roots:
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_NAMES)
            for name in sorted(files):
                stem = os.path.splitext(name)[0].replace(" ", "_").replace("-", "_")
                found.update(["test_" + stem, *(prefix + stem + suffix for prefix, suffix in forms)])
                path = Path(folder, name)
                try:
                    info = path.lstat()  # a regular file only: no link, no fifo to block on
                    if not name.endswith(".py") or not stat.S_ISREG(info.st_mode) or info.st_size > budget:
                        continue
                    with open(
                        path, "rb", opener=lambda p, f: os.open(p, f | os.O_NOFOLLOW | os.O_NONBLOCK)
                    ) as fh:
                        data = fh.read(budget)
                except OSError:
                    continue
                budget -= len(data)
                found.update(_names_in(data, pattern))
    return {n for n in found if n.isidentifier()}


_SEEN: OrderedDict[tuple[bytes, str], frozenset[str]] = OrderedDict()  # (digest, pattern) -> names
_SEEN_LOCK = threading.Lock()
SEEN_KEPT = 8192


def _names_in(data: bytes, pattern: re.Pattern[str] = TEST_NAME) -> frozenset[str]:
    """The ``test_*`` names of one file, as Python takes them, remembered by its digest: a scoring
    reads the base's tree and two copies of the agent's, mostly the same files (boltons: 0.11 s)."""
    digest = (hashlib.blake2b(data, digest_size=20).digest(), pattern.pattern)
    with _SEEN_LOCK:
        if digest in _SEEN:
            _SEEN.move_to_end(digest)
            return _SEEN[digest]
    names = frozenset(unicodedata.normalize("NFKC", n) for n in pattern.findall(_text(data)))
    with _SEEN_LOCK:
        _SEEN[digest] = names
        while len(_SEEN) > SEEN_KEPT:
            _SEEN.popitem(last=False)
    return names


def _text(data: bytes) -> str:
    """``data`` decoded as Python decodes a source file (its coding line, else UTF-8)."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError:
        encoding = "utf-8"
    try:
        return data.decode(encoding, errors="replace")
    except LookupError:
        return data.decode("utf-8", errors="replace")


def reported(nodeids: Iterable[str]) -> set[str]:
    """The test names of ``nodeids`` (``path.py::Class::name[param]`` -> ``name``; the path may hold
    ``[``, the parameter id ``::``)."""
    return {split(n)[1] for n in nodeids}


#: How many names the agent's tree may add to the base's and still be avoided (an honest change adds
#: a few: a test in a mixin the hidden tests inherit). More are not avoided: they could use up every
#: name of a module's words, and a name the kit gives then would stand out.
MAX_ADDED = 500


def names_to_avoid(base: Path, copy: Path, known: Iterable[str] = (), forms: Forms = ()) -> set[str]:
    """The names the hidden-test session's twins and canaries may not take: the base tree's and
    ``known`` (:func:`reported` by the base's run), and those ``copy`` (the agent's tree) adds,
    unless it adds over :data:`MAX_ADDED` (then a collision only costs that run: a twin or canary
    read as passed or failed by the name of the agent's test)."""
    avoid = used_test_names(base, forms=forms) | set(known)
    added = used_test_names(copy, forms=forms) - avoid
    return avoid | added if len(added) <= MAX_ADDED else avoid
