"""`kit compare A B`, the prompt lab's parameters, its runs as separate experiments, `kit lab`'s working
copy and `kit notebooks`' defaults and output names: the fast checks (no notebook is executed)."""

from __future__ import annotations

import argparse
import re
import sys
import types

import nbformat
import pytest
import yaml

from kit.analysis.report import report_text
from kit.app import notebooks
from kit.app import prompt_lab as lab
from kit.app.cli import main
from kit.paths import NOTEBOOKS_DIR
from tests.support.records import write_experiment

HEADING_PROMPT = "# Reviewer\n\nRole: reviewer\nlimits: {a: 1}\n- check the tests\n"


def two_folders(tmp_path):
    a = write_experiment(tmp_path, name="before", incomplete=False)
    b = write_experiment(tmp_path, name="after", strategies=("vibe",), repeats=1, incomplete=False)
    (a / "experiment.yaml").write_text(yaml.safe_dump({"name": "before", "profile": "scripted"}))
    (b / "experiment.yaml").write_text(
        yaml.safe_dump(
            {"name": "after", "profile": "scripted", "prompt_overrides": {"vibe/coder": HEADING_PROMPT}}
        )
    )
    return a, b


def test_compare_prints_each_strategy_and_task_with_changes_and_the_prompt_diff(tmp_path, capsys):
    a, b = two_folders(tmp_path)
    assert main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    table = out.split("Per strategy × task")[1].split("Paired B − A")[0]
    for metric in ("outcome", "stop_reason", "solved", "failed_share", "calls", "tokens", "cache_read_share"):
        assert metric in table
    vibe = table.split("vibe ")[1]
    # fixture: vibe repeat 0 fails 3 of 6 requirements, repeat 1 fails 2: 42 % before, 50 % after
    assert "42%" in vibe and "50%" in vibe and "+8 pts" in vibe
    assert "$0.0188" in vibe and "$0.0183" in vibe and "-$0.0004" in vibe
    assert "pdca" not in table  # pdca ran only in A: one line, not a table of dashes
    assert "only A ran: pdca × micro-slugify (2 runs) (not compared)" in out
    diff = out.split("Prompt diff")[1]
    assert "prompt_overrides" in diff and "+# Reviewer" in diff and "+Role: reviewer" in diff
    assert "-You are a software engineer" in diff  # A had no override: its kit/prompts/ file


def test_compare_prefers_the_prompts_the_runs_kept(tmp_path):
    a, b = two_folders(tmp_path)
    for folder, text in ((a, "old words\n"), (b, "new words\n")):
        kept = folder / "runs" / "micro-slugify__vibe__r0" / "prompts" / "vibe" / "coder.md"
        kept.parent.mkdir(parents=True)
        kept.write_text(text)
    from kit.analysis import compare

    diff = compare.prompt_diff(a, b)
    assert "prompts kept by the runs" in diff and "-old words" in diff and "+new words" in diff


def test_compare_names_a_missing_folder(tmp_path, capsys):
    assert main(["compare", str(tmp_path / "nope"), str(tmp_path)]) == 2
    assert "no results folder" in capsys.readouterr().err


def test_two_lab_runs_are_two_rows_in_the_report(tmp_path):
    root = tmp_path / "lab"
    write_experiment(
        root, name="lab-vibe-coder-baseline-1", strategies=("vibe",), repeats=1, incomplete=False
    )
    write_experiment(
        root, name="lab-vibe-coder-modified-2", strategies=("vibe",), repeats=1, incomplete=False
    )
    text = report_text(root)
    per_strategy = text.split("Per strategy (")[1].split("Per role")[0]
    assert "lab-vibe-coder-baseline-1" in per_strategy and "lab-vibe-coder-modified-2" in per_strategy
    outcome_rows = [
        line
        for line in text.split("Runs by outcome")[1].split("\n\n")[0].splitlines()
        if line.startswith("lab-")
    ]
    assert len(outcome_rows) == 2


def test_string_parameters_stay_strings(tmp_path, monkeypatch):
    seen = {}
    monkeypatch.setattr(
        notebooks, "execute_all", lambda results, params, only, progress: seen.update(params) or []
    )
    prompt = tmp_path / "prompt.md"
    prompt.write_text(HEADING_PROMPT)
    parser = argparse.ArgumentParser()
    notebooks.add_cli(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        [
            "notebooks",
            "results/x",
            "--only",
            "prompt_lab",
            "--param",
            f"prompt_override={HEADING_PROMPT}",
            "--param",
            "task=123",
            "--param",
            "limits={max_steps: 4}",
            "--param-file",
            f"role={prompt}",
        ]
    )
    args.func(args)
    assert seen["prompt_override"] == HEADING_PROMPT  # not YAML: the heading and `Role:` stay text
    assert seen["task"] == "123" and seen["role"] == HEADING_PROMPT
    assert seen["limits"] == {"max_steps": 4}  # a dict parameter is still read as YAML


