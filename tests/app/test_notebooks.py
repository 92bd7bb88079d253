"""The papermill notebooks run end to end on a synthetic results folder; the prompt lab's plumbing."""

from __future__ import annotations

import argparse
import json
import sys
import types
from pathlib import Path

import nbformat
import pytest

from kit.app import notebooks
from kit.app import prompt_lab as lab
from kit.errors import ConfigError, KitError
from kit.paths import NOTEBOOKS_DIR
from tests.support.records import write_experiment

pytestmark = pytest.mark.slow  # the whole module: papermill executes notebooks

FIGURES = (
    "pareto.png",
    "timeline.png",
    "tier_cost_bars.png",
    "tier_shares_vs_reference.png",
    "whatif_reassign.png",
    "whatif_model.png",
    "whatif_ttl.png",
    "whatif_chained.png",
)
PARAMETERS = {
    "benchmark": {"results_dir", "experiment", "figures_dir"},
    "tier_economics": {
        "results_dir",
        "price_sheet",
        "reassign",
        "reference",
        "measured_strategy",
        "figures_dir",
        "whatif_models",
        "whatif_prices",
        "whatif_ttl",
    },  # fmt: skip
    "prompt_lab": {
        "strategy",
        "role",
        "prompt_override",
        "prompt_file",
        "task",
        "profile",
        "like",
        "api_base",
        "sandbox",
        "results_dir",
        "limits",
        "label",
    },
    "verdict": {"results_dir", "baseline", "n_resamples", "seed", "figures_dir"},
    "crossover": {"results_dir", "measure", "baseline", "n_boot", "seed", "figures_dir"},
}


@pytest.mark.parametrize("name", list(notebooks.NOTEBOOKS))
def test_notebook_shape(name):
    nb = nbformat.read(NOTEBOOKS_DIR / notebooks.NOTEBOOKS[name], as_version=4)
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")
    assert "parameters" in nb.cells[1].metadata.get("tags", [])
    assert set(notebooks.declared_parameters(name)) == PARAMETERS[name]  # every line parsed by papermill
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")  # committed clean


def _many_counters(exp: Path, n: int = 40) -> list[str]:
    """Give every pdca run ``n`` more counters (more rows than pandas shows of a table); their names."""
    names = [f"gate_{i:02d}_rejections" for i in range(n)]
    for run in exp.glob("runs/*__pdca__*/run.json"):
        data = json.loads(run.read_text())
        data["counters"].update({name: i for i, name in enumerate(names)})
        run.write_text(json.dumps(data))
    return names


def test_benchmark_and_economics_run_and_write_figures(tmp_path):
    exp = write_experiment(tmp_path / "results")
    counters = _many_counters(exp)
    out = notebooks.execute_all(exp, only=["01", "tier_economics"], progress=False)
    assert out == [exp / "notebooks" / "01_benchmark.ipynb", exp / "notebooks" / "02_tier_economics.ipynb"]
    for name in FIGURES:
        png = exp / "notebooks" / "figures" / name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    text = json.dumps(nbformat.read(out[1], as_version=4).cells)
    assert "cheap 60%, medium 37%, strong 3%" in text and "= 25x" in text and "= 23.35x" in text
    assert "moved 4 calls of executor" in text
    assert "no change in cost" in text  # the fixture has no breakpoint records: the TTL what-if says so
    benchmark = json.dumps(nbformat.read(out[0], as_version=4).cells)
    assert all(name in benchmark for name in counters)  # every loop counter, none cut by pandas
    assert "How large the context got" in benchmark and "prompt median" in benchmark
    (other,) = notebooks.execute_all(
        exp, only="02", params={"reassign": {"executor": "strong"}}, progress=False
    )
    plain, moved = exp / "notebooks" / "figures", exp / "notebooks" / "figures" / other.stem
    assert (plain / "whatif_reassign.png").read_bytes() != (moved / "whatif_reassign.png").read_bytes()
    assert (plain / "tier_cost_bars.png").read_bytes() == (moved / "tier_cost_bars.png").read_bytes()


def test_verdict_notebook_prints_the_paired_verdict_and_the_frontier(tmp_path):
    exp = write_experiment(tmp_path / "results")
    (out,) = notebooks.execute_all(exp, only="04", params={"n_resamples": 500}, progress=False)
    text = json.dumps(nbformat.read(out, as_version=4).cells)
    # the fixture: pdca solves both repeats, vibe neither; 2 defects fewer per pair
    assert "pdca vs vibe: +100 pts solved (no interval), -2.00 defects/run (no interval)" in text
    assert "2 paired runs" in text and "only 2 pairs" in text and "on_frontier" in text
    assert "defects: ~6 paired runs to tell apart (have 2)" in text  # 2 pairs never "differ"
    assert out.name == "04_verdict-n_resamples-500.ipynb"  # named by its parameters, figures beside
    frontier = exp / "notebooks" / "figures" / "04_verdict-n_resamples-500" / "frontier.png"
    assert frontier.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_economics_on_a_folder_without_runs_says_so(tmp_path, capfd):
    empty = tmp_path / "empty"
    empty.mkdir()
    (out,) = notebooks.execute_all(
        empty, only="02", params={"reassign": {"auditor": "strong"}}, progress=False
    )
    assert "without encryption" not in capfd.readouterr().err  # the kit's kernels: no TCP warning (issue 41)
    text = json.dumps(nbformat.read(out, as_version=4).cells)
    assert (
        "no complete runs" in text
        and "no pdca runs" in text
        and "no calls in" in text
        and "nothing to change" in text
    )


