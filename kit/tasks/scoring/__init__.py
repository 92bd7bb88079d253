"""Scoring a finished run: a clean copy of the clone, the hidden acceptance tests and the base's own
tests in sandboxed pytest sessions, and the score.

``launcher.py`` and ``plugin.py`` run inside the sandbox and import nothing from the kit (the kit is
not visible there); ``session`` starts them, ``clean_copy`` makes the copy, ``scorer`` puts it together.
"""
