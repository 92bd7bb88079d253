"""Measure the three action formats side by side on the embedded model (SmolLM2-135M).

    .venv/bin/python tests/benchmarks/action_modes.py [--repeats 2] [--steps 6] [--task micro-slugify]

Runs the vibe strategy once per (mode, repeat) and prints, per mode: valid-action rate, format
errors, tool calls, files written, acceptance requirements passed, wall time. The kit's default
for the embedded model (kit.model.gateway.EMBEDDED_ACTION_MODE) is the mode that does best here.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from kit.config import Experiment, Limits, load_profile  # noqa: E402
from kit.records.schema import read_jsonl  # noqa: E402
from kit.run.runner import RunSpec, run_one  # noqa: E402
from kit.tasks.task import load_task  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--task", default="micro-slugify")
    ap.add_argument("--modes", default="native,json,text")
    args = ap.parse_args()
    profile, sheet = load_profile("local")
    task = load_task(args.task)
    out = Path(tempfile.mkdtemp(prefix="orchbench-modes-"))
    rows = []
    for mode in args.modes.split(","):
        tiers = {t: s.model_copy(update={"action_mode": mode}) for t, s in profile.tiers.items()}
        prof = profile.model_copy(update={"name": f"local-{mode}", "tiers": tiers})
        exp = Experiment(
            name=f"modes-{mode}",
            tasks=[task.id],
            strategies=["vibe"],
            profile=prof.name,
            limits=Limits(max_steps=args.steps),
        )
        for r in range(1, args.repeats + 1):
            rec = run_one(RunSpec(task, "vibe", r), exp, prof, sheet, out / exp.name)
            run_dir = out / exp.name / "runs" / rec.run_id
            events = read_jsonl(run_dir / "events.jsonl")
            calls = read_jsonl(run_dir / "calls.jsonl")
            tools = [e for e in events if e["kind"] == "tool"]
            score = rec.score
            rows.append(
                {
                    "mode": mode,
                    "repeat": r,
                    "outcome": rec.outcome,
                    "calls": len(calls),
                    "format_errors": sum(e["kind"] == "format_error" for e in events),
                    "tool_calls": len(tools),
                    "writes": sum(
                        e["name"] in ("write_file", "edit_file", "replace_definitions") and e["ok"]
                        for e in tools
                    ),
                    "passed": (score.requirements_total - score.requirements_failed) if score else 0,
                    "requirements": score.requirements_total if score else 0,
                    "wall_s": rec.wall_s,
                    "error": rec.error,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    print(
        f"\n{'mode':<7} {'runs':>4} {'valid%':>7} {'fmt err':>7} {'tools':>5} {'writes':>6} {'passed':>9} {'wall s':>7}"
    )
    for mode in args.modes.split(","):
        rs = [r for r in rows if r["mode"] == mode]
        calls = sum(r["calls"] for r in rs) or 1
        errs = sum(r["format_errors"] for r in rs)
        print(
            f"{mode:<7} {len(rs):>4} {100 * (calls - errs) / calls:>6.0f}% {errs:>7} "
            f"{sum(r['tool_calls'] for r in rs):>5} {sum(r['writes'] for r in rs):>6} "
            f"{sum(r['passed'] for r in rs):>4}/{sum(r['requirements'] for r in rs):<4} "
            f"{sum(r['wall_s'] for r in rs):>7.1f}"
        )
    print(f"\nrecords: {out}")


if __name__ == "__main__":
    main()
