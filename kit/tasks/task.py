"""Tasks: a starting repo, a prompt, hidden acceptance tests and a reference solution.

A task is a folder (``datasets/tasks/<id>/`` or any folder of a task author's own)::

    task.yaml      id, title, prompt, language, setup, test_command, long, limits, tags
    repo/          the starting code, with its own README and tests (they pass)
    acceptance/    hidden pytest tests, one requirement each, with @pytest.mark.severity("...")
    solution/      the files of the reference change, laid over repo/ (full copies, same paths);
                   solution/DELETED.txt may list files (one a line) the change deletes

``python -m kit tasks validate`` (:mod:`kit.importers.validate`) checks the contract: the own tests pass at the start, every
acceptance test fails at the start (unless marked ``@pytest.mark.baseline_pass``), and with the
solution applied every acceptance and own test passes.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from kit.config import SafeName, load_yaml_model
from kit.errors import ConfigError, TaskError
from kit.paths import TASKS_DIR, built_tasks_dir, is_ignored
from kit.secrets import public_text
from kit.tasks.packages import name_problems
from kit.tasks.suite_manifest import BUILD_COMMAND, ExcludedTest, ExpertEstimate, SpecNote, SuiteManifest
from kit.untrusted.confine import confined, read_capped

TASK_FILE = "task.yaml"
DELETED_FILE = "DELETED.txt"


class TaskLimits(BaseModel):
    """Per-task limits; each overrides what the experiment gives every task."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # each limit at most 6 h: hostile input

    max_steps: int | None = Field(None, ge=1, description="Overrides the experiment's step cap.")
    command_timeout_s: float = Field(120.0, gt=0, le=6 * 3600, description="Timeout of one agent command.")
    scoring_timeout_s: float = Field(120.0, gt=0, le=6 * 3600, description="Timeout of a scoring pytest run.")
    test_timeout_s: float | None = Field(None, gt=0, le=6 * 3600, description=(
        "Time limit of one test (setup, call and teardown) in a scoring session: a test over it is "
        "cut, recorded as failed (timed out) and the session goes on. Default: a quarter of "
        "scoring_timeout_s."))  # fmt: skip

    @property
    def test_limit_s(self) -> float:
        """The time limit of one test in a scoring session (``test_timeout_s`` or its default)."""
        return self.test_timeout_s or self.scoring_timeout_s / 4


class TaskSource(BaseModel):
    """Where a task imported from a repository's history comes from (``kit tasks import-git``
    writes it), so a user can tell a task made before a model's training cutoff from one after."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["git"] = Field(
        "git", description="How the task was made: git = from a repository's history."
    )
    repo_url: str | None = Field(
        None, description="The repository's public URL (its origin remote, credentials cut), or null."
    )
    base: str = Field(description="The commit the starting repo is (full SHA).")
    head: str = Field(description="The commit the reference solution and the hidden tests come from.")
    commits: list[str] = Field(
        default_factory=list, description="The SHAs from base (excluded) to head, oldest first."
    )
    base_date: str | None = Field(None, description="The base commit's committer date (ISO 8601).")
    head_date: str | None = Field(None, description="The head commit's committer date (ISO 8601).")
    licence: str | None = Field(
        None, description="The licence file found in the base tree, as a path inside repo/, or null."
    )
    command: str = Field("", description="The import command line that made the task.")

    @field_validator("repo_url", "command", mode="after")
    @classmethod
    def _no_credentials(cls, value: str | None) -> str | None:
        """A hand-written or older task.yaml's URLs are cut too (kit.secrets.public_url)."""
        if value is None:
            return None
        return public_text(value)


