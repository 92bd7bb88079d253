"""`kit export inspect`: every log read back with Inspect's own reader and checked against the raw
records (run.json, calls.jsonl, transcript.jsonl read here as plain JSON), and served by `inspect view`."""

from __future__ import annotations

import json
import math
import shutil
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from kit.app import cli
from kit.app.export_inspect import export_inspect
from kit.errors import KitError
from kit.paths import REPO_ROOT
from tests.support.records import write_experiment

read_eval_log = pytest.importorskip("inspect_ai.log").read_eval_log

SEVERITIES = ("critical", "major", "minor")


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> Path:
    """experiments/scripted-smoke.yaml run into a temporary results folder (once for the module)."""
    from kit.model import scripted
    from kit.run.runner import run_experiment

    try:
        return run_experiment(
            REPO_ROOT / "experiments" / "scripted-smoke.yaml",
            results_dir=tmp_path_factory.mktemp("smoke") / "results",
            progress=False,
        )
    finally:
        scripted.clear_registry()


def raw_runs(exp: Path) -> dict[str, dict]:
    """run_id -> {run: run.json, calls: [calls.jsonl rows], transcript: [...]}, for runs with a run.json."""
    out = {}
    for d in sorted((exp / "runs").iterdir()):
        if not (d / "run.json").exists():
            continue
        rows = {
            name: [json.loads(x) for x in (d / f"{name}.jsonl").read_text().splitlines() if x.strip()]
            for name in ("calls", "transcript")
        }
        out[d.name] = {"run": json.loads((d / "run.json").read_text()), **rows}
    return out


def summed(calls: list[dict], key: str) -> dict[str, dict]:
    """Usage per value of ``key``, in Inspect's field names, summed by hand from calls.jsonl rows."""
    out: dict[str, dict] = defaultdict(lambda: defaultdict(float))
    for c in calls:
        u = out[c[key]]
        u["input_tokens"] += c["input_uncached"]
        u["input_tokens_cache_read"] += c["cache_read"]
        u["input_tokens_cache_write"] += c["cache_write"]
        u["output_tokens"] += c["output"]
        u["reasoning_tokens"] += c["reasoning"]
        u["total_tokens"] += c["input_uncached"] + c["cache_read"] + c["cache_write"] + c["output"]
        u["total_cost"] += c["cost_usd"]
    return {k: dict(v) for k, v in out.items()}


def as_dict(usage: dict) -> dict[str, dict]:
    fields = ("input_tokens", "input_tokens_cache_read", "input_tokens_cache_write", "output_tokens")
    fields += ("reasoning_tokens", "total_tokens", "total_cost")
    return {k: {f: getattr(u, f) for f in fields} for k, u in usage.items()}


def assert_usage(got: dict, want: dict[str, dict]) -> None:
    got = as_dict(got)
    assert got.keys() == want.keys()
    for k in want:
        for f, v in want[k].items():
            assert got[k][f] == pytest.approx(v), (k, f)


def check_against_records(exp: Path, logs: list[Path]) -> dict[str, object]:
    """The checks every export must pass; returns strategy -> log read back."""
    runs = raw_runs(exp)
    read = {}
    for path in logs:
        log = read_eval_log(str(path))
        read[log.eval.task] = log
    strategies = {r["run"]["strategy"] for r in runs.values()}
    assert set(read) == strategies and len(logs) == len(strategies)  # one log per strategy
    for strategy, log in read.items():
        mine = {rid: r for rid, r in runs.items() if r["run"]["strategy"] == strategy}
        repeats = sorted({r["run"]["repeat"] for r in mine.values()})
        assert log.eval.eval_set_id == exp.name and log.eval.solver == strategy
        assert log.eval.task_args == {
            "strategy": strategy,
            "profile": next(iter(mine.values()))["run"]["profile"],
        }
        assert log.eval.config.epochs == len(repeats)
        # samples x epochs are the runs
        got = {(s.id, s.epoch): s for s in log.samples}
        want = {(r["run"]["task"], repeats.index(r["run"]["repeat"]) + 1): r for r in mine.values()}
        assert got.keys() == want.keys() and len(log.samples) == len(mine)
        all_calls = [c for r in mine.values() for c in r["calls"]]
        assert_usage(log.stats.model_usage, summed(all_calls, "model"))
        assert_usage(log.stats.role_usage, summed(all_calls, "role"))
        for key, sample in got.items():
            rec = want[key]
            assert sample.metadata["run_id"] == rec["run"]["run_id"]
            assert_usage(sample.model_usage, summed(rec["calls"], "model"))
            assert_usage(sample.role_usage, summed(rec["calls"], "role"))
            check_scores(sample, rec["run"])
            models = [e for e in sample.events if e.event == "model"]
            assert [(e.role, e.model) for e in models] == [(c["role"], c["model"]) for c in rec["calls"]]
    return read


