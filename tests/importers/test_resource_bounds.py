"""The importer's resource bounds against a hostile repository (red team 39): commits read from
their objects (no tree walk), a tree's file count streamed before git walks it, symlink copies
counted against the tree size cap, a full disk as one clear error, and one time budget for all of
an import's probe sessions."""

from __future__ import annotations

import errno
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from kit.app.cli import main
from kit.errors import TaskError
from kit.importers.git import gitread
from tests.support.gitrepos import git, make_repo

BASE = {"calc.py": "def double(x):\n    return x + x + 1\n"}


def test_a_commit_is_read_from_its_object_as_git_show_reads_it(tmp_path):
    repo = tmp_path / "calc"
    shas = make_repo(
        repo, [("start", BASE), ("Fix double\n\nThe body, with\n\n  lines.", {"calc.py": "x = 1\n"})]
    )
    got = gitread.Repo(repo).commit(shas[1])
    want = git(repo, "show", "-s", "--format=%P%x00%cI%x00%B", shas[1]).split("\0")
    assert (got.sha, got.parents, got.date, got.message) == (
        shas[1],
        [shas[0]],
        want[1],
        want[2].rstrip("\n"),
    )


def test_a_tree_of_more_files_than_the_cap_is_refused_by_count(tmp_path, monkeypatch):
    monkeypatch.setattr(gitread, "MAX_TREE_FILES", 3)
    repo = tmp_path / "calc"
    shas = make_repo(repo, [("start", {f"f{i}.py": "" for i in range(5)})])
    with pytest.raises(TaskError, match="more than 3 files"):
        gitread.Repo(repo).count_files(shas[0])
    monkeypatch.setattr(gitread, "MAX_TREE_FILES", 5)
    assert gitread.Repo(repo).count_files(shas[0]) == 5


def test_a_malformed_tree_is_not_blamed_on_a_shallow_clone(tmp_path):
    """A tree object git cannot parse (hand-made) gets the fsck hint, not "fetch --unshallow"."""
    repo = tmp_path / "calc"
    make_repo(repo, [("start", BASE)])
    bad = (
        subprocess.run(
            ["git", "hash-object", "-w", "-t", "tree", "--literally", "--stdin"],
            cwd=repo,
            input=b"100644 x\0short",
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .strip()
    )
    commit = git(repo, "commit-tree", bad, "-m", "bad")
    with pytest.raises(TaskError) as e:
        gitread.Repo(repo).count_files(commit)
    assert "fsck" in (e.value.hint or "") and "unshallow" not in (e.value.hint or ""), e.value


def _links_repo(tmp_path: Path, n: int) -> tuple[Path, str]:
    repo = tmp_path / "calc"
    make_repo(repo, [("start", BASE)])
    (repo / "data.bin").write_bytes(b"\0" * 300_000)
    for i in range(n):
        (repo / f"l{i}.bin").symlink_to("data.bin")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "links")
    return repo, git(repo, "rev-parse", "HEAD")


def test_symlink_copies_count_what_they_write(tmp_path, monkeypatch):
    """Each link is written as a copy of its target: 3 links to a 300 KB file write 1.2 MB, over a
    1 MB cap (the link texts alone are a few bytes), so the export is refused and writes no more."""
    monkeypatch.setattr(gitread, "MAX_TREE_BYTES", 1_000_000)
    repo, head = _links_repo(tmp_path, 3)
    with pytest.raises(TaskError, match="once its symlinks are written as copies"):
        gitread.Repo(repo).export(head, tmp_path / "out")
    written = sum(p.stat().st_size for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert written <= 1_000_000
    monkeypatch.setattr(gitread, "MAX_TREE_BYTES", 1_300_000)
    assert gitread.Repo(repo).export(head, tmp_path / "out2").bytes > 1_200_000


def test_a_full_disk_while_writing_a_tree_is_one_clear_error(tmp_path, monkeypatch):
    repo, head = _links_repo(tmp_path, 1)

    def full(*_args, **_kw):
        raise OSError(errno.ENOSPC, "No space left on device")

    reader = gitread.Repo(repo)
    monkeypatch.setattr(gitread.shutil, "copyfile", full)  # the link's copy
    with pytest.raises(TaskError, match="the disk ran full while writing") as e:
        reader.export(head, tmp_path / "out")
    assert "TMPDIR" in e.value.hint


def test_a_full_disk_in_copytree_is_not_a_raw_error_list(tmp_path):
    errors = [(f"/a/{i}", f"/b/{i}", "[Errno 28] No space left on device") for i in range(50)]
    with pytest.raises(TaskError) as e, gitread.writing(tmp_path):
        raise shutil.Error(errors)
    assert "disk ran full" in str(e.value) and "/a/3" not in str(e.value)


@pytest.mark.slow
def test_the_probe_sessions_share_one_time_budget(tmp_path, capsys):
    """A file of 8 tests sleeping 1 s each runs past a 2 s session limit: each test then runs alone on
    both sides (16 sessions, over 20 s with the sessions' start). The default budget, 10 x --timeout
    = 20 s, stops the import with one error naming the budget and --probe-budget; --probe-budget 6
    stops it sooner. The old code had no budget: it ran every session."""
    slow = "import time\n\n" + "".join(
        f"\ndef test_slow{i}():\n    time.sleep(1)\n    assert 0\n" for i in range(8)
    )
    repo = tmp_path / "calc"
    make_repo(
        repo,
        [
            ("start", BASE),
            ("Fix double", {"calc.py": "def double(x):\n    return 2 * x\n", "tests/test_slow.py": slow}),
        ],
    )
    for extra, within in (([], 35), (["--probe-budget", "6"], 15)):
        start = time.monotonic()
        code = main(
            [
                "tasks",
                "import-git",
                str(repo),
                "--commit",
                "HEAD",
                "--timeout",
                "2",
                "--out",
                str(tmp_path / "t"),
                *extra,
            ]
        )
        took = time.monotonic() - start
        out = capsys.readouterr()
        text = out.out + out.err
        assert code != 0 and "ran out of their time budget" in text and "--probe-budget" in text, text
        assert took < within, (took, text)
