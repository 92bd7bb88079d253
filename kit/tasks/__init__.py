"""Tasks and what is done with them: task data and requirements, the one git wrapper, workspaces (a
fresh clone per run), validation, ``scoring/`` (the clean copy, the sandboxed pytest session, and the
files that run inside the sandbox and import nothing from the kit) and ``exercism/`` (the importer).

May import: the top-level modules, ``kit.records``, ``kit.sandbox``, ``kit.model``, ``kit.agent``.
"""

from kit import aliases as _aliases


def __getattr__(name: str) -> object:  # old names of the flat ``kit/tasks.py``, for one release
    return _aliases.old_name(__name__, name)
