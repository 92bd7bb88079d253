"""Pipeline validation, not a benchmark: every strategy of ``experiments/real-repos.yaml``, under its
limits and tier maps, played by the oracle (``--profile oracle``'s model, kit/model/oracle.py:
each role does its job flawlessly and the code written is the task's reference solution) on the built
real-repos tasks. Each run should end ``done`` with no requirement failed and no regression; the table
says where one does not (a budget too small for the task, a task the pipeline cannot score ...). The
prices are the test price sheet's (tests/support/helpers.py: $1 / $5 per million input / output
tokens), so ``$`` shows how close a run came to the experiment's USD cap. Run it as a script, after
``python -m kit tasks build-suite real-repos``:

python tests/benchmarks/real_repos_oracle.py [--tasks ID,...] [--strategies vibe,...] [--concurrency N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests.support, run as a script

from kit.config import load_experiment  # noqa: E402
from kit.model import oracle  # noqa: E402
from kit.records.schema import load_run, normalise_outcome  # noqa: E402
from kit.run.runner import run_experiment  # noqa: E402
from kit.tasks.task import expand_tasks  # noqa: E402
from tests.support.helpers import write_profile  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default="suite:real-repos", help="task ids, or suite:real-repos")
    ap.add_argument("--strategies", default=None, help="default: the experiment's five")
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--results", default=None, help="results folder (default: a temporary one)")
    args = ap.parse_args()
    shipped = load_experiment("real-repos")
    tasks = expand_tasks(args.tasks.split(","))
    strategies = args.strategies.split(",") if args.strategies else shipped.strategies
    with tempfile.TemporaryDirectory(prefix="real-repos-oracle-") as tmp:
        model = oracle.MODEL
        experiment = shipped.model_copy(
            update={
                "name": "real-repos-oracle",
                "tasks": tasks,
                "strategies": strategies,
                "repeats": 1,
                "concurrency": args.concurrency,
                "profile": str(write_profile(Path(tmp), model, "native")),
                "tiers": {s: shipped.tiers[s] for s in strategies},
            }
        )
        started = time.monotonic()
        out = run_experiment(experiment, results_dir=Path(args.results or tmp) / "results", progress=True)
        print(f"\n{len(tasks)} tasks x {len(strategies)} strategies in {time.monotonic() - started:.0f} s "
              "(the oracle: a pipeline check, not a benchmark)")  # fmt: skip
        print(
            f"{'task':<34} {'strategy':<9} {'outcome':<10} {'calls':>5} {'$':>6} {'failed':>9} {'regr':>4}  note"
        )
        bad = 0
        for run_dir in sorted((out / "runs").iterdir()):
            r = load_run(run_dir)
            if r is None:
                print(f"{run_dir.name}: no run.json")
                bad += 1
                continue
            s = r.score
            outcome, reason = normalise_outcome(r.strategy, r.outcome, r.stop_reason)
            failed = f"{s.requirements_failed}/{s.requirements_total}" if s else "-"
            note = r.error or (s and (s.unscored_reason or ("tampered" if s.tampered else ""))) or ""
            ok = outcome == "done" and s and s.requirements_failed == 0 and s.regressions == 0 and not note
            bad += not ok
            print(
                f"{r.task:<34} {r.strategy:<9} {outcome:<10} {r.calls:>5} {r.totals.cost_usd:>6.2f} "
                f"{failed:>9} {s.regressions if s else '-':>4}  {note or ('' if ok else reason)}"
            )
        print(f"{bad} run(s) not done-and-clean")


if __name__ == "__main__":
    main()
