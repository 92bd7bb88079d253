"""pdca's CHECK routed as its source routes it (issue 31): the orchestrator briefs the re-run session
like every role, the re-runs' raw output is read by the scout alone, and the auditor judges from the
scout's report and the exit statuses; the counters and the calls' phase say what CHECK cost."""

from __future__ import annotations

import json

import pytest

from kit import analysis
from kit.analysis.report import report_text
from kit.config import TIERS, load_experiment
from kit.model import scripted
from kit.paths import EXPERIMENTS_DIR
from kit.run.runner import run_experiment
from tests.support.pdca import CRITERIA, PASS, Cast, Outcome, plan, run_cast, verdict

# prints 42042: the number is in the output, never in the command's text
MARKED = 'python -c "print(6 * 7 * 1001)"'
MARK = "42042"
AGAIN = verdict(met=("C2",), defects=("trailing-hyphen",))
CONTINUE = {"decision": "continue", "reasons": ["one more try"]}


def seen_by(out: Outcome, role: str) -> str:
    """Every message of every request ``role`` made (system prompt, briefs, tool results)."""
    return "\n".join(
        str(m.get("content")) for r in out.cast.requests if r.context.get("role") == role for m in r.messages
    )


def sessions_and_what_came_before(out: Outcome) -> list[tuple[str, str, str | None]]:
    """(role, conversation, role of the call just before its first call) for every role session, in
    order; status-file lines are not role sessions and are skipped."""
    calls = [c for c in out.calls if c["role"] != "status-writer"]
    seen: set[str] = set()
    found = []
    for before, c in zip([None, *calls], calls, strict=False):
        if c["role"] != "orchestrator" and c["conversation"] not in seen:
            seen.add(c["conversation"])
            found.append((c["role"], c["conversation"], before and before["role"]))
    return found


@pytest.mark.parametrize(
    ("name", "cast"),
    [
        ("happy", Cast()),
        ("two CHECKs and the expert", Cast(verdicts=[AGAIN, AGAIN, PASS], decisions=[CONTINUE])),
    ],
)
def test_every_role_session_has_an_orchestrator_hand_off_before_it_check_included(tmp_path, name, cast):
    out = run_cast(tmp_path, cast)
    c = out.result.counters
    assert out.result.claimed_done, name
    sessions = sessions_and_what_came_before(out)
    assert [s for s in sessions if s[2] != "orchestrator"] == []  # the CHECK re-run was the one left out
    assert len(sessions) == c["handoffs"] == c["role_calls"]["orchestrator"]
    # each hand-off names the role whose session follows it
    turns = [t.split("Hand-off to the ", 1)[1].split(":", 1)[0] for t in out.cast.briefs["orchestrator"]]
    assert turns == [role for role, _, _ in sessions]
    checks = c["role_calls_by_phase"]["CHECK"]
    assert checks["orchestrator"] == checks["executor"] + checks["scout"] + checks["auditor"]
    assert len(out.cast.briefs["executor-check"]) == checks["executor"] == c["attempts"]
    assert all(b.startswith("Brief ") for b in out.cast.briefs["executor-check"])  # the orchestrator's text


def test_raw_output_reaches_the_scout_never_the_auditor_nor_the_orchestrator(tmp_path):
    criteria = [dict(CRITERIA[0]), {**CRITERIA[1], "how_verified": MARKED}]
    out = run_cast(tmp_path, Cast(plans=[plan(acceptance_criteria=criteria)]), status_writer="kit")
    assert out.result.claimed_done and out.result.counters["check_reruns"] == 2
    assert MARK not in seen_by(out, "auditor") and MARK not in seen_by(out, "orchestrator")
    (scout,) = out.cast.briefs["scout-check"]
    assert MARK in scout.split("## Raw output")[1] and MARK not in scout.split("## Raw output")[0]
    (auditor,) = out.cast.briefs["auditor"]
    # what the auditor gets instead: the command, its exit status, and the scout's numbers and pointers
    assert f'"command": {json.dumps(MARKED)}' in auditor and '"exit_code": 0' in auditor
    assert '"check_facts"' in auditor and '"pointers": [' in auditor and '"textkit.py:9"' in auditor
    assert "lines of output" in auditor and "## Raw output" not in auditor
    # the orchestrator briefed the re-run with the command exactly, and heard its status, no output
    (rerun,) = out.cast.briefs["executor-check"]
    assert f'"command": {json.dumps(MARKED)}' in rerun and '"for_criteria": [\n    "C2"' in rerun


