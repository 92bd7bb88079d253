"""The kit's own git calls on a clone the agent may have rigged: config names built to inject options,
a repointed ``.git``, ``core.worktree``, a nested repository with its own filters. Each attack leaves a
marker file outside the clone if a planted command runs; none may appear."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kit.errors import TaskError
from kit.tasks.git import git_env, run_git


def _sh(root: Path, command: str) -> None:
    subprocess.run(command, shell=True, cwd=root, check=True, env=git_env(), capture_output=True)


@pytest.fixture
def clone(tmp_path):
    root = tmp_path / "clone"
    root.mkdir()
    run_git(root, "init", "-q", "-b", "main")
    (root / "a.txt").write_text("one\n")
    run_git(root, "add", "-A")
    run_git(root, "commit", "-q", "-m", "base")
    return root


def _marker_script(tmp_path: Path, name: str) -> tuple[Path, Path]:
    marker = tmp_path / f"{name}.ran"
    script = tmp_path / f"{name}.sh"
    script.write_text(f"#!/bin/sh\ntouch {marker}\ncat\n")
    script.chmod(0o755)
    return script, marker


def test_a_config_name_with_an_equals_sign_does_not_keep_its_filter(clone, tmp_path):
    script, marker = _marker_script(tmp_path, "eq")
    _sh(clone, f'git config "filter.a=b.clean" {script}')
    (clone / ".gitattributes").write_text("* filter=a=b\n")
    (clone / "a.txt").write_text("two\n")
    run_git(clone, "add", "-A")
    assert not marker.exists()


def test_a_config_name_with_spaces_cannot_inject_an_fsmonitor(clone, tmp_path):
    script, marker = _marker_script(tmp_path, "space")
    _sh(clone, f"git config 'filter.x core.fsmonitor={script};y.clean' x")
    (clone / "a.txt").write_text("two\n")
    run_git(clone, "status", "--porcelain")
    run_git(clone, "add", "-A")
    assert not marker.exists()


def test_a_dot_git_file_pointing_elsewhere_is_refused(clone, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run_git(elsewhere, "init", "-q", "-b", "main")
    before = (elsewhere / ".git" / "HEAD").read_text()
    subprocess.run(["rm", "-rf", str(clone / ".git")], check=True)
    (clone / ".git").write_text(f"gitdir: {elsewhere / '.git'}\n")
    with pytest.raises(TaskError, match="not a folder"):
        run_git(clone, "add", "-A")
    assert (elsewhere / ".git" / "HEAD").read_text() == before
    assert run_git(elsewhere, "status", "--porcelain") == ""


def test_a_planted_commondir_cannot_send_the_kits_commit_to_another_repository(clone, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    run_git(other, "init", "-q", "-b", "main")
    (clone / ".git" / "commondir").write_text(f"{other / '.git'}\n")
    (clone / "a.txt").write_text("two\n")
    with pytest.raises(TaskError, match="commondir"):
        run_git(clone, "add", "-A")
    assert not (other / ".git" / "refs" / "heads" / "main").exists()


def test_core_worktree_cannot_point_the_kits_commit_at_another_folder(clone, tmp_path):
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "answer.txt").write_text("the hidden tests\n")
    _sh(clone, f"git config core.worktree {hidden}")
    run_git(clone, "add", "-A")
    run_git(clone, "commit", "-q", "-m", "kit commit", "--allow-empty")
    assert "answer.txt" not in run_git(clone, "ls-files")


def test_a_nested_repository_s_own_filters_do_not_run(clone, tmp_path):
    script, marker = _marker_script(tmp_path, "nested")
    sub = clone / "sub"
    sub.mkdir()
    run_git(sub, "init", "-q", "-b", "main")
    (sub / "f.txt").write_text("x\n")
    run_git(sub, "add", "-A")
    run_git(sub, "commit", "-q", "-m", "sub")
    _sh(clone, "git add sub && git commit -q -m gitlink")  # as the agent would, with its own git
    _sh(sub, f"git config filter.ev.clean {script}")
    (sub / ".gitattributes").write_text("* filter=ev\n")
    (sub / "f.txt").write_text("y\n")
    for args in (["status", "--porcelain"], ["add", "-A"]):
        with pytest.raises(TaskError, match="nested git repository"):
            run_git(clone, *args)
    assert not marker.exists()


def test_without_a_dot_git_git_does_not_climb_to_a_parent_repository(tmp_path):
    parent = tmp_path / "parent"
    parent.mkdir()
    run_git(parent, "init", "-q", "-b", "main")
    inner = parent / "clone"
    inner.mkdir()
    with pytest.raises(TaskError):
        run_git(inner, "rev-parse", "--show-toplevel")


# --------------------------------------------------------------------------- a second attacker's cases


def test_a_conditional_include_is_refused(clone, tmp_path):
    script, marker = _marker_script(tmp_path, "incif")
    (clone / ".git" / "inc").write_text(f'[filter "evil"]\n\tclean = {script}\n')
    _sh(clone, "git config includeIf.onbranch:main.path inc")
    (clone / ".gitattributes").write_text("* filter=evil\n")
    (clone / "a.txt").write_text("two\n")
    with pytest.raises(TaskError, match="includes other files"):
        run_git(clone, "add", "-A")
    assert not marker.exists()


def test_a_worktree_config_is_refused(clone, tmp_path):
    script, marker = _marker_script(tmp_path, "wtconf")
    _sh(clone, "git config core.repositoryformatversion 1 && git config extensions.worktreeConfig true")
    (clone / ".git" / "config.worktree").write_text(f'[filter "evil"]\n\tclean = {script}\n')
    (clone / ".gitattributes").write_text("* filter=evil\n")
    (clone / "a.txt").write_text("two\n")
    with pytest.raises(TaskError, match="config.worktree"):
        run_git(clone, "add", "-A")
    assert not marker.exists()


def test_a_submodule_set_to_ignore_none_is_still_not_entered(clone, tmp_path):
    script, marker = _marker_script(tmp_path, "subnone")
    sub = clone / "sub"
    sub.mkdir()
    run_git(sub, "init", "-q", "-b", "main")
    (sub / "f.txt").write_text("x\n")
    run_git(sub, "add", "-A")
    run_git(sub, "commit", "-q", "-m", "sub")
    (clone / ".gitmodules").write_text('[submodule "sub"]\n\tpath = sub\n\turl = ./sub\n\tignore = none\n')
    _sh(clone, "git add sub .gitmodules && git commit -q -m gitlink && git config submodule.sub.ignore none")
    _sh(sub, f"git config filter.ev.clean {script}")
    (sub / ".gitattributes").write_text("* filter=ev\n")
    (sub / "f.txt").write_text("y\n")
    for args in (["status", "--porcelain"], ["add", "-A"]):
        with pytest.raises(TaskError, match="nested git repository"):
            run_git(clone, *args)
    assert not marker.exists()


@pytest.mark.parametrize("inside", ["COMMIT_EDITMSG", "logs/HEAD", "refs/heads"])
def test_a_link_inside_dot_git_is_refused_before_anything_is_written(clone, tmp_path, inside):
    outside = tmp_path / "outside"
    outside.write_text("keep me\n") if inside != "refs/heads" else outside.mkdir()
    target = clone / ".git" / inside
    subprocess.run(["rm", "-rf", str(target)], check=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.symlink_to(outside)
    (clone / "a.txt").write_text("two\n")
    with pytest.raises(TaskError, match="link or a special file"):
        run_git(clone, "commit", "-q", "-a", "-m", "kit commit")
    if outside.is_file():
        assert outside.read_text() == "keep me\n"
    else:
        assert list(outside.iterdir()) == []


def test_a_fifo_that_would_hang_git_ends_in_a_task_error(clone, monkeypatch):
    import os

    from kit.tasks import git as kit_git

    monkeypatch.setattr(kit_git, "GIT_TIMEOUT_S", 2.0)
    os.mkfifo(clone / ".gitattributes")
    (clone / "a.txt").write_text("two\n")
    with pytest.raises(TaskError, match="longer than 2 s"):
        run_git(clone, "add", "-A")