class TaskFile(ExpertEstimate):
    """What task.yaml holds."""

    model_config = ConfigDict(extra="forbid")

    id: SafeName = Field(description="Short name; the folder name for tasks under datasets/tasks/.")
    title: str = Field(description="One line shown in listings and reports.")
    prompt: str = Field(description="Given as is to every strategy.")
    language: str = Field(
        "python", description="The language of repo/ (the kit's tools are written for Python)."
    )
    setup: list[str] = Field(default_factory=list, description="Commands run in the base first, sandboxed.")
    test_command: str = Field("python -m pytest -q", description="Runs the repo's own tests.")
    long: bool = Field(
        False,
        description="Takes long to solve: must agree with the kit's measure (kit.importers.size: 150+ code "
        "lines, 2+ files, 8+ hidden tests); `kit tasks validate` refuses a `long: true` the measure denies.",
    )
    project: str = Field(
        "",
        description="The project the task comes from (build-suite: the manifest's project; import-git: "
        "the repository's name); run records carry it, paired statistics cluster by it.",
    )
    limits: TaskLimits = Field(default_factory=TaskLimits, description="Per-task limits (see TaskLimits).")
    tags: list[str] = Field(default_factory=list, description="Free labels (exercism, git-history, ...).")
    acceptance_layout: Literal["folder", "repo"] = Field(
        "folder",
        description="folder: the hidden tests run from the kit's own folder with the kit's pytest "
        "configuration. repo: acceptance/ mirrors repo-relative paths (hidden test modules, the repo's "
        "conftest.py files, pytest configuration, test data); each file is laid at its own path in the "
        "scoring copy of the final tree, replacing what the agent left there.",
    )
    packages: list[str] = Field(
        default_factory=list,
        description="Top-level import names the repo provides (e.g. more_itertools): scoring and the "
        "agent's commands import them from the tree under test, never from the kit's environment.",
    )
    own_tests_deselect: list[str] = Field(
        default_factory=list,
        description="Node ids of the base's own tests the own-tests sessions leave out (tests the "
        "reference change modified, or that fail at the base or with the reference solution).",
    )
    exclude_tests: list[ExcludedTest] = Field(
        default_factory=list,
        description="Hidden tests left out on purpose, each with why: not requirements, never run as "
        "hidden tests (a suite manifest's `exclude_tests` lands here).",
    )
    spec_notes: list[SpecNote] = Field(
        default_factory=list,
        description="Gaps of the specification audit (`kit tasks audit`) a person explained.",
    )
    spec_gaps: dict[str, int] = Field(
        default_factory=dict,
        description="Written by the importer: the audit's unexplained gaps, counted per kind.",
    )
    source: TaskSource | None = Field(
        None, description="Provenance of a task imported from a repository's history (see TaskSource)."
    )
    sandbox_image: str | None = Field(
        None,
        description="With podman or docker: the image this task's commands and tests run in (over the "
        "experiment's). A `Containerfile` in the task folder is built instead (context: its `container/`).",
    )

    @field_validator("packages")
    @classmethod
    def _import_names(cls, value: list[str]) -> list[str]:
        problems = name_problems(value)
        if problems:
            raise ValueError("; ".join(problems))
        return value


class Task(TaskFile):
    path: Path = Field(exclude=True, description="The task folder (set by the loader).")

    @property
    def excluded(self) -> set[str]:
        """The node ids of the hidden tests left out (``exclude_tests``)."""
        return {e.test for e in self.exclude_tests}

    @property
    def repo_dir(self) -> Path:
        return self.path / "repo"

    @property
    def acceptance_dir(self) -> Path:
        return self.path / "acceptance"

    @property
    def solution_dir(self) -> Path:
        return self.path / "solution"


# --------------------------------------------------------------------------- loading


def _task_folder(id_or_path: str | Path) -> Path:
    p = Path(id_or_path)
    if p.name == TASK_FILE and p.is_file():
        return p.parent
    if p.is_dir() and (p / TASK_FILE).is_file():
        return p
    for root in (TASKS_DIR, built_tasks_dir()):
        candidate = root / str(id_or_path)
        if (candidate / TASK_FILE).is_file():
            return candidate
    if p.is_dir():
        raise ConfigError(
            f"{p} is a folder but has no {TASK_FILE}", "a task folder holds task.yaml, repo/, acceptance/"
        )
    suite = _building_suite(str(id_or_path))
    if suite is not None:
        raise NotBuilt({suite: [str(id_or_path)]})
    known = ", ".join(_task_ids()) or "(none)"
    raise ConfigError(
        f"unknown task {str(id_or_path)!r}", f"pick one of: {known}, or give a task folder path"
    )


class NotBuilt(ConfigError):
    """Tasks a suite's manifest builds (``kit tasks build-suite``) whose folders are not there yet:
    ``missing`` maps each suite to its unbuilt task ids."""

    def __init__(self, missing: dict[str, list[str]]) -> None:
        self.missing = missing
        where = built_tasks_dir()
        parts = [
            f"task {ids[0]!r} of suite {suite!r} is not built (no {where / ids[0]})"
            if len(ids) == 1
            else f"{len(ids)} tasks of suite {suite!r} are not built (no folders in {where}): {', '.join(ids)}"
            for suite, ids in missing.items()
        ]
        commands = " and ".join(BUILD_COMMAND.format(name=suite) for suite in missing)
        super().__init__(
            "; ".join(parts),
            f"build {'it' if sum(map(len, missing.values())) == 1 else 'them'} from clones of the suite's "
            f"projects: {commands} (datasets/suites/README.md)",
        )