def test_a_check_scout_report_missing_a_criterion_is_asked_again_not_a_rejection(tmp_path):
    only_c1 = {"criteria": [{"criterion": "C1", "exit_code": 0, "numbers": "4 passed"}]}
    cast = Cast(check_facts=["It all passed.", only_c1])
    out = run_cast(tmp_path, cast, status_writer="kit", scout_steps=2)  # a read, then the report
    c = out.result.counters
    assert out.result.claimed_done and c["gate_rejections"] == 0 and c["attempts"] == 1
    assert c["format_retries"] == {"scout": 2} and c["check_scout_sessions"] == 3
    unusable = [r[6] for r in out.log if r[5] == "scout report unusable"]
    assert unusable == ["no readable CheckFacts (capped)", "no facts for criteria C2"]
    first, _, third = out.cast.briefs["scout-check"]
    assert third.startswith(first) and "could not be used: no facts for criteria C2" in third
    assert c["handoffs_by_role"]["scout"] == 2  # a re-ask is no new hand-off


def test_a_verdict_the_scout_slips_in_never_reaches_the_auditor(tmp_path):
    slipped = {"criteria": [{"criterion": cid, "exit_code": 0, "status": "met"} for cid in ("C1", "C2")]}
    out = run_cast(tmp_path, Cast(check_facts=[slipped]), status_writer="kit")
    assert out.result.claimed_done
    (auditor,) = out.cast.briefs["auditor"]
    facts = auditor.split('"check_facts"')[1].split('"changed_files"')[0]
    assert '"criterion": "C1"' in facts and '"status"' not in facts and "met" not in facts


def test_what_check_costs_per_role_is_in_the_calls_and_the_report(tmp_path):
    exp = load_experiment(EXPERIMENTS_DIR / "scripted-all.yaml")
    model = scripted.register(Cast(task_tests=True))
    tiers = {t: {"model": model, "price": f"scripted-{t}"} for t in TIERS}
    (tmp_path / "p.yaml").write_text(json.dumps({"name": "p", "price_sheet": "scripted", "tiers": tiers}))
    only = exp.model_copy(
        update={
            "strategies": ["pdca"],
            "tasks": ["micro-slugify"],
            "profile": str(tmp_path / "p.yaml"),
            "tiers": {"pdca": exp.tiers["pdca"]},
            "strategy_options": {},
        }
    )
    out = run_experiment(only, results_dir=tmp_path / "results", progress=False)
    records = analysis.load(out)
    calls = records.calls
    check = calls[calls["phase"] == "CHECK"]
    assert set(check["role"]) == {"orchestrator", "executor", "scout", "auditor", "status-writer"}
    assert set(calls["phase"]) == {"PLAN", "DO", "CHECK", "ACT", "EXIT"}
    table = analysis.role_tier_table(records, phase="CHECK")
    assert table.loc[("pdca", "auditor", "medium"), "calls"] == (check["role"] == "auditor").sum()
    whole = analysis.role_tier_table(records)
    assert table["cost_usd"].sum() == pytest.approx(check["cost_usd"].sum())
    assert table["cost_share"].sum() == pytest.approx(check["cost_usd"].sum() / whole["cost_usd"].sum())
    assert (
        table.loc[("pdca", "auditor", "medium"), "cost_share"]
        == whole.loc[("pdca", "auditor", "medium"), "cost_share"]
    )  # the auditor works in CHECK only
    text = report_text(out)
    part = text.split("Of which in pdca's CHECK phase, per role × tier")[1]
    assert "scout" in part and "executor" in part and "analyst" not in part.split("\n\n")[0]


# writes next to the code, as real test suites do (tomlkit's write into tests/examples/), and removes
# what it wrote: it fails where the clone is read-only
WRITES = "mkdir -p probe && python -c \"open('probe/out.txt', 'w').write('x'); print(6 * 7 * 1001)\" && rm -r probe"


def test_check_proves_a_criterion_whose_command_writes_in_the_clone(tmp_path):
    """CHECK's re-run session has read + exec, no write: its commands write a throwaway layer (not the
    clone read-only), so a proving command that writes files passes there as it did in DO."""
    criteria = [dict(CRITERIA[0]), {**CRITERIA[1], "how_verified": WRITES}]
    out = run_cast(tmp_path, Cast(plans=[plan(acceptance_criteria=criteria)]), status_writer="kit")
    assert out.result.claimed_done
    (auditor,) = out.cast.briefs["auditor"]
    shown = json.loads(auditor.split("Previous output:", 1)[1])
    assert {r["command"]: r["exit_code"] for r in shown["check_reruns"]}[WRITES] == 0  # main: 1, read-only
    (scout,) = out.cast.briefs["scout-check"]
    assert MARK in scout.split("## Raw output")[1] and "Read-only file system" not in scout
    assert not (out.ctx.workspace.root / "probe").exists()
