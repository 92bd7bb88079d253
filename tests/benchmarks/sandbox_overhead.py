"""What the sandbox adds to every command an agent runs.

    .venv/bin/python tests/benchmarks/sandbox_overhead.py [--n 30]

For each command (``true``, ``python -c pass``) prints the median wall time of N runs: the floor (a
plain ``subprocess.run``), the ``none`` backend (new session, rlimits, pids cgroup where writable,
reader thread) and the ``bwrap`` backend, and bwrap's overhead over the floor. Target: < 50 ms per
command. Figures taken while other work shares the CPUs are inflated; say so when quoting them.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from kit.sandbox.backends import get_sandbox, process_limit_mechanism, sandbox_env

COMMANDS = {"true": ["true"], "python -c pass": [sys.executable, "-c", "pass"]}
TARGET_MS = 50.0


def medians_ms(fns: list[Callable[[], object]], n: int) -> list[float]:
    """Median wall time of each function over ``n`` rounds, interleaved (one of each per round) so a
    change in the machine's load hits all of them alike."""
    for fn in fns:
        fn()  # warm-up (page cache, first-use setup)
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(n):
        for fn, out in zip(fns, times, strict=True):
            t0 = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t0) * 1000)
    return [statistics.median(t) for t in times]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=30, help="runs per command and backend")
    args = parser.parse_args()
    env = sandbox_env()
    print(f"process limit enforced by: {process_limit_mechanism()}; median of {args.n} runs")
    print(f"{'command':<16} {'floor ms':>9} {'none ms':>9} {'bwrap ms':>9} {'bwrap-floor':>12}  target")
    worst = 0.0
    none, bwrap = get_sandbox("none"), get_sandbox("bwrap")
    with tempfile.TemporaryDirectory(prefix="sandbox-bench-") as tmp:
        cwd = Path(tmp)
        for label, argv in COMMANDS.items():
            floor, plain, boxed = medians_ms(
                [
                    lambda a=argv: subprocess.run(a, cwd=cwd, env=env, check=True),
                    lambda a=argv: none.run(a, cwd, writable=True, timeout_s=60),
                    lambda a=argv: bwrap.run(a, cwd, writable=True, timeout_s=60),
                ],
                args.n,
            )
            over = boxed - floor
            worst = max(worst, over)
            ok = "ok" if over < TARGET_MS else "OVER"
            print(
                f"{label:<16} {floor:>9.1f} {plain:>9.1f} {boxed:>9.1f} {over:>12.1f}  < {TARGET_MS:.0f} {ok}"
            )
    print(f"worst bwrap overhead: {worst:.1f} ms per command")


if __name__ == "__main__":
    main()