def load_tasks(ids: list[str]) -> list[Task]:
    """:func:`load_task` on each id; the tasks of suites not built yet are refused together, every
    one named, not only the first."""
    tasks: list[Task] = []
    missing: dict[str, list[str]] = {}
    for task_id in ids:
        try:
            tasks.append(load_task(task_id))
        except NotBuilt as e:
            for suite, more in e.missing.items():
                missing.setdefault(suite, []).extend(more)
    if missing:
        raise NotBuilt(missing)
    return tasks


def _task_ids() -> list[str]:
    ids: set[str] = set()
    for root in (TASKS_DIR, built_tasks_dir()):
        if root.is_dir():
            ids |= {d.name for d in root.iterdir() if (d / TASK_FILE).is_file()}
    return sorted(ids)


def _building_suite(task_id: str) -> str | None:
    """The suite whose manifest builds ``task_id`` (None: no suite does)."""
    for name in suite_names():
        try:
            suite = load_yaml_model(SUITES_DIR / f"{name}.yaml", Suite, "suite")
        except ConfigError:
            continue  # a broken suite file says so when it is used
        if any(item.id == task_id for item in suite.imports):
            return name
    return None


def load_task(id_or_path: str | Path) -> Task:
    """A task by id (a folder of datasets/tasks/) or by folder path."""
    folder = _task_folder(id_or_path).resolve()
    spec = load_yaml_model(folder / TASK_FILE, TaskFile, "task")
    if folder.parent in (TASKS_DIR.resolve(), built_tasks_dir()) and spec.id != folder.name:
        raise ConfigError(
            f"{folder / TASK_FILE}: field `id`: {spec.id!r} differs from the folder name {folder.name!r}",
            "make them equal",
        )
    task = Task(**spec.model_dump(), path=folder)
    for sub in (task.repo_dir, task.acceptance_dir):
        if not sub.is_dir():
            raise TaskError(f"task {task.id!r}: missing folder {sub}", "a task needs repo/ and acceptance/")
    return task


def list_tasks(built: bool = False) -> list[Task]:
    """The shipped tasks (``datasets/tasks/``); with ``built``, the tasks built from suite manifests
    (:func:`kit.paths.built_tasks_dir`) after them."""
    roots = [TASKS_DIR, built_tasks_dir()] if built else [TASKS_DIR]
    return [
        load_task(d)
        for root in roots
        if root.is_dir()
        for d in sorted(root.iterdir())
        if (d / TASK_FILE).is_file()
    ]


# --------------------------------------------------------------------------- suites

SUITES_DIR = TASKS_DIR.parent / "suites"
SUITE_PREFIX = "suite:"


