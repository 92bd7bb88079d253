"""Every path of a task folder stays inside the folder it belongs to (issue 39, item 2): the one check
(kit/untrusted/confine.py) guards ``apply_solution``, ``kit tasks validate`` on any task folder (hand-made
ones included) and a suite manifest's file names. Host files outside are neither read, written nor
deleted."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from kit.errors import TaskError
from kit.importers import suite_build
from kit.importers.validate import validate_task
from kit.tasks.suite_manifest import SuiteImport, SuiteProject
from kit.tasks.task import apply_solution
from kit.untrusted.confine import confined, path_problem
from tests.tasks.taskmaker import make_task

REPO = {
    "calc.py": "def double(x):\n    return x + x + 1\n",
    "tests/test_calc.py": "def test_ok():\n    pass\n",
}
ACCEPTANCE = {
    "test_double.py": """
        import pytest
        from calc import double

        @pytest.mark.severity("major")
        def test_double():
            assert double(2) == 4
        """
}


@pytest.mark.parametrize(
    ("rel", "problem"),
    [
        ("a/b.py", None),
        (".hidden/x", None),
        ("", "an empty path"),
        ("/etc/passwd", "an absolute path"),
        ("../x", "'..' segment"),
        ("a/../../x", "'..' segment"),
        ("a//b", "'..' segment"),
        ("./a", "'..' segment"),
        ("a\0b", "NUL or control"),
        ("a\nb", "NUL or control"),
        ("a\x1b]0;t\x07", "NUL or control"),
        ("notes\u2028pkg/extra.py", "NUL or control"),
        ("a\u2029b", "NUL or control"),
        ("a\x85b", "NUL or control"),
        ("a\x9bb", "NUL or control"),
        ("caf\u00e9/\u00a0x y ", None),
        ("a/" + "n" * 256, "name longer than 255"),
        ("a/" * 600, "'..' segment"),
        ("a/" * 600 + "b", "longer than 1024"),
    ],
)
def test_path_problem(rel, problem):
    found = path_problem(rel)
    assert (found is None) if problem is None else (problem in found), found


def test_a_path_through_a_link_or_out_of_its_folder_is_refused(tmp_path):
    root = tmp_path / "root"
    (root / "real").mkdir(parents=True)
    os.symlink(tmp_path, root / "up")
    os.symlink(root / "real", root / "inside")
    assert confined(root, "real/x.txt") == root / "real" / "x.txt"
    for rel in ("up/x.txt", "inside/x.txt", "up"):
        with pytest.raises(TaskError, match=f"'{rel}' is a .*symbolic link"):
            confined(root, rel, "a test path")
    assert confined(root, "up", leaf_link=True) == root / "up"  # the link itself may be removed


@pytest.fixture
def host(tmp_path) -> dict[str, Path]:
    """Host files outside any task: one a solution could delete, one it could read."""
    outside = tmp_path / "host"
    outside.mkdir()
    (outside / "victim.txt").write_text("keep me\n")
    (outside / "secret.txt").write_text("HOST-SECRET\n")
    return {"dir": outside, "victim": outside / "victim.txt", "secret": outside / "secret.txt"}


def _untouched(host: dict[str, Path]) -> None:
    assert host["victim"].read_text() == "keep me\n" and sorted(p.name for p in host["dir"].iterdir()) == [
        "secret.txt",
        "victim.txt",
    ]


@pytest.mark.parametrize(
    "how",
    ["deleted-dotdot", "deleted-absolute", "deleted-through-link", "copy-through-link", "solution-link"],
)
def test_apply_solution_refuses_a_path_out_of_the_clone_before_touching_anything(tmp_path, host, how):
    task = make_task(tmp_path / "t", REPO, ACCEPTANCE, {"calc.py": "def double(x):\n    return x + x\n"})
    root = tmp_path / "clone"
    root.mkdir()
    (root / "calc.py").write_text("old\n")
    os.symlink(host["dir"], root / "lib")  # a link the starting code holds (or an agent made)
    lines = {
        "deleted-dotdot": "../" * 30 + str(host["victim"]).lstrip("/"),
        "deleted-absolute": str(host["victim"]),
        "deleted-through-link": "lib/victim.txt",
    }
    if how in lines:
        (task.solution_dir / "DELETED.txt").write_text(lines[how] + "\n")
    elif how == "copy-through-link":
        (task.solution_dir / "lib").mkdir()
        (task.solution_dir / "lib" / "victim.txt").write_text("overwritten\n")
    else:
        os.symlink(host["secret"], task.solution_dir / "leak.txt")
    with pytest.raises(TaskError, match="refused"):
        apply_solution(task, root)
    _untouched(host)
    assert (root / "calc.py").read_text() == "old\n" and not (root / "leak.txt").exists()  # nothing laid


def test_validate_refuses_a_hand_made_task_whose_paths_leave_it_and_runs_nothing(tmp_path, host):
    task = make_task(tmp_path / "t", REPO, ACCEPTANCE, {"calc.py": "def double(x):\n    return x + x\n"})
    os.symlink(host["dir"], task.repo_dir / "lib")
    os.symlink(host["secret"], task.acceptance_dir / "data.txt")
    (task.solution_dir / "DELETED.txt").write_text("lib/victim.txt\n../../victim.txt\n")
    report = validate_task(task)
    _untouched(host)
    from kit.importers.validate import task_path_problems

    problems = task_path_problems(task)
    assert any("repo/lib" in p for p in problems) and any("acceptance/data.txt" in p for p in problems)
    assert any("DELETED.txt line 'lib/victim.txt'" in p for p in problems)
    assert not report.ok and report.problems == problems and "workspace_s" not in report.durations
    _untouched(host)


def test_a_manifest_names_no_file_outside_its_folders(tmp_path, host):
    folder = tmp_path / "built" / "widgets-fix"
    (folder / "repo").mkdir(parents=True)
    (folder / "task.yaml").write_text("id: widgets-fix\ntitle: t\nprompt: p\n")
    escape = "../" * 30 + str(host["secret"]).lstrip("/")
    project = SuiteProject(url="https://example.org/acme/widgets", licence="MIT", licence_file=escape)
    item = SuiteImport(id="widgets-fix", project="widgets", commit="a" * 40)
    with pytest.raises(TaskError, match="the licence file of .* is a path with"):
        suite_build.finish(item, project, folder)
    assert not (folder / "LICENSE-widgets").exists()
    with pytest.raises(TaskError, match="prompt '\\.\\./"):
        suite_build.recipe(SuiteImport(id="x", project="widgets", commit="a" * 40, prompt=escape))
    dotdot = SuiteProject(url="https://example.org/acme/..", licence="MIT")
    with pytest.raises(TaskError, match="project name"):
        suite_build.find_clone(dotdot, tmp_path / "clones")


@pytest.mark.parametrize("entry", ["repo", "acceptance", "solution", "task.yaml"])
def test_a_task_folder_whose_own_entry_is_a_link_to_a_host_folder_is_refused(tmp_path, entry):
    """Red team, issue 39: `repo -> /host/folder` passed validate, and a run's clone then held the host
    folder's files (copytree follows a top-level link). A task folder's own entries are never links."""
    from kit.importers.validate import task_path_problems
    from kit.tasks.task import load_task

    task = make_task(tmp_path / "t", REPO, ACCEPTANCE, {"calc.py": "def double(x):\n    return x + x\n"})
    host = tmp_path / "host" / entry
    host.parent.mkdir()
    os.rename(task.path / entry, host)
    (host / "secret.txt").write_text("HOST SECRET") if host.is_dir() else None
    os.symlink(host, task.path / entry)
    problems = task_path_problems(load_task(task.path))
    assert problems and f"{entry} is a symbolic link" in problems[0], problems
    report = validate_task(load_task(task.path))
    assert not report.ok and any("symbolic link" in p for p in report.problems), report.problems


def test_deleted_lines_are_split_at_newlines_only_and_taken_exactly(tmp_path):
    """str.splitlines() split 'notes\\u2028a.py' in two and each line was stripped: the solution
    deleted 'a.py', a file the change kept."""
    from kit.tasks.task import deleted_lines

    task = make_task(tmp_path / "t", REPO, ACCEPTANCE, {"calc.py": "def double(x):\n    return x + x\n"})
    text = "# a comment\n\nnotes\u2028a.py\nb.py \n  c.py\nd\x85e.py\n"
    (task.solution_dir / "DELETED.txt").write_text(text, encoding="utf-8")
    assert deleted_lines(task) == ["notes\u2028a.py", "b.py ", "  c.py", "d\x85e.py"]
    for name in ("a.py", "b.py", "c.py", "e.py"):
        (task.repo_dir / name).write_text("kept\n")
    root = tmp_path / "root"
    shutil.copytree(task.repo_dir, root)
    with pytest.raises(TaskError, match="control character"):  # U+2028, U+0085: refused, nothing done
        apply_solution(task, root)
    (task.solution_dir / "DELETED.txt").write_text("b.py \n  c.py\n", encoding="utf-8")
    apply_solution(task, root)
    assert all((root / name).is_file() for name in ("a.py", "b.py", "c.py", "e.py"))
