"""Suites built from repositories' history (issue 29, item 3): the manifest, ``kit tasks build-suite``,
the loader's built folder, and the one clear error for a task nobody has built. The real importer is
replaced by a stand-in here (it writes micro-slugify with a ``source:``); the real-repos suite itself is
built from the projects' clones by the CI step (.ci/run) and tests/importers/test_real_repos.py."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from kit.app import cli, tasks_cli
from kit.config import Experiment
from kit.errors import ConfigError
from kit.importers import suite_build
from kit.paths import TASKS_DIR
from kit.tasks import task as tasks
from kit.tasks.suite_manifest import ExcludedTest, SpecNote


def _git(cwd: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@x", "HOME": str(cwd), "PATH": "/usr/bin:/bin"}  # fmt: skip
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def project(tmp_path) -> tuple[Path, str, str]:
    """A clone named like the manifest's project (DIR/<name>), with a base and a head commit."""
    repo = tmp_path / "clones" / "widgets"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q")
    (repo / "LICENSE").write_text("MIT License\n")
    (repo / "w.py").write_text("x = 1\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    (repo / "w.py").write_text("x = 2\n")
    _git(repo, "commit", "-qam", "fix")
    base, head = _git(repo, "rev-parse", "HEAD~1", "HEAD").split()
    return repo, base, head


@pytest.fixture
def suites(tmp_path, monkeypatch, project):
    """A suites folder with one manifest suite (three tasks) and a built folder, both in tmp."""
    _, base, head = project
    folder = tmp_path / "suites"
    (folder / "mine").mkdir(parents=True)
    (folder / "mine" / "fix.md").write_text("Our own words.\n")
    (folder / "mine.yaml").write_text(
        yaml.safe_dump(
            {
                "name": "mine",
                "projects": {"widgets": {"url": "https://example.org/acme/widgets", "licence": "MIT"}},
                "imports": [
                    {"id": "widgets-fix", "project": "widgets", "commit": head, "prompt": "mine/fix.md"},
                    {
                        "id": "widgets-span",
                        "project": "widgets",
                        "range": f"{base}..{head}",
                        "options": ["--tests", "t/*.py"],
                    },  # fmt: skip
                    {"id": "widgets-gone", "project": "widgets", "commit": "0" * 40},
                ],
            }
        )
    )
    monkeypatch.setattr(tasks, "SUITES_DIR", folder)
    monkeypatch.setattr(suite_build, "SUITES_DIR", folder)
    monkeypatch.setenv("ORCHBENCH_BUILT_DIR", str(tmp_path / "built"))
    return folder


def fake_import(calls: list[list[str]]):
    """A stand-in for `kit tasks import-git`: writes micro-slugify as the task, with the base tree's
    LICENSE and the source the real importer records."""

    def run(argv: list[str]) -> int:
        calls.append(argv)
        clone, task_id = argv[2], argv[argv.index("--id") + 1]
        out = Path(argv[argv.index("--out") + 1])
        base, head = (
            ("p", argv[argv.index("--commit") + 1])
            if "--commit" in argv
            else argv[argv.index("--range") + 1].split("..")
        )
        shutil.copytree(TASKS_DIR / "micro-slugify", out / task_id)
        shutil.copy(Path(clone).parent / "LICENSE", out / task_id / "repo" / "LICENSE")
        spec = yaml.safe_load((out / task_id / "task.yaml").read_text())
        spec.update(id=task_id, source={"kind": "git", "base": base, "head": head})
        (out / task_id / "task.yaml").write_text(yaml.safe_dump(spec))
        return 0

    return run


def test_a_task_of_a_manifest_that_nobody_built_fails_naming_the_build_command(suites):
    for call in (
        lambda: tasks.load_task("widgets-fix"),
        lambda: tasks.load_suite("mine"),
        lambda: tasks.expand_tasks(["suite:mine"]),
    ):
        with pytest.raises(ConfigError, match=r"(?s)suite 'mine'.* not built.*widgets-fix.*build-suite mine"):
            call()
    from kit.run.runner import plan

    with pytest.raises(ConfigError, match="build-suite mine --repos DIR"):
        plan(Experiment(name="x", tasks=["suite:mine"], strategies=["vibe"], profile="scripted"))
    with pytest.raises(ConfigError, match="unknown task 'no-such'"):  # any other id: as before
        tasks.load_task("no-such")


def test_the_manifest_is_checked_when_read(suites):
    bad = {"name": "bad", "projects": {}, "imports": [{"id": "a", "project": "p", "commit": "1" * 40}]}
    (suites / "bad.yaml").write_text(yaml.safe_dump(bad))
    with pytest.raises(ConfigError, match="unknown project 'p'"):
        tasks.load_suite("bad", check_tasks=False)
    bad["projects"] = {"p": {"url": "https://example.org/o/p", "licence": "MIT"}}
    bad["imports"][0]["range"] = "a..b"
    (suites / "bad.yaml").write_text(yaml.safe_dump(bad))
    with pytest.raises(ConfigError, match="exactly one of `commit` and `range`"):
        tasks.load_suite("bad", check_tasks=False)


def test_build_suite_imports_each_task_from_the_clone_keeps_built_ones_and_names_what_is_missing(
    suites, project, tmp_path, capsys
):
    repo, base, head = project
    suite = tasks.load_suite("mine", check_tasks=False)
    calls: list[list[str]] = []
    results = suite_build.build_suite(suite, repo.parent, fake_import(calls))
    assert [(r.id, r.status) for r in results] == [
        ("widgets-fix", "built"), ("widgets-span", "built"), ("widgets-gone", "failed")
    ]  # fmt: skip
    assert "lacks commit " + "0" * 40 in results[2].detail and "fetch" in results[2].detail
    assert calls[0][:11] == [
        "tasks",
        "import-git",
        str(repo / ".git"),
        "--commit",
        head,
        "--id",
        "widgets-fix",
        "--out",
        str(tmp_path / "built"),
        "--repo-url",
        "https://example.org/acme/widgets",
    ]
    assert calls[0][-2:] == ["--prompt-file", str(suites / "mine" / "fix.md")]
    assert calls[1][3:5] == ["--range", f"{base}..{head}"] and calls[1][-2:] == ["--tests", "t/*.py"]
    built = tmp_path / "built"
    fix, span = tasks.load_task("widgets-fix"), tasks.load_task("widgets-span")  # the loader finds them
    assert fix.path == built / "widgets-fix" and not fix.long and not span.long
    assert fix.project == "widgets"  # the manifest's project, written into task.yaml
    assert (built / "widgets-fix" / "LICENSE-widgets").read_text() == "MIT License\n"
    out = capsys.readouterr().out
    assert "[1/3] widgets-fix: python -m kit tasks import-git" in out and "[3/3] widgets-gone: failed" in out

    again = suite_build.build_suite(suite, repo.parent, fake_import(calls), only=["widgets-fix"])
    assert [(r.id, r.status) for r in again] == [("widgets-fix", "kept")] and len(calls) == 2
    (suites / "mine" / "fix.md").write_text("Other words.\n")  # a changed recipe is built again
    again = suite_build.build_suite(suite, repo.parent, fake_import(calls), only=["widgets-fix"])
    assert [(r.id, r.status) for r in again] == [("widgets-fix", "built")] and len(calls) == 3

    (built / "widgets-fix" / "repo" / "extra.txt").write_text("stale")
    suite_build.build_suite(suite, repo.parent, fake_import(calls), only=["widgets-fix"], force=True)
    assert not (built / "widgets-fix" / "repo" / "extra.txt").exists()  # removed, then imported again

    suite.imports[0].long = True  # the manifest's claim is checked against the kit's measure
    (wrong,) = suite_build.build_suite(
        suite, repo.parent, fake_import(calls), only=["widgets-fix"], force=True
    )
    assert (
        wrong.status == "failed"
        and "the manifest says long: true, the kit's measure says long: false (4 code lines, 1 files, "
        "7 hidden tests"
        in wrong.detail
    )

    nowhere = suite_build.build_suite(
        suite, tmp_path / "empty", fake_import(calls), only=["widgets-span"], force=True
    )
    assert nowhere[0].status == "no-source"
    assert "no clone of https://example.org/acme/widgets" in nowhere[0].detail
    assert (
        "git clone https://example.org/acme/widgets" in nowhere[0].detail and "--clone" in nowhere[0].detail
    )


def test_a_bare_mirror_named_owner_plus_name_is_found(project, tmp_path):
    repo, *_ = project
    mirror = tmp_path / "mirror" / "acme+widgets" / "repo"
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(mirror)], check=True)
    proj = suite_build.SuiteProject(url="https://example.org/acme/widgets.git", licence="MIT")
    assert suite_build.find_clone(proj, tmp_path / "mirror") == mirror
    assert suite_build.find_clone(proj, tmp_path / "clones") == repo / ".git"
    assert suite_build.find_clone(proj, tmp_path) is None


