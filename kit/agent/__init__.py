"""One role's conversation: the agent loop, the run's call budget, and the tools (one small interface a
tool may use, one function per tool, the toolbox that enforces permissions, safe file access).

May import: the top-level modules, ``kit.records``, ``kit.sandbox``, ``kit.model``.
"""

from kit import aliases as _aliases


def __getattr__(name: str) -> object:  # old names of the flat ``kit/agent.py``, for one release
    return _aliases.old_name(__name__, name)
