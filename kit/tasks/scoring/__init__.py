"""Scoring a finished run: a clean copy of the clone, the hidden acceptance tests and the base's own
tests in sandboxed pytest sessions, and the score.

``launcher.py``, ``plugin.py``, ``observe.py`` and ``audit.py`` run inside the sandbox and import
nothing from the kit (the kit is not visible there); ``session`` starts one session and ``stream``
checks its report, ``sessions`` runs the three of an evaluation (``layout``: the ``repo`` acceptance
layout; ``basecode``: which code is the base's), ``clean_copy`` makes the copies, ``verdicts`` turns
outcomes into requirements, ``scorer`` puts it together.
"""
