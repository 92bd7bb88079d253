"""Which sandbox a run's commands go through: the experiment's backend and, for podman or docker, the
image -- the task's ``Containerfile`` (built once, kept by the hash of its content), else the task's
``sandbox_image``, else the experiment's, else the kit's default -- pinned by its id, so every command
of the run (the agent's, the snapshot's, scoring's) runs in exactly that image and run.json says which.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from kit.config import Experiment
from kit.errors import ConfigError
from kit.sandbox import images
from kit.sandbox.backends import CONTAINER_BACKENDS, get_sandbox
from kit.tasks.task import Task

CONTAINERFILE = "Containerfile"


@dataclass(frozen=True)
class RunSandbox:
    spec: str  # what commands run through: "bwrap", "none", "podman@sha256:..."
    backend: str
    image: str = ""  # the image's name (container backends)
    image_id: str = ""

    def settings(self) -> dict[str, str]:
        """What the run's fingerprint holds of it (the image by id: a rebuilt image is a change)."""
        return {"sandbox_image": self.image_id} if self.image_id else {}


def run_sandbox(experiment: Experiment, task: Task) -> RunSandbox:
    """The sandbox of ``task``'s runs in ``experiment`` (builds the task's image on first use)."""
    return task_sandbox(experiment.sandbox, task, experiment.sandbox_image)


def task_sandbox(backend: str, task: Task, image: str | None = None) -> RunSandbox:
    """The sandbox ``task`` runs in under ``backend`` (``image``: for tasks that name none)."""
    containerfile = Path(task.path) / CONTAINERFILE
    if backend not in CONTAINER_BACKENDS:
        if task.sandbox_image or containerfile.is_file():
            own = f"sandbox_image {task.sandbox_image!r}" if task.sandbox_image else "a Containerfile"
            raise ConfigError(
                f"task {task.id} names the image it runs in ({own}), which `sandbox: {backend}` cannot "
                "run: give the experiment `sandbox: podman` or `sandbox: docker` (or --sandbox), or leave "
                "the task out (--tasks)"
            )
        return RunSandbox(backend, backend)
    if containerfile.is_file():
        st = containerfile.stat()
        return _task_built(backend, task.id, str(containerfile), st.st_size, st.st_mtime_ns)
    return _named(backend, task.sandbox_image or image)


@functools.lru_cache(maxsize=256)
def _named(backend: str, name: str | None) -> RunSandbox:
    image = images.resolve(get_sandbox(backend), name)
    return RunSandbox(image.spec(backend), backend, image.name, image.id)


@functools.lru_cache(maxsize=256)
def _task_built(backend: str, task_id: str, containerfile: str, _size: int, _mtime: int) -> RunSandbox:
    image = images.task_image(get_sandbox(backend), task_id, Path(containerfile))
    return RunSandbox(image.spec(backend), backend, image.name, image.id)