def check_scores(sample, run: dict) -> None:
    score = run["score"]
    if run["outcome"] in ("error", "interrupted"):
        assert sample.scores is None and sample.error is not None
        return
    total, failed = score["requirements_total"], score["requirements_failed"]
    assert sample.scores["requirements_met"].value == pytest.approx(1 - failed / total)
    assert sample.scores["requirements_met"].metadata["outcome"] == run["outcome"]
    assert sample.scores["requirements_met"].metadata["failed"] == score["failed"]
    assert sample.scores["defects"].value == {s: score["defects"][s] for s in SEVERITIES}
    solved = score["defects"]["critical"] + score["defects"]["major"] == 0
    assert sample.scores["solved"].value == ("C" if solved else "I")


@pytest.mark.slow
def test_scripted_smoke_exports_and_reads_back_equal_to_the_records(smoke):
    res = export_inspect(smoke)
    assert res.out == smoke / "inspect" and res.runs == 2 and not res.incomplete
    read = check_against_records(smoke, res.logs)
    log = read["vibe"]
    runs = raw_runs(smoke)
    first = next(iter(runs.values()))["run"]
    assert log.status == "success" and log.error is None
    assert log.eval.revision.commit == first["kit_commit"].removesuffix("+dirty")
    assert {r: m.model for r, m in log.eval.model_roles.items()} == {"coder": "scripted/oracle"}
    assert log.eval.metadata["note"].startswith("scripted model")
    for sample in log.samples:
        rec = runs[sample.metadata["run_id"]]
        main = [t["message"] for t in rec["transcript"] if t["conversation"] == "coder"]
        assert [m.role for m in sample.messages] == [m["role"] for m in main]  # the main conversation
        n_tools = sum(len(m.get("tool_calls") or []) for m in main)
        tools = [e for e in sample.events if e.event == "tool"]
        assert len(tools) == n_tools > 0 and all(e.result for e in tools)
        spans = [e for e in sample.events if e.event == "span_begin"]
        assert [s.name for s in spans] == ["coder"]
        assert all(e.span_id == spans[0].id for e in sample.events if e.event in ("model", "tool"))


def test_synthetic_experiment_usage_epochs_and_means(tmp_path):
    """Two strategies, two repeats each, several roles and tiers, cache writes, an incomplete run."""
    exp = write_experiment(tmp_path / "results")
    res = export_inspect(exp, tmp_path / "out")
    assert [p.parent for p in res.logs] == [tmp_path / "out"] * 2
    assert [p.name for p in res.incomplete] == ["micro-slugify__vibe__r9"]
    read = check_against_records(exp, res.logs)
    runs = raw_runs(exp)
    assert read["pdca"].stats.role_usage["executor"].input_tokens_cache_write > 0
    for strategy, log in read.items():
        mine = [r["run"] for r in runs.values() if r["run"]["strategy"] == strategy]
        met = [1 - r["score"]["requirements_failed"] / r["score"]["requirements_total"] for r in mine]
        scores = {s.name: s for s in log.results.scores}
        assert scores["requirements_met"].metrics["mean"].value == pytest.approx(statistics.fmean(met))
        want_err = statistics.stdev(met) / math.sqrt(len(met))
        assert scores["requirements_met"].metrics["stderr"].value == pytest.approx(want_err)
        crit = [r["score"]["defects"]["critical"] for r in mine]
        assert scores["defects_critical"].metrics["mean"].value == pytest.approx(statistics.fmean(crit))
        assert scores["requirements_met"].scored_samples == len(mine)
        assert sorted(s.epoch for s in log.samples) == [1, 2]  # repeats 0 and 1
    assert read["vibe"].eval.metadata["incomplete_runs"] == ["micro-slugify__vibe__r9"]
    assert read["pdca"].eval.metadata["incomplete_runs"] == []


def _rewrite(run_dir: Path, **changes) -> None:
    path = run_dir / "run.json"
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


