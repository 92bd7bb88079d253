"""Run an experiment's runs as Ray tasks: ``python -m kit run EXP --executor ray [--address ...]``.

Each run is one Ray task. On the worker it unpacks the task folder (shipped once per task as a Ray
object), runs :func:`kit.run.single.run_one` -- workspace, strategy, scoring -- into a worker-local temp
folder, and returns the files of the run folder (bytes and mtimes; the git clone ``repo/`` stays on
the worker, its ``diff.patch`` comes back). The driver alone writes ``results/``: each run folder is
assembled under ``<experiment>/.incoming/``, ``run.json`` last, and moved into ``runs/<id>`` with one
rename, so a killed driver leaves either a whole run or none (resume, the report and analysis work
unchanged). A task that fails as a task (worker died, node lost, unpicklable input) becomes a run with
outcome ``error`` and the Ray error as its message.

Ray is an optional dependency: ``pip install -e '.[ray]'``. The worker nodes need the kit installed
(same version) and the provider keys in their environment; see the README.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import shutil
import tarfile
import tempfile
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kit import trees
from kit.config import Experiment, PriceSheet, Profile
from kit.errors import KitError
from kit.records.recorder import Progress
from kit.records.schema import RUN, RunRecord
from kit.run.plan import RunSpec, kit_commit
from kit.run.progress import ExperimentState, progress_bar, refresh
from kit.run.single import failed_run, run_one
from kit.tasks.task import Task, load_task

INCOMING = ".incoming"
WORKSPACE = "repo"  # the run's git clone: left on the worker


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise KitError(
            "the Ray executor needs ray, which is not installed",
            "pip install -e '.[ray]' (or run without --executor ray)",
        ) from None
    return ray


def pack_task(task: Task) -> bytes:
    """The task folder as a gzipped tar (mtimes kept: the workspace base cache keys on them)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(task.path, arcname=task.path.name)
    return buf.getvalue()


def _unpack_task(blob: bytes, dest: Path) -> Task:
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        tar.extractall(dest, filter="tar")
    (folder,) = [p for p in dest.iterdir() if p.is_dir()]
    return load_task(folder)


def _files(root: Path, skip_top: str | None = None) -> dict[str, tuple[bytes, int]]:
    """Regular files under ``root`` (relative POSIX path -> (bytes, mtime_ns)); symlinks are not followed."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        if here == root and skip_top in dirnames:
            dirnames.remove(skip_top)
        if here == root and skip_top and f"{skip_top}.img" in filenames:
            filenames.remove(f"{skip_top}.img")
        for name in filenames:
            path = here / name
            if path.is_file() and not path.is_symlink():
                out[path.relative_to(root).as_posix()] = (path.read_bytes(), path.stat().st_mtime_ns)
    return out


def run_remote(
    task_blob: bytes,
    strategy: str,
    repeat: int,
    experiment: Experiment,
    profile: Profile,
    sheet: PriceSheet,
    commit: str,
    progress: Any = None,
) -> dict[str, Any]:
    """The body of one Ray task: one run in a worker-local temp folder; returns its files. ``progress``
    (a Ray queue) is sent the run's :class:`~kit.records.recorder.Progress` after each call and phase."""
    with tempfile.TemporaryDirectory(prefix=f"orchbench-ray-{os.getpid()}-") as tmp:  # (swept if killed)
        task = _unpack_task(task_blob, Path(tmp) / "task")
        spec = RunSpec(task, strategy, repeat)
        out = Path(tmp) / "out" / experiment.name
        run_one(spec, experiment, profile, sheet, out, commit, on_progress=_sender(progress))
        run_dir = out / "runs" / spec.run_id(profile.name)
        return {
            "run": _files(run_dir, skip_top=WORKSPACE),  # (and its quota image, repo.img)
            "other": {k: v for k, v in _files(out, skip_top="runs").items()},
        }


def _sender(queue: Any) -> Callable[[Progress], None] | None:
    """A worker's progress reports into the driver's queue (dropped when it is full: a live view)."""
    if queue is None:
        return None

    def send(p: Progress) -> None:
        with contextlib.suppress(Exception):  # a full or gone queue never fails the run
            queue.put_nowait(dataclasses.asdict(p))

    return send


def _drain(queue: Any, on_progress: Callable[[Progress], None] | None) -> None:
    """Hand every report waiting in ``queue`` to ``on_progress``."""
    if queue is None or on_progress is None:
        return
    with contextlib.suppress(Exception):
        while not queue.empty():
            on_progress(Progress(**queue.get_nowait()))


def _safe(root: Path, rel: str) -> Path:
    path = (root / rel).resolve()
    if not path.is_relative_to(root.resolve()) or path == root.resolve():
        raise KitError(f"a worker returned a file outside its run folder: {rel!r}")
    return path