def test_param_file_that_cannot_be_read_is_one_clear_error(tmp_path):
    with pytest.raises(notebooks.KitError, match="--param-file prompt_override: cannot read"):
        notebooks.read_param_file(f"prompt_override={tmp_path / 'missing.md'}")


def test_prompt_lab_reads_the_prompt_from_a_file(tmp_path, monkeypatch):
    seen = []

    def run_experiment(experiment, *, results_dir=None, progress=True, overrides=None, **_):
        seen.append(experiment)
        folder = write_experiment(
            results_dir, name=experiment.name, strategies=("vibe",), repeats=1, incomplete=False
        )
        (folder / "experiment.yaml").write_text(yaml.safe_dump(experiment.model_dump(mode="json")))
        return folder

    monkeypatch.setitem(sys.modules, "kit.run.runner", types.SimpleNamespace(run_experiment=run_experiment))
    prompt = tmp_path / "p.md"
    prompt.write_text(HEADING_PROMPT)
    result = lab.prompt_lab(
        "vibe",
        "coder",
        "",
        "micro-slugify",
        profile="scripted",
        results_dir=tmp_path / "r",
        prompt_file=prompt,
    )
    assert seen[1].prompt_overrides == {"vibe/coder": HEADING_PROMPT}
    assert result.baseline_dir != result.modified_dir  # two experiments, two folders
    assert "+# Reviewer" in result.prompt_diff
    assert list(result.comparison.columns) == ["A", "B", "change"]
    assert "prompt_file" in notebooks.declared_parameters("prompt_lab")


def test_kit_lab_opens_a_working_copy_with_the_results_reachable(tmp_path):
    folder = notebooks.lab_workspace(tmp_path)
    assert folder == tmp_path / "lab-notebooks"
    assert sorted(p.name for p in folder.glob("*.ipynb")) == sorted(notebooks.NOTEBOOKS.values())
    edited = folder / "01_benchmark.ipynb"
    nb = nbformat.read(edited, as_version=4)
    nb.cells[0].source += "\n\nmy note"
    nbformat.write(nb, edited)
    notebooks.lab_workspace(tmp_path)  # again: the user's edit is kept, the tracked notebook untouched
    assert (
        "my note" in edited.read_text()
        and "my note" not in (NOTEBOOKS_DIR / "01_benchmark.ipynb").read_text()
    )
    cmd = notebooks.jupyter_lab_command(
        uid=1000, environ={"DISPLAY": ":0"}, platform="linux", workspace=folder
    )
    assert f"--ServerApp.root_dir={tmp_path}" in cmd and "--LabApp.default_url=/lab/tree/lab-notebooks" in cmd
    assert str(NOTEBOOKS_DIR) not in " ".join(cmd)


def test_notebooks_default_to_the_analyses_and_name_outputs_by_their_parameters(tmp_path):
    assert notebooks.select(None) == ["benchmark", "tier_economics", "verdict", "crossover"]
    assert notebooks.select("prompt_lab") == ["prompt_lab"]
    out = notebooks.output_path("tier_economics", tmp_path, {"reassign": {"executor": "medium"}})
    assert out == tmp_path / "notebooks" / "02_tier_economics-reassign-executor-medium.ipynb"
    assert notebooks.output_path("benchmark", tmp_path, {"results_dir": "x"}).name == "01_benchmark.ipynb"
    long = notebooks.output_path("prompt_lab", tmp_path, {"prompt_override": HEADING_PROMPT * 5})
    other = notebooks.output_path("prompt_lab", tmp_path, {"prompt_override": HEADING_PROMPT * 6})
    assert long != other and len(long.name) < 100
    figures = notebooks.default_parameters("tier_economics", tmp_path, {"price_sheet": "anthropic"})
    assert figures["figures_dir"].endswith("figures/02_tier_economics-price_sheet-anthropic")


def test_prompt_lab_runs_on_the_profile_the_experiment_used(tmp_path):
    (tmp_path / "experiment.yaml").write_text(yaml.safe_dump({"name": "x", "profile": "tiered"}))
    assert notebooks.default_parameters("prompt_lab", tmp_path) == {
        "results_dir": str(tmp_path / "lab"),
        "like": str(tmp_path),  # the lab reads the experiment's profile, api base and sandbox from it
    }
    from kit.app.prompt_lab import recorded_setup

    assert recorded_setup(tmp_path)["profile"] == "tiered"


def _keep_prompts(folder, strategies, text):
    for run in folder.glob("runs/*"):
        for strategy in strategies:
            if f"__{strategy}__" not in run.name:
                continue
            for role in ("coder", "orchestrator", "auditor") if strategy == "pdca" else ("coder",):
                kept = run / "prompts" / strategy / f"{role}.md"
                kept.parent.mkdir(parents=True, exist_ok=True)
                kept.write_text(f"{strategy} {role}: {text}\n")


