"""Median time to create a workspace: for the largest shipped task (by file count), and for a
synthetic 200-file repository (the issue's target: <= 50 ms on a 2-core machine); and the cost of
the cached base's key (every repo/ file's bytes hashed, once per workspace) on the largest shipped
task and on a copy of ``--key-repo DIR`` (a big repository, e.g. a vendored library). Run it as a script:

python tests/benchmarks/workspace_bench.py [--repeat N] [--files 200] [--key-repo DIR]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from kit.tasks.task import Task, list_tasks, load_task
from kit.tasks.workspace import base_repository, create_workspace


def n_files(task: Task) -> int:
    return sum(1 for p in task.repo_dir.rglob("*") if p.is_file())


def synthetic_task(root: Path, files: int) -> Task:
    """A task folder whose repo has ``files`` small Python files in a few packages."""
    (root / "acceptance").mkdir(parents=True)
    (root / "solution").mkdir()
    repo = root / "repo"
    for i in range(files):
        path = repo / f"pkg{i % 10}" / f"module_{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f'"""Module {i}."""\n\n\ndef f_{i}(x):\n    return x + {i}\n' * 5)
    (root / "task.yaml").write_text("id: synthetic\ntitle: synthetic\nprompt: none\n")
    return load_task(root)


def median_ms(task: Task, repeat: int) -> tuple[float, float]:
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeat):
            started = time.perf_counter()
            create_workspace(task, Path(tmp) / f"ws{i}")
            times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000, min(times) * 1000


def key_ms(task: Task, repeat: int) -> float:
    """Median time of a cached base's look-up (the key: every repo/ file hashed), the base built first."""
    base_repository(task)
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        base_repository(task)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def repo_size(task: Task) -> str:
    files = [p for p in task.repo_dir.rglob("*") if p.is_file()]
    return f"{len(files)} files, {sum(p.stat().st_size for p in files) / 2**20:.1f} MB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--files", type=int, default=200, help="size of the synthetic repository")
    parser.add_argument("--key-repo", type=Path, help="a folder to time the base key on, as a task's repo/")
    args = parser.parse_args()
    task = max(list_tasks(), key=n_files)
    med, low = median_ms(task, args.repeat)
    print(
        f"workspace for {task.id} ({n_files(task)} files): median {med:.1f} ms, min {low:.1f} ms over {args.repeat} runs"
    )
    with tempfile.TemporaryDirectory() as tmp:
        synth = synthetic_task(Path(tmp) / "synthetic", args.files)
        med, low = median_ms(synth, args.repeat)
    print(
        f"workspace for a synthetic {args.files}-file repo: median {med:.1f} ms, min {low:.1f} ms (target <= 50 ms)"
    )
    print(f"base key for {task.id} ({repo_size(task)}): median {key_ms(task, args.repeat):.1f} ms")
    if args.key_repo:
        with tempfile.TemporaryDirectory() as tmp:
            big = synthetic_task(Path(tmp) / "big", 1)
            shutil.rmtree(big.repo_dir)
            shutil.copytree(args.key_repo, big.repo_dir, symlinks=True)
            print(
                f"base key for a copy of {args.key_repo} ({repo_size(big)}): median {key_ms(big, 5):.1f} ms"
            )


if __name__ == "__main__":
    main()
