"""What one import is asked (:class:`Options`) and what it found (:class:`ImportResult`)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

from kit.errors import TaskError
from kit.paths import TASKS_DIR
from kit.records.schema import TaskSize


@dataclass
class Options:
    repo: Path
    commit: str | None = None
    range: str | None = None
    task_id: str | None = None
    prompt_file: Path | None = None
    out: Path = TASKS_DIR
    tests: list[str] | None = None
    severities: Path | None = None
    timeout_s: float = 120.0
    probe_budget_s: float | None = None  # all probe sessions together (None: probe.BUDGET_FACTOR x timeout_s)
    sandbox: str | None = None
    force: bool = False
    repo_url: str | None = None
    command: str = ""
    exclude: dict[str, str] = field(default_factory=dict)  # hidden test node id -> why it is left out


@dataclass
class ImportResult:
    task_id: str
    task_dir: Path | None = None  # None: refused
    base: str = ""
    head: str = ""
    commits: int = 0
    solution_files: int = 0
    hidden: dict[str, str] = field(default_factory=dict)  # requirement key -> severity
    kinds: dict[str, str] = field(default_factory=dict)  # requirement key -> how it fails at the base
    dropped: dict[str, str] = field(default_factory=dict)  # candidate key -> why it is no hidden test
    deselected: dict[str, str] = field(default_factory=dict)  # own test node id -> why it is left out
    ignored: dict[str, str] = field(default_factory=dict)  # own test module -> why it is not collected
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # why it was refused
    seconds: float = 0.0
    size: TaskSize | None = None  # the task's measured size (kit.importers.size)
    gaps: list = field(default_factory=list)  # the specification audit's gaps (kit.importers.spec_audit.Gap)

    @property
    def ok(self) -> bool:
        return self.task_dir is not None and not self.problems


def drop(result: ImportResult, key: str, why: str) -> None:
    """Take ``key`` out of the hidden tests, saying why; TaskError when none is left."""
    result.dropped[key] = why
    result.hidden.pop(key, None)
    result.kinds.pop(key, None)
    if not result.hidden:
        raise TaskError(
            "no hidden test is left in the assembled task:\n    "
            + "\n    ".join(f"{k}: {v}" for k, v in result.dropped.items())
        )


def own_test_command(ignored: dict[str, str]) -> str:
    """The own tests' command: pytest, told not to collect the modules in ``ignored``."""
    return " ".join(["python -m pytest -q", *(shlex.quote(f"--ignore={p}") for p in sorted(ignored))])
