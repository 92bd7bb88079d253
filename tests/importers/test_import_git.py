"""``kit tasks import-git`` end to end, on small repositories the tests build with git
(tests/support/gitrepos.py): a fix commit whose test the commit changed, a commit whose new test
imports a name the base lacks, a release range, runaway tests at the base, library code taking
frames at the base; the errors a user can meet; and that nothing of the answer reaches the agent.

Every check of an import goes through the kit's scorer and sandbox, as ``kit tasks validate`` does.
"""

from __future__ import annotations

import argparse
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from kit.app.cli import main
from kit.errors import TaskError
from kit.importers.git.importer import Options, import_git
from kit.importers.validate import validate_task
from kit.tasks.requirements import read_requirements
from kit.tasks.task import load_task
from tests.support.gitrepos import (
    CALC_COMMITS,
    FRAMES_COMMITS,
    LOOPS_COMMITS,
    MUL_FIXED,
    TINY_COMMITS,
    make_repo,
)
from tests.tasks.taskmaker import make_task

MARKER = "fixed-by-the-reference-change"  # the solution's changed line (tests/support/gitrepos.py)


@pytest.fixture(scope="module")
def calc(tmp_path_factory):
    """The calc repository (5 commits) and the task imported from its fix commit."""
    root = tmp_path_factory.mktemp("calc")
    shas = make_repo(root / "calc", CALC_COMMITS)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ORCHBENCH_RESULTS_DIR", str(root / "results"))
        fix = import_git(Options(repo=root / "calc", commit=shas[1], out=root / "tasks", timeout_s=60))
    return {"root": root, "shas": shas, "fix": fix}


def _spec(task_dir: Path) -> dict:
    return yaml.safe_load((task_dir / "task.yaml").read_text())


@pytest.mark.slow
def test_a_fix_commit_whose_test_the_commit_changed(calc):
    r, shas = calc["fix"], calc["shas"]
    assert r.ok, (r.problems, r.notes)
    key = "tests/test_ops.py::test_mul_small"
    assert r.hidden == {key: "major"} and r.kinds == {key: "wrong"}
    assert r.dropped["tests/test_ops.py::test_mul_on_gpu"].startswith("skips")  # a new skipped test
    task = load_task(r.task_dir)
    assert task.acceptance_layout == "repo" and task.packages == ["calc"]
    assert key in task.own_tests_deselect  # its base version would fail with the reference solution
    assert "tests/test_ops.py::test_platform_only" not in task.own_tests_deselect  # a skip is neutral
    assert not (task.repo_dir / ".git").exists()
    assert (task.repo_dir / "calc" / "ops.py").read_text().endswith("return a * b + 1\n")  # the base
    assert sorted(
        p.relative_to(task.solution_dir).as_posix() for p in task.solution_dir.rglob("*") if p.is_file()
    ) == ["calc/ops.py"]
    laid = sorted(
        p.relative_to(task.acceptance_dir).as_posix() for p in task.acceptance_dir.rglob("*") if p.is_file()
    )
    assert laid == ["tests/__init__.py", "tests/conftest.py", "tests/data/cases.json", "tests/test_ops.py"]
    reqs, problems = read_requirements(task.acceptance_dir)
    assert problems == [] and [(q.key, q.severity) for q in reqs] == [(key, "major")]
    src = task.source
    assert (src.base, src.head, src.commits) == (shas[0], shas[1], [shas[1]])
    assert src.base_date == "2024-03-01T12:00:00+00:00" and src.head_date == "2024-03-02T12:00:00+00:00"
    assert src.licence == "LICENSE" and src.kind == "git"
    assert task.prompt.startswith("Fix mul: it added one to the product")
    assert "`mul(a, b)` in `calc.ops` (changed)" in task.prompt
    assert "for a, b, product" not in task.prompt and "cases" not in task.prompt  # no test body
    assert validate_task(task).ok


