"""A run is its settings (``kit.run.fingerprint``, ``kit.run.resume``): a finished run made under other
settings -- a prompt, an option, the tier map -- is refused on resume (exit 2, saying what changed and
how to go on), ``--redo-changed`` redoes exactly those runs, and the folder's experiment.yaml never
claims settings its runs did not use."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kit.app.cli import main
from kit.run.runner import run_experiment
from tests.support.helpers import copy_tree, experiment, run_json, write_profile

VIBE = "micro-slugify__vibe__scripted-test__r1"
HARNESS = "micro-slugify__harness__scripted-test__r1"


def write(folder: Path, **kw) -> Path:
    """The experiment file ``fp.yaml`` (vibe and harness on the scripted oracle), ``kw`` over it."""
    profile = folder / "profiles" / "scripted-test.yaml"
    if not profile.exists():
        write_profile(folder, "scripted/oracle", "native")
    exp = experiment("fp", profile, ["micro-slugify"], ["vibe", "harness"], **kw)
    path = folder / "fp.yaml"
    path.write_text(yaml.safe_dump(exp.model_dump(mode="json")))
    return path


@pytest.fixture(scope="module")
def done(tmp_path_factory) -> Path:
    """One finished experiment (2 runs), copied by each test."""
    folder = tmp_path_factory.mktemp("fp")
    run_experiment(write(folder), results_dir=folder / "results", progress=False)
    return folder


@pytest.fixture
def setup(done, tmp_path) -> tuple[Path, Path]:
    copy_tree(done, tmp_path / "w")
    return tmp_path / "w", tmp_path / "w" / "results" / "fp"


def snapshot(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def kit_run(folder: Path, *extra: str) -> int:
    return main(
        [
            "run",
            str(folder / "fp.yaml"),
            "--results",
            str(folder / "results"),
            "--quiet",
            "--no-report",
            *extra,
        ]
    )


def test_a_run_records_its_settings_its_fingerprint_and_its_prompts(setup):
    _, out = setup
    run = run_json(out / "runs" / VIBE)
    assert run["fingerprint"] and run["settings"]["strategy"] == "vibe"
    assert set(run["settings"]) >= {
        "task",
        "prompts",
        "options",
        "tiers",
        "models",
        "limits",
        "sandbox",
        "kit_version",
    }
    kept = out / "runs" / VIBE / "prompts" / "vibe" / "coder.md"
    assert kept.read_text() == (Path("kit/prompts/vibe/coder.md")).read_text()
    assert run["settings"]["prompts"]["coder.md"]
    # the agent loop's own messages (kit/prompts/agent/) shape every run too: kept and hashed
    assert (out / "runs" / VIBE / "prompts" / "agent" / "observation.md").is_file()
    assert run["settings"]["prompts"]["agent/observation.md"]


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"prompt_overrides": {"vibe/coder": "Be brief."}}, "prompt coder.md changed"),
        (
            {"prompt_overrides": {"agent/observation": "Seen:\n$output"}},
            "prompt agent/observation.md changed",
        ),
        ({"strategy_options": {"vibe": {"max_steps": 7}}}, "options.max_steps: (unset) -> 7"),
        ({"tiers": {"vibe": {"coder": "medium"}}}, "tiers.coder: cheap -> medium"),
    ],
    ids=["prompt", "agent-message", "option", "tier-map"],
)
def test_changed_settings_are_refused_on_resume_and_nothing_is_written(setup, capsys, change, says):
    folder, out = setup
    before = snapshot(out)
    write(folder, **change)
    assert kit_run(folder) == 2
    err = capsys.readouterr().err
    assert f"{VIBE}: " in err and says in err
    if "agent/" in says:  # the agent loop's own messages: every strategy's runs changed
        assert f"{HARNESS}: {says}" in err
    else:
        assert HARNESS not in err  # its settings did not change
    assert "--redo-changed" in err and "fresh experiment name" in err
    assert snapshot(out) == before  # no run redone, experiment.yaml not rewritten


def test_redo_changed_redoes_exactly_the_changed_runs(setup, capsys):
    folder, out = setup
    old_vibe, old_harness = run_json(out / "runs" / VIBE), run_json(out / "runs" / HARNESS)
    write(folder, prompt_overrides={"vibe/coder": "Be brief."})
    (out / "journals").mkdir(exist_ok=True)
    for run_id in (VIBE, HARNESS):  # a workflow journal would replay calls made under the old settings
        (out / "journals" / f"{run_id}.jsonl").write_text('{"key": "k"}\n')
    assert kit_run(folder, "--redo-changed") == 0
    assert (
        not (out / "journals" / f"{VIBE}.jsonl").exists() and (out / "journals" / f"{HARNESS}.jsonl").exists()
    )
    new_vibe, new_harness = run_json(out / "runs" / VIBE), run_json(out / "runs" / HARNESS)
    assert new_harness == old_harness  # kept as it was
    assert (
        new_vibe["started_at"] != old_vibe["started_at"]
        and new_vibe["fingerprint"] != old_vibe["fingerprint"]
    )
    assert (out / "runs" / VIBE / "prompts" / "vibe" / "coder.md").read_text() == "Be brief."
    copy = yaml.safe_load((out / "experiment.yaml").read_text())
    assert copy["prompt_overrides"] == {"vibe/coder": "Be brief."}  # the settings its runs used
    assert kit_run(folder) == 0  # now everything matches: nothing to redo
    assert run_json(out / "runs" / VIBE) == new_vibe


def test_a_record_without_a_fingerprint_counts_as_changed(setup, capsys):
    from kit.run.resume import OLD_RECORD

    folder, out = setup
    path = out / "runs" / VIBE / "run.json"
    record = json.loads(path.read_text())
    del record["settings"], record["fingerprint"]
    path.write_text(json.dumps(record))
    assert kit_run(folder) == 2
    assert OLD_RECORD in capsys.readouterr().err


def test_runs_outside_the_matrix_under_other_settings_cannot_be_kept(setup, capsys):
    folder, out = setup
    write(folder, prompt_overrides={"vibe/coder": "Be brief."})
    assert main(["run", str(folder / "fp.yaml"), "--results", str(folder / "results"), "--strategies", "harness",
                 "--quiet", "--no-report", "--redo-changed"]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert f"{VIBE} (not in this experiment's matrix): prompt coder.md changed" in err
    assert "fresh experiment name" in err


def test_dry_run_says_what_would_be_kept_redone_and_run_and_writes_nothing(setup, capsys):
    folder, out = setup
    before = snapshot(folder / "results")
    write(folder, strategy_options={"vibe": {"max_steps": 7}}, repeats=2)
    assert kit_run(folder, "--dry-run") == 0
    text = capsys.readouterr().out
    assert "1 task(s) x 2 strategies x 2 repeat(s) = 4 runs" in text
    assert "keep 1, redo 0 changed, run 2" in text  # harness r1 kept; vibe r2 and harness r2 new
    assert f"{VIBE}: options.max_steps: (unset) -> 7" in text and "kit run would refuse (exit 2)" in text
    assert kit_run(folder, "--dry-run", "--redo-changed") == 0
    assert "keep 1, redo 1 changed, run 2" in capsys.readouterr().out
    assert snapshot(folder / "results") == before  # no file written, none changed, no lock
