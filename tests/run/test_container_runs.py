"""``kit run`` with ``sandbox: podman`` / ``docker``: the scripted smoke task end to end in containers,
with the outcome and score it gets under bwrap, and run.json saying which image every command ran in."""

from __future__ import annotations

import sys

import pytest

from kit.paths import EXPERIMENTS_DIR
from kit.run.runner import run_experiment
from kit.sandbox import images
from kit.sandbox.backends import CONTAINER_BACKENDS, get_sandbox
from kit.sandbox.container import DEFAULT_IMAGE
from tests.support.helpers import run_json
from tests.support.sandboxes import backends

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="bwrap, the reference, needs Linux")

SMOKE = EXPERIMENTS_DIR / "scripted-smoke.yaml"
SCORE = ("requirements_total", "requirements_failed", "own_tests_total", "regressions", "tampered", "failed")


def _run(folder, sandbox: str) -> dict:
    out = run_experiment(
        SMOKE, results_dir=folder, progress=False, overrides={"tasks": ["micro-slugify"], "sandbox": sandbox}
    )
    (run_dir,) = (out / "runs").iterdir()
    return run_json(run_dir)


@pytest.fixture(scope="module")
def under_bwrap(tmp_path_factory) -> dict:
    return _run(tmp_path_factory.mktemp("bwrap"), "bwrap")


@pytest.mark.parametrize("backend", backends(*CONTAINER_BACKENDS))
def test_the_scripted_smoke_task_runs_in_containers_as_it_runs_under_bwrap(tmp_path, backend, under_bwrap):
    run = _run(tmp_path, backend)
    image_id = images.image_id(get_sandbox(backend), DEFAULT_IMAGE)
    assert (run["sandbox"], run["sandbox_image"], run["sandbox_image_id"]) == (
        backend,
        DEFAULT_IMAGE,
        image_id,
    )
    assert run["settings"]["sandbox_image"] == image_id  # a rebuilt image: a changed run
    assert (under_bwrap["sandbox"], under_bwrap["sandbox_image"], under_bwrap["sandbox_image_id"]) == (
        "bwrap",
        "",
        "",
    )
    assert "sandbox_image" not in under_bwrap["settings"]  # bwrap runs keep their fingerprints
    assert run["outcome"] == under_bwrap["outcome"] == "done" and run["error"] is None
    assert {k: run["score"][k] for k in SCORE} == {k: under_bwrap["score"][k] for k in SCORE}
    assert run["score"]["requirements_failed"] == 0 and run["score"]["requirements_total"] == 7


def test_an_image_without_a_container_backend_is_one_clear_error(tmp_path):
    """An image named for bwrap or none would be silently ignored: the experiment, or the task that
    needs its own image, is refused with what to do."""
    from kit.config import Experiment
    from kit.errors import ConfigError
    from kit.run.sandboxing import run_sandbox
    from kit.tasks.task import load_task

    with pytest.raises(ValueError, match="needs `sandbox: podman` or `sandbox: docker`"):
        Experiment(
            name="x", tasks=["micro-slugify"], strategies=["vibe"], profile="scripted", sandbox_image="img"
        )
    bwrap = Experiment(
        name="x", tasks=["micro-slugify"], strategies=["vibe"], profile="scripted", sandbox="bwrap"
    )
    task = load_task("micro-slugify")
    assert run_sandbox(bwrap, task).spec == "bwrap"
    with pytest.raises(ConfigError, match="give the experiment `sandbox: podman` or `sandbox: docker`"):
        run_sandbox(bwrap, task.model_copy(update={"sandbox_image": "localhost/py38"}))
    folder = tmp_path / "task"
    folder.mkdir()
    (folder / "Containerfile").write_text("FROM localhost/orchbench-python:3.11\n")
    with pytest.raises(ConfigError, match="a Containerfile"):
        run_sandbox(bwrap, task.model_copy(update={"path": folder}))