@pytest.mark.slow
def test_a_new_test_importing_a_name_the_base_lacks_fails_only_where_it_is_used(calc, tmp_path):
    """tests/test_div.py imports ``div`` at module level; at the base only the tests that use it fail."""
    mapping = tmp_path / "sev.yaml"
    mapping.write_text("rules:\n  - test: 'DivTest::test_div$'\n    severity: critical\ndefault: null\n")
    r = import_git(
        Options(
            repo=calc["root"] / "calc", commit=calc["shas"][2], out=tmp_path, timeout_s=60, severities=mapping
        )
    )
    assert r.ok, (r.problems, r.notes)
    assert r.hidden == {
        "tests/test_div.py::DivTest::test_div": "critical",  # the mapping file's rule
        "tests/test_div.py::DivTest::test_div_by_zero": "minor",  # error-path checks only
    }
    assert r.kinds["tests/test_div.py::DivTest::test_div"] == "missing"
    assert r.dropped == {"tests/test_div.py::DivTest::test_add_still_works": "passes at the base already"}
    text = (r.task_dir / "acceptance" / "tests" / "test_div.py").read_text()
    assert "test_add_still_works" not in text and "class DivTest(unittest.TestCase)" in text


@pytest.mark.slow
def test_a_release_range_of_several_commits(calc, tmp_path):
    shas = calc["shas"]
    prompt = tmp_path / "prompt.md"
    prompt.write_text("Bring calc to its next release: fix mul, add div.\n")
    r = import_git(
        Options(
            repo=calc["root"] / "calc",
            range=f"{shas[0]}..{shas[3]}",
            task_id="calc-release",
            out=tmp_path / "tasks",
            prompt_file=prompt,
            timeout_s=60,
            repo_url="https://example.org/ann/calc",
        )
    )
    assert r.ok, (r.problems, r.notes)
    assert r.commits == 3 and r.solution_files == 3
    assert set(r.hidden) == {
        "tests/test_ops.py::test_mul_small",
        "tests/test_div.py::DivTest::test_div",
        "tests/test_div.py::DivTest::test_div_by_zero",
    }
    spec = _spec(r.task_dir)
    assert spec["prompt"] == "Bring calc to its next release: fix mul, add div.\n"
    assert (
        spec["source"]["commits"] == shas[1:4]
        and spec["source"]["repo_url"] == "https://example.org/ann/calc"
    )
    assert spec["tags"] == ["git-history", "range"] and spec["long"] is False
    assert (r.task_dir / "solution" / "calc" / "ops.py").read_text().startswith(MUL_FIXED)


@pytest.mark.slow
def test_runaway_tests_at_the_base_are_checked_one_by_one(tmp_path):
    """At the base, one new test loops forever and one allocates past the memory limit; each test
    file is checked on its own under a time limit, then each test alone."""
    make_repo(tmp_path / "loops", LOOPS_COMMITS)
    lines: list[str] = []
    r = import_git(
        Options(repo=tmp_path / "loops", commit="HEAD", out=tmp_path / "t", timeout_s=10), lines.append
    )
    assert r.ok, (r.problems, r.notes)
    # the runaway test is cut by its own time limit inside the session (limits.test_timeout_s), or the
    # session runs past its limit and its tests are checked one by one: either way each is judged alone
    assert any("checking its 3 tests one by one" in line for line in lines) or r.hidden, lines
    assert r.hidden["tests/test_loops.py::test_pad_to_a_wide_width"] == "critical"
    assert r.kinds["tests/test_loops.py::test_pad_to_a_wide_width"] == "memory"
    assert r.dropped["tests/test_loops.py::test_collatz_one"] == "passes at the base already"
    loop = "tests/test_loops.py::test_collatz_zero_is_refused"
    if loop in r.hidden:  # scoring with a per-test time limit keeps it: a hang is critical
        assert r.hidden[loop] == "critical" and r.kinds[loop] == "hang"
    else:  # scoring without one would stop every unsolved run's whole session
        assert r.dropped[loop].startswith("runs past the time limit at the base")


@pytest.mark.slow
def test_library_code_taking_frames_at_the_base_does_not_make_the_task_suspicious(tmp_path):
    make_repo(tmp_path / "frames", FRAMES_COMMITS)
    r = import_git(Options(repo=tmp_path / "frames", commit="HEAD", out=tmp_path / "t", timeout_s=60))
    assert r.ok, r.problems
    assert r.hidden == {"tests/test_frames.py::test_shout": "major"}


# --------------------------------------------------------------------------- what a user meets


