"""The run folder's formats and the recorder: what a run writes, as it happens.

``schema`` holds the record models (one call attempt, one event, one transcript entry, run.json) and
the file names; the recorder appends JSONL lines as they happen and writes run.json atomically;
``parquet`` keeps the columnar copies of the logs. The contract is written down in ``docs/records.md``.

May import: the top-level modules only (``kit.errors``, ``kit.paths``, ``kit.config``, ``kit.usage``,
``kit.secrets``).
"""

from kit import aliases as _aliases


def __getattr__(name: str) -> object:  # old names of the flat ``kit/records.py``, for one release
    return _aliases.old_name(__name__, name)
