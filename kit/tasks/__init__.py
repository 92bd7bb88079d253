"""The task contract: task data and requirements, the one git wrapper, workspaces (a fresh clone per
run), patches, the clone's snapshot, and suite manifests -- what a task is, not how it is scored or made.

Scoring lives in ``kit.scoring``, the importers and validation in ``kit.importers``.

May import: the top-level modules, ``kit.records``, ``kit.sandbox``, ``kit.model``, ``kit.agent``.
"""

from kit import aliases as _aliases


def __getattr__(name: str) -> object:  # old names of the flat ``kit/tasks.py``, for one release
    return _aliases.old_name(__name__, name)
