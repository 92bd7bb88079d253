"""Wall time and CPU time (the kit's process plus every child: pytest, bwrap, git) of one scoring,
median over repeats, per task and sandbox. CPU time is what limits how many runs can be scored at
once. The base commit's own-test run is cached after the first scoring of a task, so the first
scoring is reported separately. Note: processes inside bwrap's PID namespace are not reaped by the
kit, so their CPU time does not reach ``RUSAGE_CHILDREN``: the bwrap rows show only the kit's share;
the ``none`` rows (same pytest processes, no sandbox) give the CPU cost of scoring. Run it as a script:

python tests/benchmarks/scoring_bench.py [--repeat N] [--tasks micro-slugify,...] [--sandbox bwrap,none]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from pathlib import Path

from kit.scoring.scorer import score
from kit.tasks.task import apply_solution, load_task
from kit.tasks.workspace import create_workspace


def cpu_s() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def measure(task_id: str, sandbox: str, repeat: int) -> dict[str, float]:
    task = load_task(task_id)
    with tempfile.TemporaryDirectory() as tmp:
        ws = create_workspace(task, Path(tmp) / "ws")
        apply_solution(task, ws.root)
        walls, cpus = [], []
        for _ in range(repeat + 1):
            w0, c0 = time.perf_counter(), cpu_s()
            s = score(task, ws, claimed_done=True, sandbox=sandbox)
            walls.append(time.perf_counter() - w0)
            cpus.append(cpu_s() - c0)
            assert s.requirements_failed == 0 and not s.tampered and s.unscored_reason is None, s
    return {
        "first_wall_s": walls[0],
        "first_cpu_s": cpus[0],
        "wall_s": statistics.median(walls[1:]),
        "cpu_s": statistics.median(cpus[1:]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--tasks", default="micro-slugify,table-computed-columns")
    ap.add_argument("--sandbox", default="bwrap,none")
    args = ap.parse_args()
    print(f"{'task':<24} {'sandbox':<7} {'first wall':>10} {'first cpu':>9} {'wall':>7} {'cpu':>7}")
    for task_id in args.tasks.split(","):
        for sandbox in args.sandbox.split(","):
            m = measure(task_id, sandbox, args.repeat)
            print(
                f"{task_id:<24} {sandbox:<7} {m['first_wall_s']:>9.2f}s {m['first_cpu_s']:>8.2f}s "
                f"{m['wall_s']:>6.2f}s {m['cpu_s']:>6.2f}s",
                flush=True,
            )


if __name__ == "__main__":
    main()
