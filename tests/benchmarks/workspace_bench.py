"""Median time to create a workspace: for the largest shipped task (by file count), and for a
synthetic 200-file repository (the issue's target: <= 50 ms on a 2-core machine). Run it as a script:

python tests/benchmarks/workspace_bench.py [--repeat N] [--files 200]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from kit.tasks.task import Task, list_tasks, load_task
from kit.tasks.workspace import create_workspace


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--files", type=int, default=200, help="size of the synthetic repository")
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


if __name__ == "__main__":
    main()