def test_errored_runs_carry_an_error_and_no_score_and_limits_are_kept(tmp_path):
    exp = write_experiment(tmp_path / "results", incomplete=False)
    runs = exp / "runs"
    _rewrite(runs / "micro-slugify__vibe__r0", outcome="error", error="provider down after 3 retries")
    _rewrite(runs / "micro-slugify__vibe__r1", outcome="budget", budget={"max_model_calls": 3})
    _rewrite(runs / "micro-slugify__pdca__r0", outcome="interrupted", score=None)
    _rewrite(
        runs / "micro-slugify__pdca__r1", outcome="capped", counters={"max_steps": 7, "stop_reason": "capped"}
    )
    read = check_against_records(exp, export_inspect(exp).logs)
    vibe, pdca = read["vibe"], read["pdca"]
    err = next(s for s in vibe.samples if s.epoch == 1)
    assert err.scores is None and "provider down after 3 retries" in err.error.message
    assert vibe.status == "error" and "micro-slugify__vibe__r0" in vibe.error.message
    budget = next(s for s in vibe.samples if s.epoch == 2)
    assert budget.limit.limit == 3 and "max_model_calls=3" in budget.limit.reason and budget.scores
    assert pdca.status == "error" and next(s for s in pdca.samples if s.epoch == 1).scores is None
    capped = next(s for s in pdca.samples if s.epoch == 2)
    assert (capped.limit.type, capped.limit.limit) == ("turn", 7)
    scores = {s.name: s for s in vibe.results.scores}
    assert (scores["requirements_met"].scored_samples, scores["requirements_met"].unscored_samples) == (1, 1)
    assert scores["requirements_met"].metrics["mean"].value == pytest.approx(1 - 2 / 6)  # the budget run only
    assert vibe.results.completed_samples == 1 and vibe.results.total_samples == 2


def test_a_duplicate_task_and_repeat_stops_before_writing(tmp_path):
    exp = write_experiment(tmp_path / "results", incomplete=False)
    shutil.copytree(exp / "runs" / "micro-slugify__vibe__r0", exp / "runs" / "micro-slugify__vibe__r0-copy")
    with pytest.raises(KitError, match=r"more than one run for \(task, repeat\)"):
        export_inspect(exp)
    assert not list((exp / "inspect").glob("*.eval")) if (exp / "inspect").exists() else True


def test_export_again_replaces_the_logs(tmp_path):
    exp = write_experiment(tmp_path / "results")
    first = export_inspect(exp).logs
    assert export_inspect(exp).logs == first
    _rewrite(exp / "runs" / "micro-slugify__vibe__r0", started_at="2024-06-01T00:00:00.000Z")  # a redone run
    again = export_inspect(exp).logs
    assert (
        again[0] == first[0] and again[1] != first[1]
    )  # pdca unchanged; vibe's log now named by the new start
    assert sorted((exp / "inspect").iterdir()) == sorted(again)  # the old vibe log is gone


