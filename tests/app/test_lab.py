"""A lab that is safe and legible (issue 32, item 4): a budget per lab run by default, a transcript diff
without timestamps and ids, lab runs named by what changed, the prompt reachable from the lab's file
browser."""

from __future__ import annotations

import json

import pytest

from kit.app import notebooks
from kit.app import prompt_lab as lab
from kit.run.resume import SettingsChanged


def test_every_lab_run_has_a_budget_unless_limits_set_one():
    base, mod = lab.lab_experiments("vibe", "coder", "Be careful.", "micro-slugify", profile="scripted")
    for e in (base, mod):
        assert (e.limits.max_model_calls, e.limits.max_usd) == (40, 0.5)
    _, own = lab.lab_experiments(
        "vibe", "coder", "x", "micro-slugify", limits={"max_model_calls": 5, "max_steps": 3}
    )
    assert (own.limits.max_model_calls, own.limits.max_usd, own.limits.max_steps) == (5, 0.5, 3)
    _, lifted = lab.lab_experiments("vibe", "coder", "x", "micro-slugify", limits={"max_usd": None})
    assert lifted.limits.max_usd is None and lifted.limits.max_model_calls == 40


def test_lab_runs_are_named_by_what_changed_and_never_reuse_other_settings(tmp_path, monkeypatch):
    base, mod = lab.lab_experiments(
        "pdca", "auditor", "You are a STRICT auditor: check all.", "micro-slugify"
    )
    assert (base.name, mod.name) == ("lab-pdca-auditor-baseline", "lab-pdca-auditor-you-are-a-strict-auditor")
    named = lab.lab_experiments("vibe", "coder", "Be terse.", "micro-slugify", label="terse v2")[1]
    assert named.name == "lab-vibe-coder-terse-v2"
    taken = {"lab-vibe-coder-terse-v2", "lab-vibe-coder-terse-v2-2"}  # made under other settings

    def run_experiment(experiment, *, results_dir=None, progress=True, **_):
        if experiment.name in taken:
            raise SettingsChanged("1 finished run(s) ... were made under other settings")
        return tmp_path / experiment.name

    monkeypatch.setattr("kit.run.runner.run_experiment", run_experiment)
    assert lab._run(named, tmp_path, False) == tmp_path / "lab-vibe-coder-terse-v2-3"


def _transcript(folder, lines):
    run = folder / "runs" / "micro-slugify__vibe__p__r1"
    run.mkdir(parents=True)
    with open(run / "transcript.jsonl", "w") as fh:
        for seq, (role, content, calls) in enumerate(lines, 1):
            msg = {"role": role, "content": content, **({"tool_calls": calls} if calls else {})}
            fh.write(json.dumps({"run_id": "x", "seq": seq, "conversation": "coder", "role": "coder",
                                 "message": msg}) + "\n")  # fmt: skip
    return run


def test_the_transcript_diff_shows_what_changed_not_when(tmp_path):
    def lines(stamp, took, call_id, tmp, words):
        return [
            ("system", words, None),
            ("user", f"Event: at {stamp} the plan was made (status.md updated {stamp[11:19]})", None),
            (
                "assistant",
                "",
                [{"id": call_id, "function": {"name": "run", "arguments": f'{{"command": "ls {tmp}"}}'}}],
            ),
            ("tool", f"2 passed in {took}\nexit code: 0\nsession {call_id}", None),
            ("assistant", "Done.", None),
        ]

    a = _transcript(
        tmp_path / "a", lines("2026-12-03T10:11:12.345Z", "2.74s", "toolu_01AbCdEf", "/tmp/x1y2", "Be brief.")
    )
    b = _transcript(
        tmp_path / "b",
        lines("2026-12-03T11:59:01.002Z", "1.78s", "toolu_09ZzYyXx", "/tmp/q9r8", "Be careful."),
    )
    raw = lab.render_transcript(a, volatile=True)
    assert any("2026-12-03T10:11:12.345Z" in line for line in raw)
    stable = lab.render_transcript(a)
    assert any("at <time> the plan was made (status.md updated <time>)" in line for line in stable)
    import difflib

    diff = [
        line
        for line in difflib.unified_diff(lab.render_transcript(a), lab.render_transcript(b), lineterm="")
        if line[:1] in "+-" and not line.startswith(("---", "+++"))
    ]
    assert diff == ["-Be brief.", "+Be careful."]  # the only change left is the prompt's


def test_the_prompt_is_a_file_the_labs_browser_reaches(tmp_path, monkeypatch):
    workspace = notebooks.lab_workspace(tmp_path / "results")
    copy = workspace / "prompts" / "vibe" / "coder.md"
    assert copy.read_text() == (lab.PROMPTS_DIR / "vibe" / "coder.md").read_text()
    assert (workspace / "prompts" / "pdca" / "auditor.md").is_file()
    copy.write_text("My edited coder prompt.\n")
    notebooks.lab_workspace(tmp_path / "results")  # a second start keeps the user's edit
    assert copy.read_text() == "My edited coder prompt.\n"
    monkeypatch.chdir(workspace)  # JupyterLab runs the notebook in its own folder
    assert lab.override_text(None, "prompts/vibe/coder.md") == "My edited coder prompt.\n"
    assert lab.resolve_prompt_file("prompts/vibe/coder.md") == copy.resolve()
    with pytest.raises(Exception, match="cannot read it"):
        lab.override_text(None, "prompts/vibe/nope.md")
