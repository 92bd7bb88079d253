"""Red-team round 39: hostile repositories and task folders that got through the importer's defences
(reproducers under /tmp/rt39-repro/). Each test fails on the code it was written against and should
pass once the defect is fixed; none of them loosens a limit."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from kit.app.cli import main
from tests.importers.test_hostile_repo import BASE, FIX  # the calc repository both red teams use
from tests.support.gitrepos import git, make_repo


def _mktree(repo: Path, listing: str) -> str:
    out = subprocess.run(
        ["git", "mktree"], cwd=repo, input=listing, capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


def _commit(repo: Path, tree: str, parent: str, message: str) -> str:
    return git(repo, "commit-tree", tree, "-p", parent, "-m", message)


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((int(line.split()[1]) for line in f if line.startswith("VmRSS:")), 0)
    except OSError:
        return 0


def _git_children(root: int) -> list[int]:
    """git processes below ``root`` (by /proc's parent links)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    out = []
    for pid in parents:
        p = pid
        while p in parents and p != root and p > 1:
            p = parents[p]
        if p == root and pid != root:
            try:
                if Path(f"/proc/{pid}/comm").read_text().strip() == "git":
                    out.append(pid)
            except OSError:
                pass
    return out


@pytest.mark.slow
def test_a_tree_bomb_is_refused_by_count_within_bounded_memory(tmp_path, capsys):
    """A head tree of 10^9 paths made of one subtree object repeated (a few KB of objects): before the
    file count is checked the importer runs ``git show -s`` on the commit, which still diffs the whole
    tree, its memory growing ~100 MB/s until the kit's 120 s git time limit (2 GB in 20 s here). The
    import must refuse it by count (``MAX_TREE_FILES``) with git below 1 GB. A watchdog stops any git
    process of this test past 1 GB, so a failing run stays small."""
    repo = tmp_path / "calc"
    shas = make_repo(repo, [("start", BASE), ("Fix double", FIX)])
    blob = git(repo, "hash-object", "-w", "calc.py")
    tree = _mktree(repo, f"100644 blob {blob}\t{'f' * 250}\n")
    for _ in range(9):
        tree = _mktree(repo, "".join(f"040000 tree {tree}\t{i}{'d' * 240}\n" for i in range(10)))
    head_tree = git(repo, "rev-parse", f"{shas[1]}^{{tree}}")
    listing = git(repo, "ls-tree", head_tree) + f"\n040000 tree {tree}\tbomb\n"
    commit = _commit(repo, _mktree(repo, listing), shas[0], "Fix double")

    peak, stop = [0], threading.Event()

    def watch() -> None:
        while not stop.is_set():
            for pid in _git_children(os.getpid()):
                rss = _rss_kb(pid)
                peak[0] = max(peak[0], rss)
                if rss > 1_000_000:
                    os.kill(pid, 9)
            time.sleep(0.2)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    start = time.monotonic()
    try:
        code = main(["tasks", "import-git", str(repo), "--commit", commit, "--out", str(tmp_path / "tasks")])
    finally:
        stop.set()
        watcher.join()
    out = capsys.readouterr()
    assert peak[0] < 1_000_000, f"a git process of the import reached {peak[0] // 1024} MB"
    assert code != 0 and "more than 50000 files" in out.out + out.err, out
    assert time.monotonic() - start < 60


def test_a_test_module_that_is_a_symlink_out_of_the_tree_is_one_clear_error(tmp_path, capsys):
    """tests/test_link.py -> a host file: the import ends with a raw OSError naming the kit's temporary
    folder ("No such file or directory: /tmp/orchbench-import-XXX/head/tests/test_link.py")."""
    secret = tmp_path / "secret.txt"
    secret.write_text("rt39-secret-hostfile-canary\n")
    repo = tmp_path / "calc"
    shas = make_repo(repo, [("start", BASE)])
    for rel, text in FIX.items():
        (repo / rel).write_text(text)
    (repo / "tests" / "test_link.py").symlink_to(secret)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "Fix double")
    head = git(repo, "rev-parse", "HEAD")
    assert head != shas[0]
    code = main(["tasks", "import-git", str(repo), "--commit", head, "--out", str(tmp_path / "tasks")])
    out = capsys.readouterr()
    text = out.out + out.err
    if code == 0:  # a fix may also keep the link as content (never read through) and import the rest
        assert "rt39-secret-hostfile-canary" not in "".join(
            p.read_text(errors="replace") for p in (tmp_path / "tasks").rglob("*") if p.is_file()
        )
        return
    assert "orchbench-import" not in text, text
    assert "tests/test_link.py" in text and "Traceback" not in text, text


def _task_folder(tmp_path: Path, capsys) -> Path:
    repo = tmp_path / "calc"
    shas = make_repo(repo, [("start", BASE), ("Fix double", FIX)])
    code = main(["tasks", "import-git", str(repo), "--commit", shas[1], "--out", str(tmp_path / "tasks")])
    capsys.readouterr()
    assert code == 0
    (task,) = (tmp_path / "tasks").iterdir()
    return task