def test_identical_files_of_built_tasks_are_stored_once(tmp_path):
    for name in ("a", "b"):
        (tmp_path / name / "repo").mkdir(parents=True)
        (tmp_path / name / "repo" / "big.py").write_text("x = 1\n" * 1000)
        (tmp_path / name / "task.yaml").write_text(f"id: {name}\n")
    before, after = suite_build.share_identical_files(tmp_path)
    assert before == 2 * (6000 + 6) and after == 6000 + 12
    assert (tmp_path / "a" / "repo" / "big.py").stat().st_ino == (
        tmp_path / "b" / "repo" / "big.py"
    ).stat().st_ino


def test_the_cli_dry_run_prints_the_import_git_command_lines(suites, project, capsys):
    repo, base, head = project
    assert cli.main(["tasks", "build-suite", "mine", "--repos", str(repo.parent), "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(
        f"python -m kit tasks import-git {repo / '.git'} --commit {head} --id widgets-fix"
    )
    assert len(lines) == 3


def test_the_cli_builds_validates_kept_tasks_and_skips_a_project_without_a_clone(
    suites, project, tmp_path, monkeypatch, capsys
):
    repo, *_ = project
    monkeypatch.setattr(tasks_cli, "_run_import", fake_import([]))
    argv = ["tasks", "build-suite", "mine", "--only", "widgets-fix,widgets-span"]
    assert cli.main([*argv, "--repos", str(repo.parent)]) == 0
    out = capsys.readouterr().out
    assert "2/2 tasks built" in out and "MB on disk after sharing identical files" in out
    assert cli.main([*argv, "--repos", str(repo.parent), "--validate"]) == 0  # kept, then validated
    out = capsys.readouterr().out
    assert "✓ widgets-fix validated" in out and "✓ widgets-span validated" in out

    empty = ["--repos", str(tmp_path / "empty"), "--force"]
    assert cli.main([*argv, *empty]) == 1  # no clone: a failure ...
    assert cli.main([*argv, *empty, "--skip-missing"]) == 0  # ... unless told to skip it
    assert "0/2 tasks built" in capsys.readouterr().out.splitlines()[-1]


GAP_TEST = """

@pytest.mark.severity("minor")
def test_refuses_bytes():
    with pytest.raises(LookupError, match="no bytes here"):
        slugify(b"x")
"""


def test_a_task_whose_hidden_test_needs_what_its_prompt_never_states_is_refused_until_explained(
    suites, project
):
    """The specification audit in build-suite: an unexplained gap refuses the task (the rows name
    test, line, kind and what); the manifest's spec_notes explain it without a rebuild; exclude_tests
    reach import-git as --exclude-test with their reasons."""
    repo, *_ = project
    suite = tasks.load_suite("mine", check_tasks=False)
    calls: list[list[str]] = []
    suite_build.build_suite(suite, repo.parent, fake_import(calls), only=["widgets-fix"])
    built = Path(tasks.built_tasks_dir()) / "widgets-fix"
    with (built / "acceptance" / "test_slugify.py").open("a") as f:
        f.write(GAP_TEST)
    (refused,) = suite_build.build_suite(suite, repo.parent, fake_import(calls), only=["widgets-fix"])
    assert (
        refused.status == "failed"
        and "2 hidden-test requirement(s) the prompt never states" in refused.detail
    )
    assert "test_slugify.py::test_refuses_bytes  48  exception  LookupError" in refused.detail
    assert "test_slugify.py::test_refuses_bytes  48  message  no bytes here" in refused.detail
    assert "spec_notes:" in refused.detail and len(calls) == 1  # kept: checked again, not imported again

    suite.imports[0].spec_notes = [
        SpecNote(test="test_slugify.py::test_refuses_bytes", what="LookupError", note="any lookup error"),
        SpecNote(test="*", what="no bytes*", note="the message is free"),
    ]
    (kept,) = suite_build.build_suite(suite, repo.parent, fake_import(calls), only=["widgets-fix"])
    assert kept.status == "kept" and len(calls) == 1, kept.detail
    spec = yaml.safe_load((built / "task.yaml").read_text())
    assert spec["spec_gaps"] == {} and spec["spec_notes"][1]["note"] == "the message is free"

    suite.imports[0].exclude_tests = [ExcludedTest(test="t/test_x.py::test_y", reason="pins a seed")]
    argv = suite_build.import_argv(suite.imports[0], suite.projects["widgets"], "CLONE", built.parent)
    assert argv[argv.index("--exclude-test") + 1 : argv.index("--exclude-test") + 3] == [
        "t/test_x.py::test_y",
        "pins a seed",
    ]
    assert not suite_build.is_current(suite.imports[0], built)  # a test left out: built again


def test_a_refusal_names_every_unbuilt_task_of_the_suite(suites):
    """Issue 41: not only the first unbuilt task -- all of them, in one error."""
    from kit.run.runner import plan

    for call in (
        lambda: tasks.load_suite("mine"),
        lambda: plan(Experiment(name="x", tasks=["suite:mine"], strategies=["vibe"], profile="scripted")),
        lambda: plan(Experiment(name="x", tasks=["widgets-fix", "widgets-span"], strategies=["vibe"],
                                profile="scripted")),
    ):  # fmt: skip
        with pytest.raises(ConfigError) as info:
            call()
        text = str(info.value)
        assert "widgets-fix" in text and "widgets-span" in text and "build-suite mine" in text, text


def test_the_validation_of_a_build_is_remembered_so_the_dry_run_knows_it(suites, project, monkeypatch):
    """Issue 41: after a build whose import validated the task, the built task (licence copied, recipe
    written) counts as checked -- the dry run no longer says "hidden tests not yet checked"."""
    from kit.importers.validate import collection_checked, remember_checked

    monkeypatch.setenv("XDG_CACHE_HOME", str(project[0].parent.parent / "cache"))
    repo, *_ = project
    stand_in = fake_import([])

    def validating_import(argv: list[str]) -> int:  # import-git validates what it leaves behind
        status = stand_in(argv)
        out, task_id = Path(argv[argv.index("--out") + 1]), argv[argv.index("--id") + 1]
        remember_checked(tasks.load_task(out / task_id))
        return status

    suite = tasks.load_suite("mine", check_tasks=False)
    suite_build.build_suite(suite, repo.parent, validating_import, only=["widgets-fix"])
    assert collection_checked(tasks.load_task("widgets-fix"))
    suite_build.build_suite(suite, repo.parent, stand_in, only=["widgets-span"])  # not validated: not
    assert not collection_checked(tasks.load_task("widgets-span"))  # remembered
