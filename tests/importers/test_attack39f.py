"""Attack round 39f on the round-39e fixes, by a helper who had not read them: each test reproduces a
case that got through, marked ``xfail(strict=True)`` so that the fix flips it (and the marker must
then go). Nothing here reaches outside ``tmp_path`` (the "victim" repository is built there too)."""

from __future__ import annotations

import os
import shutil

import pytest

from kit.errors import TaskError
from kit.importers.git.gitview import GitView
from tests.importers.test_attack39d import _victim_repo


def _reads_victim(evil) -> str:
    """What the view of ``evil`` shows of ``calc.py`` at HEAD ('' when the view is refused)."""
    try:
        view = GitView(evil)
    except TaskError:
        return ""  # refused: what the fix should do
    try:
        return view.run("show", "HEAD:calc.py", check=False).stdout
    finally:
        view.close()


# --------------------------------------------------------------------------- (1) the .git file


def test_an_absolute_gitdir_through_a_modules_folder_and_dotdot_reads_another_repository(tmp_path):
    """Round 39e follows a `.git` file's `gitdir:` only when the path names a submodule's
    (`.../modules/...`) or worktree's git folder -- but an ABSOLUTE gitdir is tested as written, not
    resolved: `gitdir: /X/modules/../../victim/secret-project/.git` has a part named `modules`, and the
    OS resolves it to the victim's git folder. Any existing folder named `modules` will do (on most
    Linux hosts `/lib/modules/../../home/USER/secret/.git` needs nothing of the attacker's on disk);
    here it is a folder of the downloaded tree. The view then reads the other repository's history."""
    _victim_repo(tmp_path)
    evil = tmp_path / "evil"
    (evil / "modules").mkdir(parents=True)
    (evil / ".git").write_text(f"gitdir: {evil}/modules/../../victim/secret-project/.git\n")
    shown = _reads_victim(evil)
    assert "victim-secret" not in shown, f"the view of {evil} reads the victim: {shown[:60]!r}"


def test_an_absolute_gitdir_naming_a_link_in_a_worktrees_folder_reads_another_repository(tmp_path):
    """The same through a symbolic link: `gitdir: /X/worktrees/wt` (its parent is named `worktrees`:
    passes) where `wt` is a link, shipped in the downloaded tree, to another repository's `.git`. A
    relative gitdir is resolved first (and refused), an absolute one is not; the view reads the
    victim's refs and objects (commondir is absent there, so that check never runs)."""
    victim = _victim_repo(tmp_path)
    evil = tmp_path / "evil"
    (evil / "worktrees").mkdir(parents=True)
    os.symlink(victim / ".git", evil / "worktrees" / "wt")
    (evil / ".git").write_text(f"gitdir: {evil}/worktrees/wt\n")
    shown = _reads_victim(evil)
    assert "victim-secret" not in shown, f"the view of {evil} reads the victim: {shown[:60]!r}"


def test_links_inside_objects_read_another_repositorys_store(tmp_path):
    """The view refuses `objects`, `objects/pack` and `objects/info` as links, but not the entries
    under them: a `.git` folder whose loose-object folders (`objects/ab`) and pack files
    (`objects/pack/pack-*.pack/.idx`) are links to another repository's are that repository's store,
    borrowed without `alternates`. With a ref naming one of its commits (known e.g. for a private fork
    of a public project) the import reads that repository's trees and files."""
    victim = _victim_repo(tmp_path)
    store = victim / ".git" / "objects"
    git_dir = tmp_path / "evil" / ".git"
    (git_dir / "objects" / "pack").mkdir(parents=True)
    for sub in os.listdir(store):
        if len(sub) == 2:
            os.symlink(store / sub, git_dir / "objects" / sub)
    for name in os.listdir(store / "pack"):
        os.symlink(store / "pack" / name, git_dir / "objects" / "pack" / name)
    shutil.copytree(
        victim / ".git" / "refs", git_dir / "refs"
    )  # (the commit names: the attacker's knowledge)
    (git_dir / "HEAD").write_text((victim / ".git" / "HEAD").read_text())
    shown = _reads_victim(tmp_path / "evil")
    assert "victim-secret" not in shown, f"the view reads the victim's store: {shown[:60]!r}"


# --------------------------------------------------------------------------- (2) links in repo/


def test_a_link_through_a_link_to_its_own_folder_is_refused(tmp_path, capsys):
    """`repo/here -> .` and `repo/alias.py -> here/../repo/calc.py` pass the round-39e check: as
    written, `here/..` is normalised away lexically (`repo/calc.py`, inside), and resolved, `here` is
    repo/ itself, so `..` is the task folder and `repo/calc.py` is back in through repo/'s own name --
    the case 39e meant to refuse, hidden behind a link. `kit tasks validate` accepts the task; in
    every clone (another folder name) `alias.py` resolves to `<clone's parent>/repo/calc.py`, a host
    file outside the clone (here a planted one, read through the clone)."""
    from kit.app.cli import main
    from kit.tasks.task import load_task
    from kit.tasks.workspace import create_workspace
    from tests.importers.test_attack39d import _hand_made_task

    task = _hand_made_task(tmp_path)
    os.symlink(".", task / "repo" / "here")
    os.symlink("here/../repo/calc.py", task / "repo" / "alias.py")
    status = main(["tasks", "validate", str(task)])
    capsys.readouterr()
    if status != 0:
        return  # refused: what the fix should do
    (tmp_path / "runs" / "repo").mkdir(parents=True)
    (tmp_path / "runs" / "repo" / "calc.py").write_text("a host file\n")
    ws = create_workspace(load_task(str(task)), tmp_path / "runs" / "ws")
    real = os.path.realpath(ws.root / "alias.py")
    assert real.startswith(str(ws.root) + os.sep), f"the clone's alias.py leads out of it, to {real}"


