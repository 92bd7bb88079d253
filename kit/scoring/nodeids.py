"""pytest node ids, taken apart once for all of scoring: ``path.py::Class::name[case]``.

The parameter id goes -- it may hold ``::`` itself (boltons' ``[https://[::101.45.75.219]:80/]``) --
but only after the module's path, which may hold ``[`` (``tests/v[1]/test_x.py``: RT42-4). And is a
node one of ``--deselect``-style ids or under one (:func:`under`)? Used by the kit and inside the
scoring sandbox, loaded by the plugin from its own folder: it imports nothing."""

from __future__ import annotations

from collections.abc import Iterable


def without_case(nodeid: str) -> str:
    """``path.py::Class::name[case]`` -> ``path.py::Class::name``."""
    at = nodeid.find(".py::")
    cut = nodeid.find("[", at + 5 if at >= 0 else 0)
    return nodeid if cut < 0 else nodeid[:cut]


def split(nodeid: str) -> tuple[str, str]:
    """A test's node id as (the node id of its class or module, its function's name)."""
    scope, _, name = without_case(nodeid).rpartition("::")
    return scope, name


def index(ids: Iterable[str]) -> tuple[frozenset[str], frozenset[str]]:
    """``ids`` as they are (whole, or before a ``::``) and as folders (before a ``/``)."""
    ids = tuple(ids)
    return frozenset(ids), frozenset(i.rstrip("/") for i in ids)


def under(nodeid: str, ids: tuple[frozenset[str], frozenset[str]], params: bool = True) -> bool:
    """Is ``nodeid`` one of ``ids`` (:func:`index`) or under one -- a folder, a module, a class and,
    with ``params``, a parametrized test? (pytest's ``--deselect`` matches any prefix: ``::test_f``
    would take ``::test_foo`` too.)"""
    whole, folders = ids
    if nodeid in whole:
        return True
    for sep, among in (("::", whole), ("[", whole if params else frozenset()), ("/", folders)):
        k = nodeid.find(sep)
        while k != -1:
            if nodeid[:k] in among:
                return True
            k = nodeid.find(sep, k + 1)
    return False
