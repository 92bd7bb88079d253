"""Scoring a finished run: a clean copy of the clone, the hidden acceptance tests and the base's own
tests in sandboxed pytest sessions, and the score -- the most security-critical code in the kit.

``launcher.py``, ``plugin.py``, ``observe.py`` and ``audit.py`` run inside the sandbox and import
nothing from the kit (the kit is not visible there); ``session`` starts one session and ``stream``
checks its report, ``sessions`` runs the three of an evaluation (``layout``: the ``repo`` acceptance
layout; ``basecode``: which code is the base's), ``clean_copy`` makes the copies, ``verdicts`` turns
outcomes into requirements, ``scorer`` puts it together.

May import: the top-level modules, ``kit.records``, ``kit.sandbox``, ``kit.model``, ``kit.agent``,
``kit.tasks``.
"""

from kit import aliases as _aliases


def __getattr__(name: str) -> object:  # old names of the flat ``kit/scoring.py``, for one release
    return _aliases.old_name(__name__, name)