def test_cli_export_and_bad_input(tmp_path, capsys):
    exp = write_experiment(tmp_path / "results")
    assert cli.main(["export", "inspect", str(exp), "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert out.count("wrote ") == 2 and "skipped 1 incomplete run folder(s)" in out
    assert f"inspect view --log-dir {tmp_path / 'o'}" in out
    assert cli.main(["export", "inspect", str(tmp_path / "nope")]) == 2
    assert "is not a folder" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert cli.main(["export", "inspect", str(tmp_path / "empty")]) == 2
    assert "holds no runs/ folder" in capsys.readouterr().err


def test_missing_inspect_says_how_to_install(tmp_path, monkeypatch, capsys):
    exp = write_experiment(tmp_path / "results")
    monkeypatch.setitem(sys.modules, "inspect_ai", None)
    monkeypatch.setitem(sys.modules, "inspect_ai.log", None)
    assert cli.main(["export", "inspect", str(exp)]) == 2
    assert "pip install -e '.[inspect]'" in capsys.readouterr().err
    assert not (exp / "inspect").exists()


def test_the_cli_does_not_import_inspect_or_pandas():
    code = (
        "import sys; from kit.app.cli import build_parser; build_parser(); "
        "print(sorted(m for m in ('inspect_ai', 'pandas') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, check=True
    )
    assert out.stdout.strip() == "[]"


@pytest.mark.slow
def test_inspect_view_lists_the_exported_logs(tmp_path):
    from tests.support.inspect_view import get_json, inspect_view

    exp = write_experiment(tmp_path / "results")
    res = export_inspect(exp)
    with inspect_view(res.out) as base:
        listing = get_json(f"{base}/api/log-files")
    names = {Path(f["name"].removeprefix("file://")).name: f["task"] for f in listing["files"]}
    assert names == {p.name: p.name.split("_")[1] for p in res.logs}
    assert set(names.values()) == {"vibe", "pdca"}


def test_main_conversation_is_the_lead_roles_and_caps_are_named_by_the_stop_reason(tmp_path):
    exp = write_experiment(tmp_path / "results", incomplete=False)
    runs = exp / "runs"
    _rewrite(runs / "micro-slugify__pdca__r0", role_tiers={"executor": "cheap", "orchestrator": "strong"})
    workflow_like = {"stop_reason": "cycle cap", "params": {"max_cycles": 16, "max_steps": 20}}
    _rewrite(runs / "micro-slugify__pdca__r1", outcome="capped", counters=workflow_like)
    pdca = check_against_records(exp, export_inspect(exp).logs)["pdca"]
    lead, other = sorted(pdca.samples, key=lambda s: s.epoch)
    assert lead.metadata["main_conversation"] == "executor"  # the first role of the run's role -> tier map
    assert [m.text for m in lead.messages] == ["executor says hi", "executor says hi"]
    assert other.metadata["main_conversation"] == "orchestrator"  # no map recorded: the first conversation
    assert (other.limit.type, other.limit.limit) == ("custom", 16) and "max_cycles=16" in other.limit.reason


def test_the_viewer_trusts_nothing_leads_with_solved_and_pools_no_error_bar_across_tasks(tmp_path):
    """issue 30 item 5 and issue 32 item 5: agent content untrusted; solved first and its pill follows
    the score (the completion mark, green for every run, hidden); a standard error only over the
    repeats of one task; each sample its run's own duration."""
    exp = write_experiment(tmp_path / "results", incomplete=False)
    runs = exp / "runs"
    _rewrite(runs / "micro-slugify__pdca__r0", outcome="capped")  # ended capped, still solved
    one_task = check_against_records(exp, export_inspect(exp).logs)
    for log in one_task.values():
        assert log.eval.viewer.trust_content is False
        view = log.eval.viewer.task_samples_view
        columns = [(c.id, c.visible) for c in view.columns]
        assert columns[:4] == [("sampleStatus", False), ("sampleId", True), ("epoch", True),
                               ("score__solved__solved", True)]  # fmt: skip
        assert [s.name for s in log.results.scores][0] == "solved"
        assert "stderr" in log.results.scores[0].metrics  # one task: the repeats' standard error
        for sample in log.samples:
            run = raw_runs(exp)[sample.metadata["run_id"]]["run"]
            assert list(sample.scores)[0] == "solved"
            solved = run["score"]["defects"]["critical"] + run["score"]["defects"]["major"] == 0
            assert sample.scores["solved"].value == ("C" if solved else "I")
            assert sample.total_time == run["wall_s"]
    for run in runs.glob("*__r1"):  # the second repeats become another task: runs of two tasks
        data = json.loads((run / "run.json").read_text())
        data["task"] = "csv-export-stream"
        (run / "run.json").write_text(json.dumps(data))
    two_tasks = check_against_records(exp, export_inspect(exp).logs)
    for log in two_tasks.values():
        for score in log.results.scores:
            assert set(score.metrics) == {"mean"}  # no error bar pooled across tasks
            assert "not a verdict" in score.metadata["note"]


def test_the_html_report_of_the_scripted_smoke_experiment_is_one_offline_file_with_figures(smoke, tmp_path):
    """issue 32: `kit report --format html` on the scripted smoke experiment writes one file that opens
    offline with its figures (nothing it references lives anywhere else)."""
    import base64
    import re

    out = tmp_path / "report.html"
    assert cli.main(["report", str(smoke), "--format", "html", "--out", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    sources = re.findall(r'(?:src|href)="([^"]*)"', page)
    images = [s for s in sources if s.startswith("data:image/png;base64,")]
    assert len(images) >= 3 and all(base64.b64decode(s.split(",", 1)[1])[:4] == b"\x89PNG" for s in images)
    assert all(s.startswith(("data:", "#")) for s in sources)  # no file, server or CDN to reach
    assert "scripted model" in page and "Summary: solved vibe 2/2 (100%)" in page