class Suite(SuiteManifest):
    """A named, fixed list of task ids (``datasets/suites/<name>.yaml``); a suite built from
    repositories' history also has the manifest its tasks are built from (:mod:`kit.tasks.suite_manifest`)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="The file name without .yaml.")
    description: str = ""
    source: str = Field("", description="Where the tasks come from (repository, commit, licence).")
    tasks: list[str] = Field(min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _tasks_from_imports(cls, data: object) -> object:
        if isinstance(data, dict) and "tasks" not in data and isinstance(data.get("imports"), list):
            ids = [i.get("id") for i in data["imports"] if isinstance(i, dict)]
            return {**data, "tasks": ids}
        return data


def suite_names() -> list[str]:
    return sorted(p.stem for p in SUITES_DIR.glob("*.yaml")) if SUITES_DIR.is_dir() else []


def load_suite(name: str, check_tasks: bool = True) -> Suite:
    """The suite ``name`` (or a path to a suite file); with ``check_tasks``, every task it names must
    exist (a task its manifest builds but nobody has built fails naming the build command)."""
    path = Path(name) if str(name).endswith((".yaml", ".yml")) else SUITES_DIR / f"{name}.yaml"
    if not path.is_file():
        raise ConfigError(f"unknown suite {name!r}", f"pick one of: {', '.join(suite_names()) or '(none)'}")
    suite = load_yaml_model(path, Suite, "suite")
    if suite.name != path.stem:
        raise ConfigError(
            f"{path}: field `name`: {suite.name!r} differs from the file name", "make them equal"
        )
    unbuilt: list[str] = []
    for task_id in suite.tasks if check_tasks else []:
        try:
            _task_folder(task_id)  # an unknown task fails here, naming the valid ones
        except NotBuilt:
            unbuilt.append(task_id)  # named together below, every one
    if unbuilt:
        raise NotBuilt({suite.name: unbuilt})
    return suite


def expand_tasks(entries: list[str]) -> list[str]:
    """Task entries of an experiment with each ``suite:<name>`` replaced by the suite's task ids, in
    order; a task named twice (directly or through two suites) is kept once, where it first appears."""
    out: list[str] = []
    for entry in entries:
        ids = load_suite(entry[len(SUITE_PREFIX) :]).tasks if entry.startswith(SUITE_PREFIX) else [entry]
        out += [i for i in ids if i not in out]
    return out


def apply_solution(task: Task, root: Path) -> None:
    """Lay the reference solution over ``root`` (DELETED.txt entries removed, then files copied). Every
    path is checked first (:func:`kit.untrusted.confine.confined`, against ``solution/`` and ``root``):
    one that is absolute, holds ``..`` or a control character, or goes through a link refuses the
    whole solution before anything is copied or removed (TaskError naming it)."""
    if not task.solution_dir.is_dir():
        raise TaskError(f"task {task.id!r} has no solution/ folder")
    copies = []
    for rel in solution_files(task):
        src = confined(task.solution_dir, rel, f"task {task.id!r}: solution file")
        copies.append((src, confined(root, rel, f"task {task.id!r}: solution file")))
    removals = [
        confined(root, line, f"task {task.id!r}: {DELETED_FILE} line", leaf_link=True)
        for line in deleted_lines(task)
        if not is_ignored(Path(line))  # (never the clone's own .git)
    ]
    for path in removals:  # first: a file the change deletes may become a folder, or the reverse
        if path.is_symlink() or path.is_file():
            path.unlink()
    for src, dest in copies:
        if any(p.is_file() for p in dest.parents if p.is_relative_to(root)):  # not in DELETED.txt
            dest = dest.relative_to(root)  # (named by its repo path, never the scratch folder's)
            raise TaskError(f"task {task.id!r}: solution file {dest} needs a folder where a file is")
        dest.parent.mkdir(parents=True, exist_ok=True)
        if not dest.is_symlink() and dest.is_dir() and not any(dest.iterdir()):
            dest.rmdir()  # a folder whose files the change deleted becomes this file
        if dest.is_symlink() or dest.is_dir():
            raise TaskError(f"task {task.id!r}: solution file {dest} would replace a link or folder")
        shutil.copy2(src, dest)


def solution_files(task: Task) -> list[str]:
    """The solution's files (repo-relative, ``DELETED.txt`` and ignored litter left out), found
    without following links: a link in ``solution/`` is listed, and :func:`confined` refuses it."""
    out = []
    for dirpath, dirnames, filenames in os.walk(task.solution_dir):
        links = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        for name in sorted([*filenames, *links]):
            rel = Path(dirpath, name).relative_to(task.solution_dir)
            if rel.as_posix() != DELETED_FILE and not is_ignored(rel):
                out.append(rel.as_posix())
    return sorted(out)


def deleted_lines(task: Task) -> list[str]:
    """The paths ``solution/DELETED.txt`` lists: one a line, split at ``\\n`` only and taken exactly
    (no stripping: ``'a.py '`` is its own file), empty lines and lines starting with ``#`` left out.
    A name holding a line break, or starting with ``#``, cannot be listed (the importer refuses it)."""
    deleted = task.solution_dir / DELETED_FILE
    if deleted.is_symlink():
        raise TaskError(f"task {task.id!r}: solution/{DELETED_FILE} is a symbolic link: refused")
    if not deleted.is_file():
        return []
    return read_deleted(read_capped(deleted, f"task {task.id!r}: solution/{DELETED_FILE}"))


def read_deleted(text: str) -> list[str]:
    """The paths a ``DELETED.txt`` text lists (see :func:`deleted_lines`)."""
    return [line for line in text.split("\n") if line and not line.startswith("#")]