def _write(root: Path, files: dict[str, tuple[bytes, int]]) -> None:
    for rel, (data, mtime) in sorted(files.items()):
        path = _safe(root, rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        os.utime(path, ns=(mtime, mtime))


def install_run(out: Path, run_id: str, files: dict[str, tuple[bytes, int]]) -> RunRecord:
    """Write a run folder returned by a worker into ``out/runs/run_id``: assembled aside, run.json
    last, then one rename (an old torn folder of the same run is replaced)."""
    if RUN not in files:
        raise KitError(f"the worker returned run {run_id} without its {RUN}")
    record = RunRecord.model_validate_json(files[RUN][0])
    staging = out / INCOMING / run_id
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    _write(staging, {k: v for k, v in files.items() if k != RUN})
    _write(staging, {RUN: files[RUN]})
    with open(staging / RUN, "rb") as fh:
        os.fsync(fh.fileno())
    final = out / "runs" / run_id
    if final.exists():
        trees.remove_tree(final)
    os.replace(staging, final)
    return record


def _progress_queue(ray: Any) -> Any:
    """A Ray queue the workers send their runs' progress to (None when Ray's queue is not available)."""
    try:
        from ray.util.queue import Queue

        return Queue(maxsize=10_000)
    except Exception:  # noqa: BLE001 - no live view, the runs go on
        return None


def run_on_ray(
    todo: list[RunSpec],
    experiment: Experiment,
    profile: Profile,
    sheet: PriceSheet,
    out: Path,
    commit: str,
    address: str | None = None,
    remote_fn: Callable[..., dict[str, Any]] = run_remote,
    may_start: Callable[[RunSpec], bool | None] = lambda spec: True,
    on_progress: Callable[[Progress], None] | None = None,
    on_wait: Callable[[], None] | None = None,
) -> Iterator[RunRecord]:
    """Run ``todo`` as Ray tasks, at most ``experiment.concurrency`` in flight; yield each
    run's record as the driver writes it. Joins the running Ray instance if there is one, else
    ``ray.init(address)`` (None: a new local instance; "auto": the cluster of this node).
    ``may_start`` is the spend cap: True starts a run, None holds it until a run in flight ends,
    False never starts it. Long because the driver's loop -- start under the cap, submit, wait,
    install, record -- reads best in one piece."""
    ray = _ray()
    if not todo:
        return
    started_here = not ray.is_initialized()
    if started_here:
        try:
            ray.init(address=address, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
        except (ConnectionError, ValueError, RuntimeError) as e:
            raise KitError(
                f"could not reach Ray at {address or 'a new local instance'}: {e}",
                "start a cluster (ray start --head) and pass --address auto, or ray://<head>:10001",
            ) from None
    shutil.rmtree(out / INCOMING, ignore_errors=True)  # left by a killed driver
    reports = None
    try:
        task_fn = ray.remote(num_cpus=1, max_retries=0)(remote_fn)
        reports = _progress_queue(ray) if on_progress is not None else None  # the live view's channel
        tasks = {s.task.id: s.task for s in todo}
        blobs = {tid: ray.put(pack_task(task)) for tid, task in tasks.items()}  # once per task
        queue, pending = list(todo), {}
        while queue or pending:
            while queue and len(pending) < max(1, experiment.concurrency):
                if (allowed := may_start(queue[0])) is None:  # spend cap: wait for a run in flight to end
                    break
                spec = queue.pop(0)
                if not allowed:  # the spend cap: never, this run is not started
                    continue
                ref = task_fn.remote(
                    blobs[spec.task.id],
                    spec.strategy,
                    spec.repeat,
                    experiment,
                    profile,
                    sheet,
                    commit,
                    reports,
                )
                pending[ref] = spec
            if not pending:
                break
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
            _drain(reports, on_progress)
            if on_wait is not None:
                on_wait()
            if not ready:
                continue
            spec = pending.pop(ready[0])
            try:
                files = ray.get(ready[0])
                record = install_run(out, spec.run_id(profile.name), files["run"])
                _write(
                    out, {k: v for k, v in files["other"].items() if not k.startswith(("runs/", INCOMING))}
                )
            except Exception:  # noqa: BLE001 - a failed task is a run with outcome error, not a crash
                record = failed_run(
                    spec, experiment, profile, sheet, out, commit, traceback.format_exc(), "ray task failed"
                )
            yield record
    finally:
        if reports is not None:
            with contextlib.suppress(Exception):
                reports.shutdown()
        shutil.rmtree(out / INCOMING, ignore_errors=True)
        if started_here:
            ray.shutdown()


def run_ray(
    specs: list[RunSpec],
    todo: list[RunSpec],
    experiment: Experiment,
    profile: Profile,
    sheet: PriceSheet,
    out: Path,
    progress: bool,
    address: str | None,
    state: ExperimentState,
) -> None:
    """The Ray executor as :func:`kit.run.runner.run_experiment` calls it: :func:`run_on_ray` with the
    experiment's progress bar; each record written counts in ``state``."""
    bar = progress_bar(specs, todo, experiment.name, progress, state)
    try:
        runs = run_on_ray(
            todo,
            experiment,
            profile,
            sheet,
            out,
            kit_commit(),
            address=address,
            may_start=lambda spec: state.cap.try_start(spec.run_id(profile.name)),
            on_progress=state.update,
            on_wait=lambda: refresh(bar, state),
        )
        for record in runs:
            state.recorded(record)
            bar.update(1)
            refresh(bar, state)
    finally:
        bar.close()
