"""Where every agent command and every scoring process runs: one ``Sandbox`` interface, a registry of
backends (``bwrap``, ``none``) and the bounded process runner they share.

May import: the top-level modules only.
"""

from kit import aliases as _aliases


def __getattr__(name: str) -> object:  # old names of the flat ``kit/sandbox.py``, for one release
    return _aliases.old_name(__name__, name)
