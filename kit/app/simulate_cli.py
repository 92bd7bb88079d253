"""``python -m kit simulate OUT``: a synthetic experiment with a planted effect, written as a results
folder, to see what the crossover analysis (``kit report``, notebook 05) says where the answer is known.

Every record says it is synthetic: profile ``simulated``, model ``simulated/planted``, experiment name
``simulated-...`` and an illustrative price sheet; every view labels it "not a benchmark"."""

from __future__ import annotations

import argparse
import math
import tempfile
from pathlib import Path

from kit.errors import KitError

SIZES = (10.0, 1000.0)  # the task sizes drawn (code lines, log-uniform)


def planted_curves(lines: float | None) -> dict[str, object]:
    """The curves of :data:`kit.analysis.simulate.CROSSING` moved along the size axis so that pdca's
    solved rate passes vibe's at ``lines``; ``None``: the same curve for both (no difference)."""
    from kit.analysis import simulate as sim

    if lines is None:
        return dict(sim.NULL)
    if not SIZES[0] < lines < SIZES[1]:
        raise KitError(
            f"--planted-crossover {lines:g} is outside the task sizes drawn ({SIZES[0]:g} to {SIZES[1]:g} lines)",
            f"pick a size between {SIZES[0]:g} and {SIZES[1]:g}",
        )
    here = sim.planted_crossover(sim.CROSSING["vibe"], sim.CROSSING["pdca"])
    out = {}
    for name, c in sim.CROSSING.items():  # the new curve at x is the old one at x * here / lines
        logit = float(c.logit(sim.REF * here / lines))
        out[name] = sim.Curve(1 / (1 + math.exp(-logit)), c.slope, c.cost_ref, c.cost_slope)
    return out


def cmd_simulate(args: argparse.Namespace) -> int:
    from kit.analysis import simulate as sim

    out = Path(args.out).expanduser()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise KitError(f"{out} exists and is not empty", "give a new folder (nothing is overwritten)")
    for flag in ("projects", "tasks_per_project", "repeats"):
        if getattr(args, flag) < 1:
            raise KitError(f"--{flag.replace('_', '-')} must be at least 1", "give a positive count")
    lines = None if args.no_difference else args.planted_crossover
    curves = planted_curves(lines)
    runs = sim.simulate_runs(
        curves, projects=args.projects, tasks_per_project=args.tasks_per_project, repeats=args.repeats,
        sizes=SIZES, seed=args.seed,
    )  # fmt: skip
    name = out.name if out.name.startswith("simulated") else f"simulated-{out.name}"
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".simulate-") as tmp:  # all or nothing
        sim.write_experiment(tmp, runs, name=name).rename(out)
    planted = (
        "no difference (the same curve for both)" if lines is None else f"a crossover at {lines:g} lines"
    )
    if lines is not None:
        cost = sim.planted_cost_crossover(curves["vibe"], curves["pdca"], sim.TOTAL_SD, SIZES)
        cost_words = f"~{cost:,.0f} lines" if not math.isnan(cost) else "none inside the sizes drawn"
        planted += f" (pdca passes vibe in solved rate; cost per solved task: {cost_words})"
    print(
        f"wrote {len(runs)} SIMULATED runs (not a benchmark: planted effects to test the analysis) to {out}\n"
        f"  planted: {planted}\n"
        f"  {args.projects} projects x {args.tasks_per_project} tasks x {args.repeats} repeats, vibe and pdca, "
        f"sizes {SIZES[0]:g}-{SIZES[1]:g} lines, seed {args.seed}\n"
        f"  see what the analysis finds: python -m kit report {out}  |  "
        f"python -m kit notebooks {out} --only 05"
    )
    return 0


def add_cli(subparsers: argparse._SubParsersAction) -> None:
    """Register ``simulate`` on the kit's parser."""
    p = subparsers.add_parser(
        "simulate",
        help="write a SIMULATED experiment with a planted effect (to test the crossover analysis; never a "
        "benchmark)",
        description="Synthetic vibe and pdca runs whose solved rate and cost follow known curves in task size "
        "(kit/analysis/simulate.py, docs/analysis.md), with project and task random effects. Profile "
        "`simulated`, model `simulated/planted`: every view labels them not a benchmark.",
    )
    p.add_argument("out", help="the new experiment folder to write (e.g. results/simulated-250)")
    what = p.add_mutually_exclusive_group()
    what.add_argument(
        "--planted-crossover",
        type=float,
        default=213.0,
        metavar="LINES",
        help="the task size (code lines) where pdca's solved rate passes vibe's (default 213)",
    )
    what.add_argument(
        "--no-difference", action="store_true", help="the same curve for both strategies: nothing to find"
    )
    p.add_argument("--projects", type=int, default=12, metavar="N", help="projects (default 12)")
    p.add_argument(
        "--tasks-per-project", type=int, default=4, metavar="N", help="tasks per project (default 4)"
    )
    p.add_argument(
        "--repeats", type=int, default=3, metavar="N", help="repeats per task and strategy (default 3)"
    )
    p.add_argument("--seed", type=int, default=0, metavar="N", help="random seed (default 0)")
    p.set_defaults(func=cmd_simulate)