def _cli(capsys, *argv: str) -> tuple[int, str]:
    code = main(["tasks", "import-git", *argv])
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.mark.slow
def test_each_bad_input_gets_one_clear_error(calc, tmp_path, capsys):
    repo, shas = str(calc["root"] / "calc"), calc["shas"]
    out = ["--out", str(tmp_path / "out")]
    taken = tmp_path / "mine" / "calc-x"
    taken.mkdir(parents=True)
    cases = [
        ((str(tmp_path), "--commit", "HEAD", *out), "is not a git repository"),
        ((repo, "--commit", "0123abc", *out), "unknown commit '0123abc'"),
        ((repo, "--commit", shas[0], *out), "root commit"),
        ((repo, "--range", shas[2], *out), "is not BASE..HEAD"),
        ((repo, "--range", f"{shas[2]}..{shas[3]}", *out), "adds or changes no test module"),
        ((repo, "--commit", shas[4], *out), "no test goes fail -> pass"),
        ((repo, "--commit", shas[1], "--id", "a/b", *out), "cannot name a folder"),
        (
            (repo, "--commit", shas[1], "--prompt-file", str(tmp_path / "none.md"), *out),
            "prompt file not found",
        ),
        (
            (repo, "--commit", shas[1], "--out", str(taken.parent), "--id", taken.name),
            "already exists",
        ),
    ]
    for argv, message in cases:
        code, text = _cli(capsys, *argv)
        assert code != 0 and message in text, (argv, text)
        assert "Traceback" not in text
    assert (
        "tests/test_more.py::test_add_zero: passes at the base already"
        in _cli(capsys, repo, "--commit", shas[4], *out)[1]
    )
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())  # nothing half-written
    assert list(taken.parent.iterdir()) == [taken] and not list(taken.iterdir())


def test_a_package_the_kit_environment_already_imports_is_refused(tmp_path):
    make_repo(
        tmp_path / "yamlish",
        [
            (
                "start",
                {
                    "yaml/__init__.py": "def load(s):\n    return s\n",
                    "tests/test_y.py": "def test_a():\n    pass\n",
                },
            ),
            (
                "more",
                {"tests/test_y.py": "from yaml import load\n\n\ndef test_a():\n    assert load(1) == 2\n"},
            ),
        ],
    )
    with pytest.raises(TaskError, match="importable from the kit's own environment"):
        import_git(Options(repo=tmp_path / "yamlish", commit="HEAD", out=tmp_path / "t"))
    assert [p.name for p in (tmp_path / "t").iterdir()] == []


def test_a_configuration_asking_for_a_plugin_option_is_refused_saying_so(tmp_path, capsys):
    """parse's ``.pytest.ini`` has ``addopts = --cov=parse ...``: with plugin autoload off pytest stops
    on a usage error before any test. The import said a canary was missing from the report, then
    "pick a commit whose tests fail before it and pass after it"; it names pytest's error now."""
    commits = [
        (m, {**files, ".pytest.ini": "[pytest]\naddopts = --cov=tiny --cov-branch\n"})
        for m, files in TINY_COMMITS
    ]
    make_repo(tmp_path / "covered", commits)
    code, text = _cli(capsys, str(tmp_path / "covered"), "--commit", "HEAD", "--out", str(tmp_path / "t"))
    assert code != 0 and "Traceback" not in text
    assert "usage error" in text and "unrecognized arguments: --cov=tiny --cov-branch" in text, text
    assert "inifile: .pytest.ini" in text and "PYTEST_DISABLE_PLUGIN_AUTOLOAD" in text
    assert "canary" not in text and "one by one" not in text
    assert not (tmp_path / "t").exists() or not list((tmp_path / "t").iterdir())


def test_a_test_dependency_the_kit_lacks_is_named_with_what_to_do(tmp_path, capsys):
    """A new test imports a test dependency (humanize's tests import freezegun) the kit's environment
    does not hold: the import said to pick a commit whose tests fail before and pass after."""
    head = dict(TINY_COMMITS[1][1])
    head["tests/test_tiny.py"] = "import orchbench_absent_testdep\n" + head["tests/test_tiny.py"]
    make_repo(tmp_path / "deps", [TINY_COMMITS[0], ("area multiplies", head)])
    code, text = _cli(capsys, str(tmp_path / "deps"), "--commit", "HEAD", "--out", str(tmp_path / "t"))
    assert code != 0 and "No module named 'orchbench_absent_testdep'" in text, text
    assert "the tests import orchbench_absent_testdep, which the kit's environment lacks" in text
    assert ".venv/bin/pip install" in text and "pick a commit" not in text


