"""Outcomes are first-class in the views: counts by outcome, defect means over scored runs only with
the excluded count beside them, errors with their message, the Pareto plot leaving unscored runs out
-- plus `tasks validate` on broken acceptance files and `make lab`'s flags (``docs/strategies.md``,
``## Outcomes and stop reasons``)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from kit import analysis
from kit.analysis import figures, report
from kit.app.notebooks import headless, jupyter_lab_command, lab_workspace
from kit.importers.validate import validate_task
from kit.paths import NOTEBOOKS_DIR, REPO_ROOT, TASKS_DIR
from kit.tasks.task import load_task
from tests.support.records import write_experiment


def set_outcome(exp, run_id: str, outcome: str, error: str | None = None, score: bool = True) -> None:
    path = exp / "runs" / run_id / "run.json"
    data = json.loads(path.read_text())
    data["outcome"], data["error"] = outcome, error
    if not score:
        data["score"] = None
    path.write_text(json.dumps(data))


@pytest.fixture
def mixed(tmp_path):
    """vibe: r0 done (3 defects), r1 error (2 defects recorded); pdca: r0 interrupted (no score),
    r1 tampered (0 defects recorded)."""
    exp = write_experiment(tmp_path, incomplete=False)
    set_outcome(exp, "micro-slugify__vibe__r1", "error", "ModelError: provider down after 4 attempts")
    set_outcome(exp, "micro-slugify__pdca__r0", "interrupted", "Ctrl-C", score=False)
    set_outcome(exp, "micro-slugify__pdca__r1", "tampered")
    return analysis.load(exp)


def test_outcome_table_counts_runs_by_outcome_per_strategy(mixed):
    t = analysis.outcome_table(mixed)
    assert t.loc["vibe", ["runs", "scored", "done", "error"]].tolist() == [2, 1, 1, 1]
    assert t.loc["pdca", ["runs", "scored", "tampered", "interrupted"]].tolist() == [2, 1, 1, 1]
    assert t.loc["pdca", "done"] == 0
    assert list(t.columns[2:-1]) == ["done", "tampered", "error", "interrupted"]  # the canonical order
    assert t.columns[-1] == "stop_reasons"


def test_one_outcome_vocabulary_with_stop_reasons_and_a_legend(tmp_path):
    """issue 21, item 2: every strategy's success end is `done`, whatever its own word was in older
    records (pass, converged-clean, all-pass); a pdca run stopped by the run budget is `budget`; the
    stop reasons stand beside the outcomes in the table, and the report prints a legend."""
    exp = write_experiment(tmp_path, incomplete=False)
    set_outcome(exp, "micro-slugify__pdca__r0", "pass")  # an old record: the stop reason in counters
    set_reason(exp, "micro-slugify__pdca__r0", counters="exit")
    set_outcome(exp, "micro-slugify__pdca__r1", "incomplete")  # old pdca: the run budget was spent
    set_reason(exp, "micro-slugify__pdca__r1", counters="cap:budget (run budget of 20 model calls used up)")
    set_outcome(exp, "micro-slugify__vibe__r0", "done")  # a new record: run.json's own stop_reason
    set_reason(exp, "micro-slugify__vibe__r0", field="done")
    set_outcome(exp, "micro-slugify__vibe__r1", "capped")
    set_reason(exp, "micro-slugify__vibe__r1", field="format_errors")
    records = analysis.load(exp)
    t = analysis.outcome_table(records)
    assert t.loc["pdca", ["done", "budget"]].tolist() == [1, 1] and "incomplete" not in t.columns
    assert t.loc["pdca", "stop_reasons"] == "done: exit 1; budget: cap:budget 1"
    assert t.loc["vibe", "stop_reasons"] == "done: done 1; capped: format_errors 1"
    assert sorted(records.runs["stop_reason"]) == sorted(
        ["exit", "cap:budget (run budget of 20 model calls used up)", "done", "format_errors"]
    )
    text = report.report_text(exp)
    assert "outcomes: 2 done (1 solved), 1 capped (0 solved), 1 budget (1 solved)" in text
    legend = text[text.index("Outcomes (the same words") :]
    for outcome in ("done", "incomplete", "capped", "budget", "error", "interrupted", "tampered", "unscored"):
        assert f"\n  {outcome} " in legend
    assert "  pdca: pass -> done" in legend and "cap:budget -> budget" in legend
    assert "  vibe: done -> done" in legend


def set_reason(exp, run_id: str, *, counters: str | None = None, field: str | None = None) -> None:
    path = exp / "runs" / run_id / "run.json"
    data = json.loads(path.read_text())
    if counters is not None:
        data.setdefault("counters", {})["stop_reason"] = counters
    if field is not None:
        data["stop_reason"] = field
    path.write_text(json.dumps(data))


def test_defect_means_are_over_scored_runs_only_with_the_excluded_count(mixed):
    t = analysis.strategy_table(mixed)
    assert t.loc["vibe", "total"] == 3  # r0 only: the errored r1's 2 defects do not count
    assert t.loc["vibe", ["runs", "scored", "excluded"]].tolist() == [2, 1, 1]
    assert t.loc["pdca", "total"] == 0  # the tampered run counts (as scored); the interrupted one not
    assert t.loc["pdca", "excluded"] == 1
    assert t.loc["vibe", "cost_usd"] == mixed.runs[mixed.runs.strategy == "vibe"]["cost_usd"].mean()


def test_the_report_shows_outcomes_excluded_counts_and_errors_with_their_message(mixed):
    text = report.report_text(mixed.root)
    assert "outcomes: 1 done (0 solved), 1 tampered, 1 error, 1 interrupted" in text
    assert "Runs by outcome" in text
    assert "1 (1 excl.)" in text
    assert "Errors (1 run(s)" in text
    assert "fixture/micro-slugify__vibe__r1: ModelError: provider down after 4 attempts" in text


def test_error_runs_lists_each_errored_run_with_its_message(mixed):
    errors = analysis.error_runs(mixed)
    assert errors[["strategy", "error"]].values.tolist() == [
        ["vibe", "ModelError: provider down after 4 attempts"]
    ]


def test_the_pareto_plot_leaves_unscored_runs_out_and_says_how_many(mixed, tmp_path):
    shown, note = figures.scored_runs(mixed.runs)
    assert sorted(shown["outcome"]) == ["done", "tampered"]
    assert note == "left out (not scored): 1 error, 1 interrupted"
    assert figures.pareto(mixed.runs, tmp_path / "p.png").stat().st_size > 0


def test_kit_report_survives_a_run_json_that_is_not_a_run_record(mixed, capsys):
    from kit.app.cli import main

    (mixed.root / "runs" / "micro-slugify__vibe__r0" / "run.json").write_text('{"run_id": 3}')
    assert main(["report", str(mixed.root)]) == 0
    assert "1 incomplete run(s) ignored" in capsys.readouterr().out


# --------------------------------------------------------------------------- tasks validate


def broken_task(tmp_path, name: str, files: dict[str, str]):
    folder = tmp_path / name
    shutil.copytree(TASKS_DIR / "micro-slugify", folder)
    for rel, text in files.items():
        (folder / "acceptance" / rel).write_text(text)
    return load_task(folder)


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"test_extra.py": "def broken(:\n"}, "cannot parse"),
        (
            {
                "test_extra.py": "import pytest\nimport no_such_module_xyz\n\n"
                "@pytest.mark.severity('minor')\ndef test_x():\n    assert True\n"
            },
            "ImportError",
        ),
        ({"checks.py": "def test_never_collected():\n    assert False\n"}, "pytest will not collect it"),
    ],
    ids=["syntax-error", "import-error", "not-collected"],
)
def test_tasks_validate_fails_on_an_acceptance_file_that_does_not_import_or_collect(
    tmp_path, files, expected
):
    report_ = validate_task(broken_task(tmp_path, "broken", files))
    assert not report_.ok
    assert any(expected in p for p in report_.problems), report_.problems


# --------------------------------------------------------------------------- make lab


def test_lab_flags_follow_the_user_and_the_display():
    linux_desktop = {"DISPLAY": ":0"}
    assert "--allow-root" in jupyter_lab_command(uid=0, environ=linux_desktop, platform="linux")
    assert "--allow-root" not in jupyter_lab_command(uid=1000, environ=linux_desktop, platform="linux")
    assert "--no-browser" not in jupyter_lab_command(uid=1000, environ=linux_desktop, platform="linux")
    assert "--no-browser" in jupyter_lab_command(uid=1000, environ={}, platform="linux")
    assert not headless({}, "darwin") and headless({"SSH_TTY": "x"}, "linux")
    lab = jupyter_lab_command(
        uid=1000, environ=linux_desktop, platform="linux", workspace=Path("/r/lab-notebooks")
    )
    assert "--ServerApp.root_dir=/r" in lab and str(NOTEBOOKS_DIR) not in " ".join(lab)  # a working copy
    assert "-m kit lab" in (REPO_ROOT / "Makefile").read_text().split("\nlab:")[1].split("\n\n")[0]


@pytest.mark.slow
def test_make_labs_command_starts_jupyterlab_as_this_user(tmp_path):
    """Starts the real server with the kit's flags (as root here, it needs --allow-root), waits until it
    answers on 127.0.0.1, then stops it by its PID."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = jupyter_lab_command(
        [f"--port={port}", "--ip=127.0.0.1", "--IdentityProvider.token="],
        workspace=lab_workspace(tmp_path / "results"),
    )
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt")}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline, status = time.monotonic() + 90, None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status", timeout=2) as r:
                    status = r.status
                    break
            except OSError:
                time.sleep(0.3)
        assert status == 200, proc.stdout.read() if proc.poll() is not None else "no answer"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert sys.executable == cmd[0]


def test_an_unscored_run_counts_as_every_requirement_failed_and_is_named(tmp_path):
    """A scoring failure never drops a run out of the means; it is scored as every
    requirement failed and the report counts it."""
    exp = write_experiment(tmp_path, incomplete=False)
    path = exp / "runs" / "micro-slugify__vibe__r1" / "run.json"
    data = json.loads(path.read_text())
    total = data["score"]["requirements_total"]
    data["outcome"], data["error"] = "unscored", "scoring failed: OSError: disk on fire"
    data["score"].update(
        unscored_reason="scoring failed: OSError: disk on fire",
        requirements_failed=total,
        defects={"critical": 1, "major": 3, "minor": 3},
    )
    path.write_text(json.dumps(data))
    records = analysis.load(exp)
    t = analysis.strategy_table(records)
    assert t.loc["vibe", ["runs", "scored", "excluded"]].tolist() == [2, 2, 0]
    assert records.runs.set_index("run_id").loc["micro-slugify__vibe__r1", "failed_share"] == 1.0
    text = report.describe(records)
    assert "unscored: scoring failed" in text and "(1 of" in text
