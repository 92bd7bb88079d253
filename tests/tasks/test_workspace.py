import subprocess

import pytest

from kit.errors import TaskError
from kit.scoring.diffstats import diff_stats
from kit.tasks.task import load_task
from kit.tasks.workspace import create_workspace, diff


def _git(root, *args):
    return subprocess.run(
        ["git", "-c", "safe.directory=*", *args], cwd=root, capture_output=True, text=True, check=True
    ).stdout


def test_base_commit_recorded_and_deterministic(tmp_path):
    task = load_task("micro-slugify")
    ws = create_workspace(task, tmp_path / "a")
    assert len(ws.base_commit) == 40
    assert _git(ws.root, "rev-parse", "HEAD").strip() == ws.base_commit
    assert _git(ws.root, "status", "--porcelain") == ""
    again = create_workspace(task, tmp_path / "b")
    assert again.base_commit == ws.base_commit


def test_hidden_folders_never_copied(tmp_path):
    task = load_task("table-computed-columns")
    ws = create_workspace(task, tmp_path / "ws")
    names = {p.name for p in ws.root.rglob("*")}
    assert "acceptance" not in names and "solution" not in names
    assert "test_computed_columns.py" not in names
    assert (ws.root / "tablekit" / "table.py").is_file()
    tracked = _git(ws.root, "ls-files").split()
    assert "task.yaml" not in tracked and "tablekit/table.py" in tracked


def test_diff_includes_untracked_files_and_leaves_index_alone(tmp_path):
    ws = create_workspace(load_task("micro-slugify"), tmp_path / "ws")
    assert diff(ws) == ""
    assert diff_stats(ws) == (0, 0, 0)
    (ws.root / "new_module.py").write_text("A = 1\nB = 2\n")
    text = (
        (ws.root / "textkit.py")
        .read_text()
        .replace('raise NotImplementedError("slugify is not implemented yet")', "return text")
    )
    (ws.root / "textkit.py").write_text(text)
    (ws.root / "__pycache__").mkdir()
    (ws.root / "__pycache__" / "x.pyc").write_bytes(b"\0junk")
    patch = diff(ws)
    assert "new_module.py" in patch and "+B = 2" in patch
    assert "+    return text" in patch and "-    raise NotImplementedError" in patch
    assert "__pycache__" not in patch
    assert diff_stats(ws) == (2, 3, 1)
    status = _git(ws.root, "status", "--porcelain")
    assert "?? new_module.py" in status  # still untracked: the user's index was not touched
    assert _git(ws.root, "rev-parse", "HEAD").strip() == ws.base_commit


def test_dest_must_be_empty(tmp_path):
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "x").write_text("x")
    with pytest.raises(TaskError):
        create_workspace(load_task("micro-slugify"), tmp_path / "ws")
    (tmp_path / "empty").mkdir()
    assert create_workspace(load_task("micro-slugify"), tmp_path / "empty").root.is_dir()


def test_setup_commands_are_part_of_the_base(tmp_path):
    task = load_task("micro-slugify").model_copy(update={"setup": ["echo generated > setup_output.txt"]})
    ws = create_workspace(task, tmp_path / "ws")
    assert (ws.root / "setup_output.txt").read_text().strip() == "generated"
    assert diff(ws) == ""
    bad = task.model_copy(update={"setup": ["exit 3"]})
    with pytest.raises(TaskError, match="setup command"):
        create_workspace(bad, tmp_path / "ws2")


def test_a_special_file_in_repo_is_refused_named_and_no_half_built_base_is_left(tmp_path):
    """A named pipe in repo/: the base's copy raised a raw shutil.Error (a list of tuples naming the
    cache path) and left a ``*.tmp-*`` folder in the bases cache. A failing setup leaves none either."""
    import os

    from kit.paths import results_root
    from tests.tasks.taskmaker import make_task

    task = make_task(tmp_path / "t", {"calc.py": "X = 1\n"}, {"test_x.py": "def test_x():\n    pass\n"}, {})
    os.mkfifo(task.repo_dir / "pipe.txt")
    with pytest.raises(TaskError, match=r"repo/pipe.txt is a named pipe, not a file: refused"):
        create_workspace(task, tmp_path / "ws")
    os.unlink(task.repo_dir / "pipe.txt")
    with pytest.raises(TaskError, match="setup command"):
        create_workspace(task.model_copy(update={"setup": ["exit 3"]}), tmp_path / "ws2")
    assert list((results_root() / ".cache" / "bases").glob("*.tmp-*")) == []


def test_a_changed_executable_bit_or_link_target_gives_a_new_base(tmp_path, monkeypatch):
    """The cached base was keyed by each file's path and bytes only: a task re-imported (``--force``)
    with a script made executable, or a link pointed elsewhere, reused the old base -- the clone had
    the old mode or target (found by red team 45's importer round)."""
    import os
    import shutil

    from kit.tasks.workspace import base_repository

    monkeypatch.setenv("ORCHBENCH_RESULTS_DIR", str(tmp_path / "results"))
    folder = tmp_path / "task"
    shutil.copytree(load_task("micro-slugify").path, folder)
    script = folder / "repo" / "run.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    first = base_repository(load_task(folder))
    assert base_repository(load_task(folder)) == first  # (the same task: the same base)
    script.chmod(0o755)
    second = base_repository(load_task(folder))
    assert second != first
    assert os.stat(create_workspace(load_task(folder), tmp_path / "ws").root / "run.sh").st_mode & 0o100
    (folder / "repo" / "link").symlink_to("run.sh")
    third = base_repository(load_task(folder))
    (folder / "repo" / "link").unlink()
    (folder / "repo" / "link").symlink_to("README.md")
    assert base_repository(load_task(folder)) not in (first, second, third)