@pytest.mark.slow
def test_audit_does_not_pass_a_task_folder_validate_refuses(tmp_path, capsys):
    """acceptance/tests is a link out of the folder: validate refuses it, audit says "✓ no gaps" (exit 0)."""
    task = _task_folder(tmp_path, capsys)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "test_out.py").write_text(
        "from calc import double\n\n\ndef test_x():\n    assert double(2) == 4\n"
    )
    shutil.rmtree(task / "acceptance" / "tests")
    (task / "acceptance" / "tests").symlink_to(outside)
    assert main(["tasks", "validate", str(task)]) != 0
    capsys.readouterr()
    code = main(["tasks", "audit", str(task)])
    out = capsys.readouterr()
    assert code != 0 or "refused" in out.out + out.err, out


@pytest.mark.slow
def test_validate_names_a_special_file_in_repo_as_one_clear_error(tmp_path, capsys):
    """A named pipe in repo/: validate printed the repr of shutil.Error (a list of tuples naming the
    kit's cache path) and left a ``*.tmp-*`` folder in the bases cache."""
    task = _task_folder(tmp_path, capsys)
    os.mkfifo(task / "repo" / "pipe.txt")
    yaml_path = task / "task.yaml"  # another id: a base cached by the import's own validation is not reused
    yaml_path.write_text(yaml_path.read_text().replace(f"id: {task.name}", "id: calc-with-a-pipe", 1))
    code = main(["tasks", "validate", str(task)])
    out = capsys.readouterr()
    text = out.out + out.err
    assert "[('" not in text and "Traceback" not in text, text
    if code != 0:  # refusing it is right; so would be leaving the special file out, saying so
        assert "repo/pipe.txt" in text, text


def test_symlinks_to_one_big_file_count_against_the_tree_size_cap(tmp_path, monkeypatch):
    """A link is counted as its link text (<= 4096 bytes) and then written as a full copy of its
    target: one blob and N links to it write N times the blob, past ``MAX_TREE_BYTES`` (a 60 MB blob
    and 30 links: 1.8 GB per export, 5 GB of disk at the peak of an import; 49,000 links: terabytes).
    Here the cap is lowered to 20 MB and the blob is 5 MB, 10 links: 55 MB must not be written."""
    from kit.errors import TaskError
    from kit.importers.git import gitread

    monkeypatch.setattr(gitread, "MAX_TREE_BYTES", 20 * 1024 * 1024)
    repo = tmp_path / "calc"
    make_repo(repo, [("start", BASE)])
    (repo / "data.bin").write_bytes(b"\0" * (5 * 1024 * 1024))
    (repo / "links").mkdir()
    for i in range(10):
        (repo / "links" / f"l{i}.bin").symlink_to("../data.bin")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "links")
    out = tmp_path / "out"
    try:
        gitread.Repo(repo).export(git(repo, "rev-parse", "HEAD"), out)
    except TaskError:
        return  # refused by size: right
    written = sum(p.stat().st_size for p in out.rglob("*") if p.is_file() and not p.is_symlink())
    assert written <= gitread.MAX_TREE_BYTES, f"{written // 2**20} MB written under a {20} MB cap"


@pytest.mark.slow
@pytest.mark.parametrize(
    "odd", ["notes\u2028calc_extra.py", "calc_extra.py "], ids=["u2028", "trailing-space"]
)
def test_a_deleted_file_whose_name_holds_a_line_separator_deletes_only_itself(tmp_path, capsys, odd):
    """The change deletes 'notes\\u2028calc_extra.py' (path_problem lets U+2028 through); DELETED.txt
    holds it as one line, but ``deleted_lines`` reads it with ``str.splitlines()``, which also splits
    at U+2028 / U+0085 -- so the reference solution, as the kit lays it, deletes calc_extra.py, a file
    the change kept, and the own test that imports it is dropped as "does not collect". Likewise
    'calc_extra.py ' (a trailing space): each line is stripped."""
    import yaml

    from kit.tasks.task import deleted_lines, load_task

    base = {**BASE, "calc_extra.py": "X = 1\n", odd: "old notes\n"}
    base["tests/test_extra.py"] = "from calc_extra import X\n\n\ndef test_extra():\n    assert X == 1\n"
    repo = tmp_path / "calc"
    shas = make_repo(repo, [("start", base), ("Fix double", {**FIX, odd: None})])
    code = main(["tasks", "import-git", str(repo), "--commit", shas[1], "--out", str(tmp_path / "tasks")])
    out = capsys.readouterr()
    if code != 0:  # refusing such a path is right too
        assert "Traceback" not in out.out + out.err
        return
    (task_dir,) = (tmp_path / "tasks").iterdir()
    assert deleted_lines(load_task(task_dir)) == [odd]
    assert "test_extra.py" not in yaml.safe_load((task_dir / "task.yaml").read_text())["test_command"]
