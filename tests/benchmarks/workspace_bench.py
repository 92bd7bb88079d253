"""Median time to create a workspace for the largest task (by file count). Run it as a script:

python tests/benchmarks/workspace_bench.py [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from kit.tasks import list_tasks
from kit.workspace import create_workspace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    tasks = list_tasks()
    task = max(tasks, key=lambda t: sum(1 for p in t.repo_dir.rglob("*") if p.is_file()))
    n_files = sum(1 for p in task.repo_dir.rglob("*") if p.is_file())
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            started = time.perf_counter()
            create_workspace(task, Path(tmp) / f"ws{i}")
            times.append(time.perf_counter() - started)
    print(
        f"workspace for {task.id} ({n_files} files): median {statistics.median(times) * 1000:.1f} ms, "
        f"min {min(times) * 1000:.1f} ms over {args.repeat} runs"
    )


if __name__ == "__main__":
    main()
