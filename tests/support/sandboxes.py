"""The sandbox backends a guarantee test runs under: every test that checks a sandbox guarantee takes
``backend`` from :func:`backends`, so bwrap, podman and docker are held to the same tests.

A container backend's cases are marked ``container`` and skip -- with the reason -- only where its
engine cannot run here (client missing, no daemon, a runtime that fails: the kit's own error, which
says what to do). Its default image is built once per machine and kept while its inputs are unchanged
(:func:`kit.sandbox.images.build_default`), so a test session pays ~1 s per backend to check it.
"""

from __future__ import annotations

import functools

import pytest

from kit.errors import KitError
from kit.sandbox.backends import CONTAINER_BACKENDS, check_available, get_sandbox

ALL = ("bwrap", *CONTAINER_BACKENDS)


@functools.cache
def unavailable(name: str) -> str | None:
    """Why backend ``name`` cannot run a command here (None: it can). Builds the kit's image first
    where it is missing or stale."""
    try:
        box = get_sandbox(name)
        if name in CONTAINER_BACKENDS:
            from kit.sandbox.images import build_default

            build_default(box, source="host")
        check_available(name)
    except (KitError, OSError) as exc:
        return f"{name} cannot run here: {exc}"
    return None


def backends(*names: str) -> list:
    """``pytest.param`` per backend (default: all of :data:`ALL`), the container ones marked."""
    return [
        pytest.param(n, marks=[pytest.mark.container] if n in CONTAINER_BACKENDS else [], id=n)
        for n in (names or ALL)
    ]


def skip_unless_ready(name: str) -> None:
    if name in CONTAINER_BACKENDS and (why := unavailable(name)):
        pytest.skip(why)
