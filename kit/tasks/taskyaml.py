"""Writing a ``task.yaml`` (the importers do): checked against :class:`~kit.tasks.task.TaskFile`,
keys in the order given, a multi-line prompt as a readable literal block."""

from __future__ import annotations

from pathlib import Path

import yaml

from kit.tasks.task import TASK_FILE, TaskFile


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings (the prompt) as readable literal blocks."""


def _str_presenter(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_BlockDumper.add_representer(str, _str_presenter)


def write_task_file(folder: Path, spec: dict) -> Path:
    """Write ``spec`` (checked against :class:`TaskFile`) as ``folder/task.yaml``, keys in the order
    given, a multi-line prompt as a literal block."""
    TaskFile.model_validate(spec)
    path = Path(folder) / TASK_FILE
    path.write_text(
        yaml.dump(spec, Dumper=_BlockDumper, sort_keys=False, allow_unicode=True, width=100),
        encoding="utf-8",
    )
    return path
