"""The prompt lab reaches the experiment's models (issue 41, item 2): `kit notebooks RESULTS --only
prompt_lab` on an experiment run with `--api-base` sends its lab runs there (its profile, api base and
sandbox), a lab run that errors makes the command exit non-zero with the error shown, and an errored
lab run does not push the next lab run to another name."""

from __future__ import annotations

import pytest

from kit.analysis import load
from kit.app import prompt_lab as lab
from kit.app.cli import main
from kit.records.schema import load_run
from tests.support.fake_providers import FakeAnthropic
from tests.support.fake_server import Responder


def _lab(results, prompt_file, capsys) -> tuple[int, str]:
    code = main(["notebooks", str(results), "--only", "prompt_lab", "--quiet",
                 "--param-file", f"prompt_override={prompt_file}"])  # fmt: skip
    out = capsys.readouterr()
    return code, out.out + out.err


def _runs(root):
    return {d.name: [load_run(r) for r in sorted((d / "runs").iterdir())] for d in sorted(root.iterdir())}


@pytest.mark.slow
def test_the_lab_runs_where_the_experiment_ran_and_says_when_it_could_not(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "any")
    results = tmp_path / "results"
    prompt = tmp_path / "careful.md"
    prompt.write_text("You are a careful engineer. Make the change, run the tests, stop.\n")
    with FakeAnthropic(Responder()) as server:
        argv = ["run", "full", "--profile", "tiered", "--api-base", server.url, "--tasks", "micro-slugify",
                "--strategies", "vibe", "--repeats", "1", "--sandbox", "none", "--results", str(results),
                "--quiet", "--no-report"]  # fmt: skip
        assert main(argv) == 0
        experiment = results / "full"
        assert lab.recorded_setup(experiment) == {
            "profile": "tiered",
            "sandbox": "none",
            "api_base": server.url,
        }
        code, said = _lab(experiment, prompt, capsys)
        assert code == 0, said
        runs = _runs(experiment / "lab")
        assert sorted(runs) == ["lab-vibe-coder-baseline", "lab-vibe-coder-you-are-a-careful-engineer"]
        for name, records in runs.items():
            (record,) = records
            assert record.outcome == "done", (
                name,
                record.error,
            )  # the fake server answered, not the provider
            assert record.sandbox == "none" and record.profile == "tiered"
            assert {t["api_base"] for t in record.profile_spec["tiers"].values()} == {server.url}
        assert load(experiment / "lab" / "lab-vibe-coder-baseline").runs["api_bases"].iloc[0] == server.url
    other = tmp_path / "terse.md"
    other.write_text("Be terse. Change the code, run the tests.\n")
    code, said = _lab(experiment, other, capsys)  # the server is gone: the lab's runs error
    assert code != 0
    said = " ".join(said.split())
    assert "lab run(s) ended in error" in said and "lab-vibe-coder-be-terse-change-the-code" in said
    assert "nothing accepts connections" in said and "rerun later" not in said
    with FakeAnthropic(Responder()) as again:  # a new server, so a new api base: the errored runs are redone
        monkeypatch.setattr(lab, "recorded_setup", lambda like: {"profile": "tiered", "sandbox": "none",
                                                                 "api_base": again.url})  # fmt: skip
        result = lab.prompt_lab("vibe", "coder", other.read_text(), "micro-slugify", like=experiment,
                                results_dir=experiment / "lab", progress=False)  # fmt: skip
    assert result.modified_dir.name == "lab-vibe-coder-be-terse-change-the-code"  # not ...-2
    names = sorted(_runs(experiment / "lab"))  # the baseline's folder holds a done run of the old api base
    assert "lab-vibe-coder-be-terse-change-the-code" in names and not any(
        n.endswith("the-code-2") for n in names
    )
    assert [r.outcome for r in _runs(experiment / "lab")["lab-vibe-coder-be-terse-change-the-code"]] == [
        "done"
    ]