def test_compare_shows_what_both_ran_the_change_first_and_filters(tmp_path, capsys):
    """issue 32, item 3: B ran one strategy; the comparison is about it, its change on top."""
    a, b = two_folders(tmp_path)
    _keep_prompts(a, ("vibe", "pdca"), "old words")
    _keep_prompts(b, ("vibe",), "new words")
    assert main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert out.index("What changed") < out.index("Per strategy × task")
    changed = out.split("What changed")[1].split("Per strategy × task")[0]
    rows = [
        line for line in changed.splitlines()[1:] if line.strip() and not re.match(r"  \w+: settings", line)
    ]
    assert rows[0].split()[:3] == ["A", "B", "change"]
    assert "failed_share" in rows[2] and rows[2].split()[3:7] == ["42%", "50%", "+8", "pts"]  # quality first
    assert "cost_usd" in changed and "runs" in changed  # 2 runs in A, 1 in B
    assert "outcome" not in changed  # done in both: unchanged, not listed
    diff = out.split("Prompt diff")[1]
    assert "strategies both ran: vibe" in diff and "pdca/" not in diff  # never "every other prompt deleted"
    assert "-vibe coder: old words" in diff and "+vibe coder: new words" in diff
    assert main(["compare", str(a), str(b), "--strategies", "pdca"]) == 0
    only = capsys.readouterr().out
    assert "only A ran: pdca × micro-slugify" in only and "no strategy × task both sides ran" in only
    assert "no prompts to compare" in only and "the prompts are the same" not in only  # nothing compared
    assert main(["compare", str(a), str(b), "--tasks", "micro-slugify", "--strategies", "vibe"]) == 0
    assert "compared: strategies vibe; tasks micro-slugify" in capsys.readouterr().out
    assert main(["compare", str(a), str(b), "--strategies", "harness"]) == 2
    assert "neither side ran harness" in capsys.readouterr().err
    assert main(["compare", str(a), str(b), "--every-pair"]) == 0
    assert "pdca " in capsys.readouterr().out.split("Per strategy × task")[1]


def test_compare_pairs_each_strategy_by_cluster_and_shows_reliability(tmp_path, capsys):
    a, b = two_folders(tmp_path)
    assert main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    paired = out.split("Paired B − A per strategy")[1].split("Reliability over repeats")[0]
    # vibe ran repeat 0 on both sides: one pair, one task, no project -> clustered by task
    assert (
        "vibe: +0 pts solved" in paired
        and "1 paired runs in 1 cluster (resampled by task, then repeat" in paired
    )
    reliability = out.split("Reliability over repeats per strategy")[1].split("Prompt diff")[0]
    assert "A: vibe" in reliability and "B: vibe" in reliability and "pdca" not in reliability  # A only
    assert "pass^2" in reliability and "flip_rate" in reliability


def _set_run(folder, run_id, settings, extra_cost=0.0):
    """Give one fixture run its settings (run.json) and, optionally, more cost."""
    import json

    path = folder / "runs" / run_id / "run.json"
    data = json.loads(path.read_text())
    data["settings"] = settings
    data["totals"]["cost_usd"] += extra_cost
    path.write_text(json.dumps(data))


def test_compare_marks_identical_settings_as_noise_gives_intervals_and_puts_what_changed_first(
    tmp_path, capsys
):
    """Issue 41, item 4: only vibe's prompt changed; pdca's (larger) cost difference is noise and must
    say so, after vibe's; each difference has an interval."""
    a = write_experiment(tmp_path, name="before", incomplete=False)
    b = write_experiment(tmp_path, name="after", incomplete=False)
    for folder, prompt in ((a, "aaa"), (b, "bbb")):
        for r in range(2):
            _set_run(
                folder,
                f"micro-slugify__vibe__r{r}",
                {"strategy": "vibe", "prompts": {"coder.md": prompt}},
                0.001 * (folder == b),
            )
            _set_run(folder, f"micro-slugify__pdca__r{r}", {"strategy": "pdca", "prompts": {"x.md": "same"}},
                     (0.05 + 0.01 * r) * (folder == b))  # fmt: skip
    assert main(["compare", str(a), str(b)]) == 0
    changed = capsys.readouterr().out.split("What changed")[1].split("Per strategy × task")[0]
    assert "  vibe: settings changed (prompts)" in changed
    assert "  pdca: settings identical: differences are run-to-run noise" in changed
    rows = [line for line in changed.splitlines() if "cost_usd" in line]
    assert rows[0].startswith("vibe") and rows[1].startswith("pdca"), rows  # what changed first
    assert "run-to-run noise" in rows[1] and "changed: prompts" in rows[0]
    assert "95% interval" in changed and re.search(r"\[[-+]\$0\.\d{4}, \+\$0\.\d{4}\]", rows[1]), rows
