"""Reports that say who won: the summary at the top of `kit report`, intervals only over the repeats of
one task (Wilson for the solved rate), the loop counters."""

from __future__ import annotations

import dataclasses
import math

import pandas as pd
import pytest

from kit import analysis
from kit.analysis.report import report_text
from tests.support.records import write_experiment


@pytest.fixture(scope="module")
def exp(tmp_path_factory):
    return write_experiment(tmp_path_factory.mktemp("results"))


def test_report_opens_with_who_won_in_plain_words(exp):
    text = report_text(exp)
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Summary: "))
    assert start < next(i for i, line in enumerate(lines) if line.startswith("Runs by outcome"))
    # fixture: pdca solves both repeats, vibe neither; 2 pairs only: no verdict yet
    assert lines[start] == "Summary: solved pdca 2/2 (100%), vibe 0/2 (0%); failed share pdca 8%, vibe 42%."
    assert lines[start + 1] == (
        "  No winner yet: pdca leads on the numbers; its solved rate against vibe's: "
        "no verdict: 2 paired run(s), and a verdict needs at least 6 (fewer give an interval too narrow "
        "to trust); need ~6."
    )
    # every fixture run ended `done`: vibe's two were not solved, and the summary says so
    assert lines[start + 2] == (
        "  Ended `done` but NOT solved (a critical or major requirement failed): vibe 2 of 2 run(s)."
    )
    pdca = next(line for line in lines if line.startswith("  pdca: "))
    assert pdca.startswith(
        "  pdca: solved 2/2 (100%), failed share 8%; 2 runs on 1 task(s), outcomes: 2 done; $0.0208 per run; "
        "vs vibe: "
    )
    assert "+100 pts solved: no verdict: 2 paired run(s), and a verdict needs at least 6" in pdca
    assert "[+100, +100]" not in pdca and "$0.0" in pdca  # issue 41: no zero-width interval as evidence
    vibe = next(line for line in lines if line.startswith("  vibe: "))
    assert vibe.startswith(
        "  vibe: solved 0/2 (0%), failed share 42%; 2 runs on 1 task(s), outcomes: 2 done;"
    )
    assert "vs pdca: -100 pts solved" in vibe
    assert "outcomes: 4 done (2 solved)" in text  # the opening line counts the solved among the done


def _runs(pairs: int) -> pd.DataFrame:
    rows = []
    for r in range(pairs):
        for strategy, solved, cost in (("a", 1.0, 1.0 + r / 100), ("b", 0.0, 1.0)):
            rows.append(
                dict(task="t", profile="p", repeat=r, strategy=strategy, experiment="e", scored=True,
                     solved=solved, failed_share=1 - solved, defects_total=1 - solved, cost_usd=cost)
            )  # fmt: skip
    return pd.DataFrame(rows)


def test_summary_names_the_winner_once_the_paired_runs_decide():
    from kit.analysis import summary

    records = analysis.Records(root=None, runs=_runs(8), calls=pd.DataFrame(), events=pd.DataFrame())
    lines = summary.summary_lines(records)
    assert lines[0] == "Summary: solved a 8/8 (100%), b 0/8 (0%); failed share a 0%, b 100%."
    assert lines[1] == (
        "  Winner: a: it solved more runs than b, +100 pts solved [+100, +100], in 1 cluster "
        "(resampled by task, then repeat; no projects recorded: each task is its own cluster)."
    )
    assert "vs b: +100 pts solved [+100, +100]: differs (8 paired runs)" in lines[3]
    few = summary.summary_lines(dataclasses.replace(records, runs=_runs(1)))
    assert few[1].startswith("  No winner yet") and "no verdict: 1 paired run(s)" in few[1]


def test_intervals_are_over_the_repeats_of_one_task_never_across_tasks(exp):
    records = analysis.load(exp)
    one_task = analysis.strategy_table(records)
    lo, hi = one_task.loc["pdca", ["solved_lo", "solved_hi"]]
    assert lo == pytest.approx(0.342, abs=1e-3) and hi == 1.0  # Wilson, 2 of 2
    runs = records.runs.copy()
    runs.loc[runs["repeat"] == 1, "task"] = "other-task"  # the "repeats" are now two different tasks
    pooled = analysis.strategy_table(dataclasses.replace(records, runs=runs))
    interval_cols = [c for c in pooled.columns if c.endswith("_ci95") or c in ("solved_lo", "solved_hi")]
    assert pooled[interval_cols].isna().all().all()
    text = report_text(exp)
    assert "100% [34%, 100%]" in text and "0% [0%, 66%]" in text


def test_report_shows_the_loop_counters_per_strategy(exp):
    text = report_text(exp)
    block = text.split("Loop counters per strategy")[1].split("\n\n")[0]
    assert "cycles" in block and "1.5 / 1 / 2" in block and "[1, 2] ×2" in block


def test_wilson_matches_the_textbook():
    lo, hi = analysis.tables.wilson(8, 10)
    assert lo == pytest.approx(0.4902, abs=1e-4) and hi == pytest.approx(0.9433, abs=1e-4)
    assert all(math.isnan(v) for v in analysis.tables.wilson(0, 0))


def test_a_mapping_counter_is_a_row_per_key_never_cut(tmp_path):
    """pdca's role_calls / gate_rejections_by_gate are mappings: shown as one JSON text they were cut at
    70 characters, hiding the later roles' counts (the auditor's, the expert's)."""
    import json

    exp = write_experiment(tmp_path / "results")
    roles = ["orchestrator", "scout", "analyst", "executor", "auditor", "status-writer"]
    for i, path in enumerate(sorted(exp.glob("runs/*__pdca__*/run.json"))):
        data = json.loads(path.read_text())
        calls = {role: 10 + n for n, role in enumerate(roles)} | ({"expert": 3} if i else {})
        data["counters"] |= {"role_calls": calls, "gate_rejections_by_gate": {"DO->CHECK": 2} if i else {}}
        path.write_text(json.dumps(data))
    block = report_text(exp, width=200).split("Loop counters per strategy")[1].split("\n\n")[0]
    rows = {t[-7]: " ".join(t[-5:]) for t in map(str.split, block.splitlines()[3:]) if len(t) >= 7}
    assert rows["role_calls.expert"] == "1.5 / 0 / 3"  # a run without the key: 0 there
    assert rows["role_calls.status-writer"] == "15 / 15 / 15"
    assert rows["gate_rejections_by_gate.DO->CHECK"] == "1 / 0 / 2"
    assert "..." not in block and "role_calls " not in block