def test_a_failing_cell_names_the_notebook_and_the_error(tmp_path):
    with pytest.raises(
        KitError, match=r"02_tier_economics-reference-nope\.yaml\.ipynb failed in cell .*ConfigError"
    ):
        notebooks.execute_all(tmp_path, only="02", params={"reference": "nope.yaml"}, progress=False)


def test_prompt_lab_notebook_runs(tmp_path):
    pytest.importorskip("kit.run.runner")
    (out,) = notebooks.execute_all(
        tmp_path,
        only="03",
        params={"profile": "scripted", "results_dir": str(tmp_path / "lab")},
        progress=False,
    )
    cells = nbformat.read(out, as_version=4).cells
    assert "baseline" in json.dumps(cells)
    stderr = [o for c in cells for o in c.get("outputs", []) if o.get("name") == "stderr"]
    assert stderr == []  # no red box in the lab: the progress bar is a widget, no TqdmWarning


def test_select_params_and_cli():
    assert notebooks.select(None) == ["benchmark", "tier_economics", "verdict", "crossover"]  # lab when asked
    assert notebooks.select(["03", "01_benchmark", "benchmark"]) == ["prompt_lab", "benchmark"]
    with pytest.raises(KitError, match="unknown notebook"):
        notebooks.select("06")
    assert notebooks.parse_param("price_sheet=None") == ("price_sheet", None)
    assert notebooks.parse_param("reassign={executor: strong}") == ("reassign", {"executor": "strong"})
    assert notebooks.parse_param("task=micro-slugify") == ("task", "micro-slugify")
    with pytest.raises(KitError, match="name=value"):
        notebooks.parse_param("oops")
    with pytest.raises(KitError, match="unknown notebook parameter"):
        notebooks.execute_all("results/x", params={"price_shet": "a"}, only="02")
    parser = argparse.ArgumentParser()
    notebooks.add_cli(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["notebooks", "results/x", "--only", "02", "--param", "price_sheet=null"])
    assert (args.results_dir, args.only, args.param, args.func) == (
        "results/x",
        ["02"],
        ["price_sheet=null"],
        notebooks._cli,
    )


def test_ensure_kernel_runs_this_interpreter():
    from jupyter_client.kernelspec import KernelSpecManager

    argv0 = KernelSpecManager().get_kernel_spec(notebooks.ensure_kernel()).argv[0]
    assert argv0 in ("python", "python3") or Path(argv0) == Path(sys.executable)


# --------------------------------------------------------------------------- the prompt lab


@pytest.fixture
def prompts(tmp_path, monkeypatch):
    folder = tmp_path / "prompts"
    (folder / "vibe").mkdir(parents=True)
    (folder / "vibe" / "coder.md").write_text("You are a coder.\n", encoding="utf-8")
    monkeypatch.setattr(lab, "PROMPTS_DIR", folder)
    return folder


def test_lab_experiments_differ_only_by_the_override(prompts):
    base, mod = lab.lab_experiments("vibe", "coder", "Be careful.", "micro-slugify", profile="scripted")
    assert (base.name, mod.name) == ("lab-vibe-coder-baseline", "lab-vibe-coder-be-careful")
    assert base.prompt_overrides == {} and mod.prompt_overrides == {"vibe/coder": "Be careful."}
    assert base.model_dump(exclude={"name", "prompt_overrides"}) == mod.model_dump(
        exclude={"name", "prompt_overrides"}
    )
    other = lab.lab_experiments("vibe", "coder", "Be brave.", "micro-slugify", profile="scripted")[1]
    assert other.name != mod.name  # another prompt, another name (the same name: see test_lab.py)
    with pytest.raises(ConfigError, match="pick one of: coder"):
        lab.lab_experiments("vibe", "auditor", "x", "micro-slugify")
    with pytest.raises(ConfigError, match="pick one of: vibe"):
        lab.lab_experiments("pdcaa", "coder", "x", "micro-slugify")


