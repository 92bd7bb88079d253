"""Time of the kit's own Python work on a scoring's critical path, before its pytest sessions start:
:func:`kit.scoring.inject.inject_folder` on a copy of a built task's ``acceptance/``,
:func:`kit.scoring.inject.inject_own` on a copy of its ``repo/`` with the modules the own-tests
session would pick (:func:`kit.scoring.sessions._test_side_py`), and
:func:`kit.scoring.basecode.base_code` of the repo with the reference solution laid over it against the
base (the base's units cached, as from a task's second scoring on). Each with the collector paused,
as the sessions' turns run them; one warm-up, then the median of ``--repeat`` (wall and CPU time: the
machine may be shared); the copies are made
outside the timed part. Run it as a script, on built tasks:

ORCHBENCH_BUILT_DIR=/tmp/built python tests/benchmarks/inject_timing.py [--task ID] [--repeat N]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from kit import pyast
from kit.scoring.basecode import base_code
from kit.scoring.inject import inject_folder, inject_own
from kit.scoring.sessions import _test_side_py
from kit.tasks.requirements import TEST_FILE_RE
from kit.tasks.task import Task, apply_solution, load_task


def _timed(
    prepare: Callable[[Path], object], work: Callable[[Path, object], object], repeat: int
) -> list[tuple[float, float]]:
    """(wall, CPU) seconds of each of ``repeat`` calls, after a warm-up."""
    out = []
    for _ in range(repeat + 1):
        with tempfile.TemporaryDirectory(prefix="inject-timing-") as tmp:
            state = prepare(Path(tmp))
            with pyast.gc_paused():
                wall, cpu = time.perf_counter(), time.process_time()
                work(Path(tmp), state)
                out.append((time.perf_counter() - wall, time.process_time() - cpu))
    return out[1:]


def measure(task: Task, repeat: int) -> dict[str, list[tuple[float, float]]]:
    def acceptance(tmp: Path) -> Path:
        return Path(shutil.copytree(task.acceptance_dir, tmp / "acc"))

    def own(tmp: Path) -> tuple[Path, list[str]]:
        repo = Path(shutil.copytree(task.repo_dir, tmp / "repo"))
        side = _test_side_py(repo)
        return repo, [r for r in side if TEST_FILE_RE.match(PurePosixPath(r).name)]

    def solved(tmp: Path) -> Path:
        repo = Path(shutil.copytree(task.repo_dir, tmp / "repo"))
        apply_solution(task, repo)
        return repo

    return {
        "inject_folder": _timed(acceptance, lambda _t, folder: inject_folder(folder), repeat),
        "inject_own": _timed(
            own, lambda _t, s: inject_own(s[0], s[1], list(task.own_tests_deselect)), repeat
        ),
        "base_code": _timed(solved, lambda _t, repo: base_code(repo, task.repo_dir), repeat),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="tomlkit-0-15-1")
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    task = load_task(args.task)
    for name, times in measure(task, args.repeat).items():
        wall, cpu = ([t[i] * 1000 for t in times] for i in (0, 1))
        print(
            f"{args.task} {name}: median {statistics.median(wall):.1f} ms wall "
            f"(min {min(wall):.1f}, max {max(wall):.1f}), {statistics.median(cpu):.1f} ms CPU, n={len(times)}"
        )


if __name__ == "__main__":
    main()