def test_validate_names_a_usage_error_of_the_task_configuration(tmp_path):
    """The same configuration in a task folder: validate said a canary was missing and "exit code 4:
    rootdir: /tmp/..."; it says pytest refused to start, in pytest's words, first."""
    config = "[pytest]\naddopts = --cov=calc\n"
    task = make_task(
        tmp_path / "covered",
        {
            ".pytest.ini": config,
            "calc.py": "def area(w, h):\n    return w + h\n",
            "tests/test_own.py": OWN_OK,
        },
        {".pytest.ini": config, "tests/test_area.py": HIDDEN_AREA},
        {"calc.py": "def area(w, h):\n    return w * h\n"},
        acceptance_layout="repo",
    )
    report = validate_task(task)
    assert not report.ok
    refused = [p for p in report.problems if p.startswith("pytest refused to start")]
    assert refused == report.problems[:2], report.problems
    assert all("unrecognized arguments: --cov=calc; inifile: .pytest.ini" in p for p in refused), refused
    assert "the hidden tests" in refused[0] and "the own tests" in refused[1]


OWN_OK = "import calc\n\n\ndef test_imports():\n    assert calc.area\n"
HIDDEN_AREA = (
    "import pytest\n\nimport calc\n\n\n@pytest.mark.severity('major')\ndef test_area():\n"
    "    assert calc.area(2, 3) == 6\n"
)


# --------------------------------------------------------------------------- nothing of the answer reaches the agent


@pytest.mark.slow
def test_nothing_of_the_answer_reaches_the_agent(tmp_path):
    """In a run of the imported task the clone has one commit and no object of a later one, and the
    solution's changed line is in no file the agent's sandbox shows that the kit wrote (every file
    written since the import began, anywhere: the clone, its .git, /tmp, HOME ...), nor in the prompt."""
    from kit.model import scripted
    from kit.run.runner import run_experiment
    from tests.support.helpers import experiment, run_json, write_profile

    since = int(time.time()) - 1
    shas = make_repo(tmp_path / "tiny", TINY_COMMITS)
    r = import_git(Options(repo=tmp_path / "tiny", commit=shas[1], out=tmp_path / "tasks", timeout_s=60))
    assert r.ok, r.problems
    task = load_task(r.task_dir)
    assert task.packages == ["tiny"]  # found under src/: scoring imports it from there
    head_blob = _hash(task.solution_dir / "src" / "tiny" / "__init__.py")
    commands = [
        "git rev-list --all | wc -l",
        f"for o in {head_blob} {shas[1]} {shas[0]}; do git cat-file -e $o 2>/dev/null && echo PRESENT $o || echo absent; done",
        "git count-objects -v | grep -E '^(count|in-pack):'",
        "find / \\( -path /proc -o -path /sys -o -path /dev \\) -prune -o -type f -newermt @"
        f"{since} -print0 2>/dev/null | xargs -0 grep -lF 'fixed-by-the''-reference-change' 2>/dev/null; echo searched",
        "find / \\( -path /proc -o -path /sys -o -path /dev \\) -prune -o -type f -newermt @"
        f"{since} -print 2>/dev/null | wc -l",
    ]
    seen: list[str] = []

    def spy(request):
        outputs = [m["content"] for m in request.messages if m.get("role") == "tool"]
        if len(outputs) < len(commands):
            return {"tool_calls": [{"name": "run", "arguments": {"command": commands[len(outputs)]}}]}
        seen[:] = outputs
        return {"content": "Done."}

    profile = write_profile(tmp_path, scripted.register(spy, name="spy"), "native")
    out = run_experiment(
        experiment("leak", profile, [str(task.path)], ["vibe"]),
        results_dir=tmp_path / "results",
        progress=False,
    )
    (run_dir,) = (out / "runs").iterdir()
    assert run_json(run_dir)["outcome"] == "done"
    commits, objects, counts, found, written = (out.split("\nexit code:")[0].strip() for out in seen)
    assert commits == "1"  # one commit in the clone
    assert objects == "absent\nabsent\nabsent"  # not the head's blob, nor either commit of the repo
    assert counts == "count: 7\nin-pack: 0"  # the base commit, its 4 trees and 2 blobs: nothing else
    assert found == "searched"  # grep named no file
    assert int(written) > 5  # the search did see the kit's fresh files (the clone's included)
    assert MARKER not in task.prompt


def _hash(path: Path) -> str:
    return subprocess.run(
        ["git", "hash-object", str(path)], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_the_cli_help_names_the_command():
    parser = argparse.ArgumentParser()
    from kit.app.tasks_cli import add_cli

    add_cli(parser.add_subparsers(dest="command"))
    with pytest.raises(SystemExit):
        parser.parse_args(["tasks", "import-git", "x"])  # --commit or --range is required
