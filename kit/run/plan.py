"""The plan of an experiment: the matrix of runs, and what each run's record says about where it came
from (the kit commit, the profile with its secrets masked).

:func:`plan` expands ``tasks x strategies x repeats`` into :class:`RunSpec` s and fails up front on an
unknown task, strategy or role, before any run starts (``docs/records.md``, ``## run.json``).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from typing import Any

from kit import strategies
from kit.config import Experiment, Profile
from kit.paths import REPO_ROOT
from kit.secrets import is_secret_env, looks_secret
from kit.tasks.git import git
from kit.tasks.task import Task, expand_tasks, load_tasks


@dataclass(frozen=True)
class RunSpec:
    task: Task
    strategy: str
    repeat: int

    def run_id(self, profile: str) -> str:
        return f"{self.task.id}__{self.strategy}__{profile}__r{self.repeat}"


def kit_commit() -> str:
    """The kit's git commit (``+dirty`` when the work tree has changes), or '' outside git."""
    env = dict(os.environ)  # the kit's own checkout: the user's git config applies (safe.directory ...)
    try:
        head = git(
            REPO_ROOT, "rev-parse", "HEAD", env=env, timeout=10, check=False, own_checkout=True
        ).stdout.strip()
        dirty = git(
            REPO_ROOT,
            "status",
            "--porcelain",
            "--untracked-files=no",
            env=env,
            timeout=10,
            check=False,
            own_checkout=True,
        )
        dirty = dirty.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
    return f"{head}+dirty" if head and dirty else head


def _masked(value: Any, key: str = "") -> Any:
    if is_secret_env(key) or looks_secret(key):
        return "***"
    if isinstance(value, dict):  # e.g. extra_headers: {"x-api-key": ...}
        return {str(k): _masked(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_masked(v) for v in value]
    return value if isinstance(value, str | int | float | bool | None) else repr(value)


def redacted(profile: Profile) -> dict[str, Any]:
    """The profile as stored in run.json: secrets a user put under a tier's ``extra`` (nested dicts
    such as ``extra_headers`` included) are masked by name; the recorder masks them by value too."""
    data = profile.model_dump(mode="json", exclude={"tiers": {t: {"extra"} for t in profile.tiers}})
    for tier, spec in profile.tiers.items():
        data["tiers"][tier]["extra"] = {k: _masked(v, k) for k, v in spec.extra.items()}
    return data


def plan(experiment: Experiment) -> list[RunSpec]:
    """The matrix, validated up front: unknown tasks, strategies or roles fail before anything runs."""
    tasks = load_tasks(expand_tasks(experiment.tasks))  # `suite:<name>` -> its tasks; every unbuilt named
    for name in experiment.strategies:
        strategies.get(name)
    strategies.check_experiment(experiment)  # options, prompt names, roles: typos with a suggestion
    strategies.experiment_tiers(experiment.strategies, experiment.tiers)
    return [
        RunSpec(task, strategy, repeat)
        for task in tasks
        for strategy in experiment.strategies
        for repeat in range(1, experiment.repeats + 1)
    ]