# --------------------------------------------------------------------------- (3) the lines recorded


def _clone(tmp_path):
    from kit.tasks.task import load_task
    from kit.tasks.workspace import create_workspace
    from tests.importers.test_attack39d import _hand_made_task

    task = _hand_made_task(tmp_path)
    (task / "repo" / "data.txt").write_text("".join(f"line {i}\n" for i in range(50)))
    return create_workspace(load_task(str(task)), tmp_path / "clone")


_BODY = "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(100))
_BODY += "def double(x):\n    return x + x\n\n\ndef one():\n    return 1\n"


def test_python_written_with_cr_line_ends_records_one_line_changed(tmp_path):
    """No attribute needed: Python reads a lone CR as a line end, git's numstat counts LF only. An
    agent that writes its 406-line calc.py with CR line ends (the module imports and runs: the fix is
    scored as usual) is recorded as 1 line added -- the same edit with LF ends is 401. A number the
    agent influences other than by doing the task (e.g. any per-line cost or size comparison)."""
    from kit.scoring.diffstats import diff_stats

    ws = _clone(tmp_path)
    (ws.root / "calc.py").write_bytes(_BODY.replace("\n", "\r").encode())
    files, added, removed = diff_stats(ws)
    assert added >= 400, f"a 406-line rewrite of calc.py recorded as {added} added, {removed} removed"


def test_one_nul_byte_hides_a_files_lines_from_the_record_and_the_patch(tmp_path):
    """The tree's attributes are reset (`!diff !text`), so git falls back to its own guess: a NUL in a
    file's first 8000 bytes makes it binary. An agent that rewrites data.txt with 500 new lines and
    one NUL byte in front is recorded as 0 added, 0 removed, and the patch a reviewer is shown holds
    the file as a base85 'GIT binary patch' (no line of it readable). Python refuses a NUL in source,
    so this hides edits to data, config and docs files, not to .py files. (Fixed for the record: the
    kit counts the lines itself, a NUL makes no file binary there -- 500 lines written, the first
    one `\\0new 0`, 50 removed. The patch: the next test.)"""
    from kit.scoring.diffstats import diff_stats

    ws = _clone(tmp_path)
    (ws.root / "data.txt").write_bytes(b"\0" + "".join(f"new {i}\n" for i in range(500)).encode())
    files, added, removed = diff_stats(ws)
    assert (files, added, removed) == (1, 500, 50), (files, added, removed)


@pytest.mark.xfail(strict=True, raises=AssertionError, reason="the patch keeps git's binary guess")
def test_one_nul_byte_hides_a_files_lines_from_the_patch(tmp_path):
    """The patch a reviewer is shown (and the workflow journal applies) still holds such a file as a
    base85 'GIT binary patch': its lines are not readable there, though they are counted."""
    from kit.tasks.workspace import diff

    ws = _clone(tmp_path)
    (ws.root / "data.txt").write_bytes(b"\0" + "".join(f"new {i}\n" for i in range(500)).encode())
    assert "+new 499" in diff(ws)


def test_a_renamed_file_counts_no_lines_but_its_patch_shows_them_all(tmp_path):
    """diff_stats runs `git diff --numstat` with git's default rename detection, the patch runs with
    `--no-renames`: an agent that renames data.txt (50 lines) is recorded as 0 added / 0 removed
    while the patch it is judged on deletes 50 lines and adds 50 -- the record and the patch disagree,
    and a rewrite kept under git's 50 % similarity counts only the lines it kept different."""
    from kit.scoring.diffstats import diff_stats
    from kit.tasks.workspace import diff

    ws = _clone(tmp_path)
    os.rename(ws.root / "data.txt", ws.root / "data2.txt")
    files, added, removed = diff_stats(ws)
    shown = diff(ws)
    assert "-line 49" in shown and "+line 49" in shown  # the patch: a delete and an add
    assert (added, removed) == (50, 50), f"renamed 50-line file recorded as {added} added, {removed} removed"


def test_a_setup_made_link_through_a_link_to_its_own_folder_is_refused(tmp_path, capsys):
    """The setup variant: `ln -s . here; ln -s "here/../$(basename "$PWD")/calc.py" alias.py` passes
    the check of setup's links (in the base's build folder it resolves inside), and `kit tasks
    validate` accepts the task; in every clone `alias.py` names `<clone's parent>/<the build folder's
    old name>/calc.py`: a link out of the clone (dangling here)."""
    from kit.app.cli import main
    from kit.tasks.task import load_task
    from kit.tasks.workspace import create_workspace
    from tests.importers.test_attack39d import _hand_made_task

    setup = "setup: ['ln -s . here', 'ln -s \"here/../$(basename \"$PWD\")/calc.py\" alias.py']\n"
    task = _hand_made_task(tmp_path, setup)
    status = main(["tasks", "validate", str(task)])
    capsys.readouterr()
    if status != 0:
        return  # refused: what the fix should do
    ws = create_workspace(load_task(str(task)), tmp_path / "runs" / "ws")
    real = os.path.realpath(ws.root / "alias.py")
    assert real.startswith(str(ws.root) + os.sep), f"the clone's alias.py leads out of it, to {real}"
