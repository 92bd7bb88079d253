"""The experiment: its plan, one run end to end, the thread and Ray executors, Ctrl-C and the lock.

May import: everything above it (top level, ``records``, ``sandbox``, ``model``, ``agent``, ``tasks``,
``strategies``).
"""
