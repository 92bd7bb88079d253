"""How well runs overlap: 16 runs of the scripted oracle with a fixed model latency per call, at
concurrency 1, 4 and 16, through the real runner (clone, strategy, scoring, records).

    .venv/bin/python tests/benchmarks/runner_concurrency.py [--runs 16] [--latency 0.5]
        [--concurrency 1,4,16] [--scoring-pool N]

Per concurrency it prints the wall time and the *achievable* wall time

    achievable = max(model time / concurrency, CPU time / cores)

(model time = the sum of the scripted calls' sleeps, i.e. what the runs spend waiting on the model;
CPU time = user + system time of this process and its children -- git, the scoring pytest runs --
measured over the experiment), and the efficiency = achievable / wall: the share of the achievable
speed-up that was reached (1.0 = perfect). ``cores used`` = CPU time / wall time: far below the
core count while the runs are CPU-bound means other processes were taking the CPU (the figures are
then not this kit's). ``--scoring-pool N`` overrides the scoring pool's size
(default: the cores); ``--scoring-pool 16`` at concurrency 16 is the old behaviour, where every run
scored in its own agent thread at the same moment.

Figures taken on a machine that others are loading are inflated; compare rows of one invocation.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this checkout's kit, whatever is installed

import kit.run.runner as runner  # noqa: E402
import kit.run.threads as threads  # noqa: E402
from kit.config import Experiment, Limits  # noqa: E402
from kit.records.schema import load_run  # noqa: E402

CPUACCT = Path("/sys/fs/cgroup/cpuacct")


class CpuMeter:
    """CPU seconds used by this process and everything it starts.

    getrusage(RUSAGE_CHILDREN) counts only descendants that were waited for, and a bwrap sandbox's
    inner init process is never waited for by the kit -- so the scoring's pytest runs would not count.
    Where the cgroup-v1 cpuacct hierarchy is writable (root), this process moves into a cgroup of its
    own, which every process it starts inherits, and its ``cpuacct.usage`` is read instead.
    """

    def __init__(self) -> None:
        self.group: Path | None = None
        try:
            group = CPUACCT / f"orchbench-bench-{os.getpid()}"
            group.mkdir()
            (group / "cgroup.procs").write_text(str(os.getpid()))
            self.group = group
        except OSError:
            self.group = None
        self.method = "cgroup cpuacct" if self.group else "getrusage (undercounts sandboxed children)"

    def seconds(self) -> float:
        if self.group is not None:
            return int((self.group / "cpuacct.usage").read_text()) / 1e9
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime

    def close(self) -> None:
        if self.group is None:
            return
        (CPUACCT / "cgroup.procs").write_text(str(os.getpid()))  # back to the root cgroup
        for _ in range(100):
            try:
                self.group.rmdir()
                return
            except OSError:  # a process that was started here is still exiting
                time.sleep(0.05)


METER: CpuMeter | None = None


def cpu_seconds() -> float:
    assert METER is not None
    return METER.seconds()


def measure(name: str, runs: int, concurrency: int, results: Path) -> dict[str, float]:
    exp = Experiment(
        name=name,
        tasks=["micro-slugify"],
        strategies=["vibe"],
        profile="scripted",
        repeats=runs,
        concurrency=concurrency,
        limits=Limits(max_steps=20),
    )
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    out = runner.run_experiment(exp, results_dir=results, progress=False)
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
    records = [load_run(d) for d in sorted((out / "runs").iterdir())]
    bad = [r.run_id for r in records if r is None or r.outcome != "done" or r.score is None]
    if bad:
        sys.exit(f"runs did not finish cleanly: {bad}")
    model = sum(r.model_s for r in records)
    return {"wall": wall, "cpu": cpu, "model": model, "calls": sum(r.calls for r in records)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=16)
    ap.add_argument("--latency", type=float, default=0.5, help="seconds per scripted model call")
    ap.add_argument("--concurrency", default="1,4,16")
    ap.add_argument("--scoring-pool", type=int, default=None, help="scoring workers (default: cores)")
    args = ap.parse_args()
    os.environ["ORCHBENCH_SCRIPTED_LATENCY_S"] = str(args.latency)
    cores = threads._cores()
    if args.scoring_pool:
        threads._cores = lambda: args.scoring_pool  # type: ignore[assignment]
    pool = threads._cores()
    results = Path(tempfile.mkdtemp(prefix="orchbench-conc-"))
    os.environ["ORCHBENCH_RESULTS_DIR"] = str(results)  # the task's base repository is cached here

    global METER
    METER = CpuMeter()
    try:
        run_all(args, results, cores, pool)
    finally:
        METER.close()


def run_all(args: argparse.Namespace, results: Path, cores: int, pool: int) -> None:
    measure("warmup", 1, 1, results)  # builds the cached base repository and the scoring base cache
    assert METER is not None
    print(
        f"{args.runs} runs, scripted oracle, {args.latency:g} s per call; {cores} cores; "
        f"scoring pool {pool}; CPU time from {METER.method}; load average {os.getloadavg()[0]:.1f}"
    )
    header = (
        f"{'conc':>4} {'wall s':>7} {'model s':>8} {'cpu s':>6} {'cores used':>10} "
        f"{'achievable s':>12} {'efficiency':>10}"
    )
    print(header)
    for c in (int(x) for x in args.concurrency.split(",")):
        m = measure(f"c{c}", args.runs, c, results)
        achievable = max(m["model"] / c, m["cpu"] / cores)
        print(
            f"{c:>4} {m['wall']:>7.2f} {m['model']:>8.2f} {m['cpu']:>6.2f} {m['cpu'] / m['wall']:>10.2f} "
            f"{achievable:>12.2f} "
            f"{achievable / m['wall']:>10.0%}",
            flush=True,
        )


if __name__ == "__main__":
    main()