def test_prompt_lab_compares_the_two_runs(prompts, tmp_path, monkeypatch):
    seen = []

    def run_experiment(experiment, *, results_dir=None, progress=True, **kw):
        seen.append(experiment)
        folder = write_experiment(
            results_dir, name=experiment.name, strategies=("vibe",), repeats=1, incomplete=False
        )
        if experiment.prompt_overrides:  # the modified run said something else once
            (folder / "runs" / "micro-slugify__vibe__r0" / "transcript.jsonl").open("a").write(
                json.dumps(
                    {
                        "run_id": "x",
                        "seq": 99,
                        "conversation": "coder",
                        "role": "coder",
                        "message": {
                            "role": "assistant",
                            "content": "I ran the tests.",
                            "tool_calls": [{"function": {"name": "run", "arguments": "pytest"}}],
                        },
                    }
                )
                + "\n"
            )
        return folder

    monkeypatch.setitem(sys.modules, "kit.run.runner", types.SimpleNamespace(run_experiment=run_experiment))
    result = lab.prompt_lab(
        "vibe", "coder", "Be careful.", "micro-slugify", profile="scripted", results_dir=tmp_path / "labres"
    )
    assert [bool(e.prompt_overrides) for e in seen] == [False, True]
    assert result.baseline_dir.parent == tmp_path / "labres"
    assert list(result.metrics.columns) == ["baseline", "modified", "change"]
    assert (
        result.metrics.loc["defects_total", "baseline"] == 3
        and result.metrics.loc["defects_total", "change"] == 0
    )
    assert result.metrics.loc["cost_usd", "change"] == 0.0
    assert (
        result.metrics.loc["outcome", "baseline"] == "done" and result.metrics.loc["outcome", "change"] == ""
    )
    assert "+I ran the tests." in result.transcript_diff
    assert "+-> run(pytest)" in result.transcript_diff
    assert "--- lab-vibe-coder-baseline/" in result.transcript_diff


def test_all_three_notebooks_on_records_the_scripted_model_produced(tmp_path):
    """What CI checks: a real (scripted) experiment through the runner, then every notebook on it."""
    from kit.config import Experiment, Limits
    from kit.run.runner import run_experiment

    exp = run_experiment(
        Experiment(
            name="ci-scripted",
            tasks=["micro-slugify"],
            strategies=["vibe", "linear", "harness"],
            profile="scripted",
            limits=Limits(max_steps=6),
            strategy_options={"linear": {"max_steps_per_step": 2}, "harness": {"max_sessions": 1}},
        ),
        results_dir=tmp_path / "results",
        progress=False,
    )
    out = notebooks.execute_all(exp, only=["01", "02"], progress=False)
    out += notebooks.execute_all(
        exp, only="03", params={"profile": "scripted", "results_dir": str(tmp_path / "lab")}, progress=False
    )
    out += notebooks.execute_all(exp, only="04", params={"n_resamples": 500}, progress=False)
    assert [p.name for p in out] == [
        "01_benchmark.ipynb",
        "02_tier_economics.ipynb",
        "03_prompt_lab-profile-scripted.ipynb",
        "04_verdict-n_resamples-500.ipynb",
    ]
    for name in FIGURES:
        assert (exp / "notebooks" / "figures" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    bench = json.dumps(nbformat.read(out[0], as_version=4).cells)
    assert "scripted model" in bench and "linear" in bench and "harness" in bench
    verdicts = json.dumps(nbformat.read(out[3], as_version=4).cells)  # one repeat each: one pair per line
    assert "harness vs linear:" in verdicts and "linear vs vibe:" in verdicts and "1 paired runs" in verdicts


def test_notebooks_on_the_scripted_smoke_experiment_analyse_only(tmp_path, monkeypatch, capfd):
    """`kit notebooks RESULTS` on experiments/scripted-smoke.yaml: 01, 02 and 04, under a minute, no
    model call (the calls recorded stay as they were, no experiment is added), the progress bar naming
    the notebook and the cell."""
    import time

    from kit.run.runner import run_experiment

    monkeypatch.setenv("ORCHBENCH_RESULTS_DIR", str(tmp_path / "results"))
    exp = run_experiment(NOTEBOOKS_DIR.parent / "experiments" / "scripted-smoke.yaml", progress=False)
    calls = {p: p.read_bytes() for p in sorted(exp.glob("runs/*/calls.jsonl"))}
    assert calls
    capfd.readouterr()
    started = time.monotonic()
    out = notebooks.execute_all(exp, progress=True)
    took = time.monotonic() - started
    assert [p.name for p in out] == [
        "01_benchmark.ipynb",
        "02_tier_economics.ipynb",
        "04_verdict.ipynb",
        "05_crossover.ipynb",
    ]
    assert took < 90, f"the four notebooks took {took:.0f} s"
    assert {p: p.read_bytes() for p in sorted(exp.glob("runs/*/calls.jsonl"))} == calls
    assert [p.name for p in (tmp_path / "results").iterdir() if not p.name.startswith(".")] == [
        "scripted-smoke"
    ]
    assert not (exp / "lab").exists()
    progress = capfd.readouterr().err
    assert "01_benchmark cell 2/" in progress and "04_verdict cell" in progress
    bench = json.dumps(nbformat.read(out[0], as_version=4).cells)
    assert "Summary: solved vibe 2/2 (100%)" in bench and "One strategy (vibe)" in bench  # who won, in words
    assert "stop_reason" in bench and "format_errors" in bench  # vibe's loop counters
    crossing = json.dumps([c.get("outputs", []) for c in nbformat.read(out[3], as_version=4).cells])
    assert "too few tasks to tell" in crossing  # only vibe, 2 tasks (and no sizes yet): said so
    print(f"notebooks 01, 02, 04, 05 on scripted-smoke: {took:.1f} s")
