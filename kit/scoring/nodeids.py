"""pytest node ids, taken apart once for all of scoring: ``path.py::Class::name[case]``.

The parameter id goes -- it may hold ``::`` itself (boltons' ``[https://[::101.45.75.219]:80/]``) --
but only after the module's path, which may hold ``[`` (``tests/v[1]/test_x.py``: RT42-4)."""

from __future__ import annotations


def without_case(nodeid: str) -> str:
    """``path.py::Class::name[case]`` -> ``path.py::Class::name``."""
    at = nodeid.find(".py::")
    cut = nodeid.find("[", at + 5 if at >= 0 else 0)
    return nodeid if cut < 0 else nodeid[:cut]


def split(nodeid: str) -> tuple[str, str]:
    """A test's node id as (the node id of its class or module, its function's name)."""
    scope, _, name = without_case(nodeid).rpartition("::")
    return scope, name
