"""pdca's hand-offs, scout sessions and cost per run, measured from the records (issue 31: CHECK's
re-run briefed by the orchestrator, its raw output read by the scout, the auditor judging from the
scout's report).

    python tests/benchmarks/pdca_check_routing.py [--keep DIR]

Three setups, pdca only, every task of experiments/scripted-all.yaml (the scripted smoke experiment
runs vibe alone), its limits and tier map:

1. ``oracle``  -- the shipped ``scripted`` profile (the oracle policy: it cannot fill in pdca's
   structured reports, so the run ends where its plan is refused);
2. ``cast``    -- the scripted PDCA cast of tests/support/pdca.py (a flawless model, proving each
   criterion with the task's own test command) on the illustrative ``scripted`` price sheet;
3. ``anthropic`` -- the same cast behind the fake Anthropic Messages server
   (tests/support/fake_providers.py), through litellm's real Anthropic provider code, priced with
   the shipped ``anthropic`` sheet (claude-sonnet-4-5 on every tier).

For each run: role sessions (fresh conversations; re-asks included), orchestrator hand-offs, the
sessions with no hand-off right before them (re-asks and status-file lines aside), scout sessions and those in
CHECK, the calls and the cost of the run and of its CHECK phase. Everything is read from calls.jsonl
and events.jsonl (a call's phase is the last ``phase`` event before it started), so the script runs
on any version of the kit: run it in a checkout of each version to compare. Scripted and fake
figures validate the pipeline; they are not a benchmark of any model.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kit.config import TIERS, load_experiment, load_price_sheet  # noqa: E402
from kit.model import scripted  # noqa: E402
from kit.paths import EXPERIMENTS_DIR  # noqa: E402
from kit.records.schema import CALLS, EVENTS, TRANSCRIPT, load_run, read_jsonl  # noqa: E402
from kit.run.runner import run_experiment  # noqa: E402

NOT_SESSIONS = {"orchestrator", "status-writer"}
REASK = "Your previous answer could not be used"  # kit/prompts/pdca/reask.md


def figures(run_dir: Path) -> dict[str, Any]:
    """One run's figures, from its records."""
    calls = sorted(read_jsonl(run_dir / CALLS), key=lambda c: c["seq"])
    phases = [(e["at"], e["name"]) for e in read_jsonl(run_dir / EVENTS) if e["kind"] == "phase"]

    def phase_of(call: dict) -> str:
        return ([name for at, name in phases if at <= call["started_at"]] or ["-"])[-1]

    first_user: dict[str, str] = {}
    for t in read_jsonl(run_dir / TRANSCRIPT):
        if t["message"].get("role") == "user":
            first_user.setdefault(t["conversation"], str(t["message"].get("content")))
    seen: set[str] = set()
    sessions = reasks = unbriefed = scouts = check_scouts = 0
    previous = None
    for c in calls:
        if c["role"] == "status-writer":
            continue
        conv = c["conversation"] or c["role"]
        if c["role"] not in NOT_SESSIONS and conv not in seen:
            seen.add(conv)
            sessions += 1
            reask = REASK in first_user.get(conv, "")
            reasks += reask
            unbriefed += not reask and (previous is None or previous["role"] != "orchestrator")
            scouts += c["role"] == "scout"
            check_scouts += c["role"] == "scout" and phase_of(c) == "CHECK"
        previous = c
    return {
        "outcome": load_run(run_dir).outcome,
        "sessions": sessions,
        "re-asks": reasks,
        "hand-offs": sum(c["role"] == "orchestrator" for c in calls),
        "no hand-off": unbriefed,
        "scouts": scouts,
        "CHECK scouts": check_scouts,
        "calls": len(calls),
        "cost $": sum(c["cost_usd"] for c in calls),
        "CHECK $": sum(c["cost_usd"] for c in calls if phase_of(c) == "CHECK"),
        "CHECK $ per role": {
            role: round(sum(c["cost_usd"] for c in calls if c["role"] == role and phase_of(c) == "CHECK"), 4)
            for role in ("orchestrator", "executor", "scout", "auditor", "status-writer")
        },
    }


def experiment(profile: str, name: str):
    shipped = load_experiment(EXPERIMENTS_DIR / "scripted-all.yaml")
    return shipped.model_copy(
        update={
            "name": name,
            "strategies": ["pdca"],
            "profile": profile,
            "tiers": {"pdca": shipped.tiers["pdca"]},
            "strategy_options": {k: v for k, v in shipped.strategy_options.items() if k == "pdca"},
        }
    )


def run(exp, root: Path) -> list[tuple[str, dict]]:
    out = run_experiment(exp, results_dir=root / "results", progress=False) / "runs"
    return [(d.name.split("__")[0], figures(d)) for d in sorted(out.iterdir())]


def cast_profile(root: Path, model: str, sheet: str, price: str | None = None, **spec: Any) -> str:
    tiers = {t: {"model": model, "price": price or f"scripted-{t}", **spec} for t in TIERS}
    path = root / "profiles" / f"{sheet}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"name": sheet, "price_sheet": sheet, "tiers": tiers}))
    return str(path)


def anthropic(root: Path) -> list[tuple[str, dict]]:
    from tests.support.fake_providers import FakeAnthropic, PolicyResponder, role_phrases
    from tests.support.pdca import Cast

    roles = ["orchestrator", "scout", "analyst", "auditor", "expert", "executor"]
    sheet = load_price_sheet("anthropic")
    model = "anthropic/claude-sonnet-4-5"
    assert model in sheet.prices, f"the anthropic price sheet has no {model}"
    rows = []
    exp = experiment("", "pdca-anthropic")
    for task in exp.tasks:
        from kit.tasks.task import load_task

        t = load_task(task)
        with FakeAnthropic() as server:
            server.responder = PolicyResponder(
                Cast(task_tests=True),
                role_phrases("pdca", roles),
                {"task_path": str(t.path), "test_command": t.test_command},
            )
            spec = {"api_base": server.url, "extra": {"api_key": "test-key"}}
            profile = cast_profile(root / task, model, "anthropic", price=model, **spec)
            one = exp.model_copy(update={"tasks": [task], "profile": profile})
            rows += run(one, root / task)
    return sorted(rows, key=lambda r: r[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", type=Path, help="keep the results here (default: a temporary folder)")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="pdca-check-"))
    from tests.support.pdca import Cast

    cast = scripted.register(Cast(task_tests=True))
    setups = {
        "oracle": lambda: run(experiment("scripted", "pdca-oracle"), root / "oracle"),
        "cast": lambda: run(
            experiment(cast_profile(root / "cast", cast, "scripted"), "pdca-cast"), root / "cast"
        ),
        "anthropic": lambda: anthropic(root / "anthropic"),
    }
    rows = [(name, task, row) for name, measure in setups.items() for task, row in measure()]
    head = [h for h in rows[0][2] if h != "CHECK $ per role"]
    print(f"{'setup':10} {'task':18} " + " ".join(f"{h:>12}" for h in head))
    for name, task, row in rows:
        cells = [f"{row[h]:12.4f}" if isinstance(row[h], float) else f"{row[h]!s:>12}" for h in head]
        print(f"{name:10} {task:18} " + " ".join(cells))
    print("\nCHECK's cost per role ($; status-writer: the status-file lines written in CHECK)")
    for name, task, row in rows:
        print(f"{name:10} {task:18} " + "  ".join(f"{r} {v:.4f}" for r, v in row["CHECK $ per role"].items()))
    print(f"records: {root}" if args.keep else "(records in a temporary folder; --keep DIR keeps them)")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
