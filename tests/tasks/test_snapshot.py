"""After the agent's last step the clone is data: scoring, the diff and later runs work from a snapshot
taken through the sandbox and from the kit's own base -- never from the clone's git state, never
following what the agent planted. Each test plays the agent's move for real."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from kit.records.recorder import RunRecorder
from kit.sandbox.backends import get_sandbox
from kit.scoring.clean_copy import copy_clean
from kit.scoring.diffstats import diff_stats
from kit.scoring.scorer import score
from kit.tasks.task import load_task
from kit.tasks.workspace import create_workspace, diff
from tests.support.sandboxes import backends

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap needs Linux")


def _solve(task, root: Path) -> None:
    for path in (task.path / "solution").iterdir():
        (root / path.name).write_bytes(path.read_bytes())


def test_rewriting_every_object_in_a_clone_changes_nothing_for_scoring_or_a_later_run(tmp_path):
    """The agent rewrites every git object of its clone in place. Clones share no object with the
    kit's cached base, so the base scoring reads (regressions) and the next run of the task are intact."""
    task = load_task("micro-slugify")
    ws = create_workspace(task, tmp_path / "run1" / "repo")
    before = score(task, ws, claimed_done=False)
    assert before.unscored_reason is None and before.own_tests_total > 0, before  # (flaked once: shows why)
    objects = [p for p in (ws.root / ".git" / "objects").rglob("*") if p.is_file()]
    assert objects
    for path in objects:  # what the agent's shell can do to files it owns
        path.chmod(0o644)
        with open(path, "r+b") as fh:
            fh.write(b"RIGGED-OBJECT")
    after = score(task, ws, claimed_done=False)
    assert after.unscored_reason is None, after.unscored_reason
    assert (after.requirements_failed, after.regressions) == (before.requirements_failed, before.regressions)
    assert after.own_tests_total == before.own_tests_total
    later = create_workspace(task, tmp_path / "run2" / "repo")
    assert later.base_commit == ws.base_commit and diff(later) == ""
    _solve(task, later.root)
    solved = score(task, later, claimed_done=True)
    assert solved.unscored_reason is None and solved.requirements_failed == 0 and solved.regressions == 0


def test_a_rigged_git_folder_neither_stops_the_diff_nor_runs_anything(tmp_path):
    """.git rigged every way the old refusals knew (a link inside it, a commondir, a nested repository
    with its own filter): the diff comes from the snapshot, so it is made, and nothing runs."""
    ws = create_workspace(load_task("micro-slugify"), tmp_path / "run" / "repo")
    marker = tmp_path / "RAN"
    attack = (
        f"git config filter.evil.clean 'touch {marker}'; echo '* filter=evil' > .gitattributes; "
        f"ln -sf {tmp_path} .git/logs-elsewhere; echo {tmp_path} > .git/commondir; "
        f"mkdir -p sub && cd sub && git init -q && git config filter.evil.clean 'touch {marker}' && "
        "echo '* filter=evil' > .gitattributes && echo nested > n.txt && cd .. && echo changed >> README.md; echo done"
    )
    assert "done" in get_sandbox("bwrap").run(attack, ws.root, writable=True, timeout_s=30).output
    patch = diff(ws)
    assert "+changed" in patch and "sub/n.txt" in patch and "+nested" in patch
    assert diff_stats(ws)[0] == 4  # README.md, .gitattributes, sub/.gitattributes, sub/n.txt
    assert not marker.exists()


def test_the_diff_covers_ignored_and_undecodable_files_and_is_written_as_is(tmp_path):
    """An ignored file is scored, so it is in the diff; a text file that is not UTF-8 no longer makes
    the diff fail (diff.patch keeps its bytes)."""
    ws = create_workspace(load_task("micro-slugify"), tmp_path / "run" / "repo")
    (ws.root / ".gitignore").write_text("build/\n*.log\n")
    (ws.root / "build").mkdir()
    (ws.root / "build" / "helper.py").write_text("HELPER = 1\n")
    (ws.root / "notes.log").write_bytes(b"caf\xe9 latin-1 text\n")
    patch = diff(ws)
    assert "build/helper.py" in patch and "+HELPER = 1" in patch and "notes.log" in patch
    recorder = RunRecorder(tmp_path / "records", "r1")
    from kit.tasks.snapshot import snapshot
    from kit.tasks.workspace import snapshot_diff

    with snapshot(ws.root, ws.sandbox) as snap:
        recorder.write_diff(snapshot_diff(ws, snap, "--binary"))
    assert b"+caf\xe9 latin-1 text" in (tmp_path / "records" / "diff.patch").read_bytes()


@pytest.mark.parametrize("backend", backends())
def test_links_and_special_files_stay_behind_and_sparse_files_stay_sparse(tmp_path, backend):
    """The snapshot follows no link out of the clone, copies no FIFO, drops a file over its cap without
    reading it, and neither it nor the scoring copy turns a sparse file dense -- taken in any sandbox."""
    ws = create_workspace(load_task("micro-slugify"), tmp_path / "run" / "repo", sandbox=backend)
    secret = tmp_path / "host-secret.txt"
    secret.write_text("HOST-SECRET\n")
    (ws.root / "leak.txt").symlink_to(secret)
    os.mkfifo(ws.root / "pipe")
    with open(ws.root / "sparse.bin", "wb") as fh:
        fh.truncate(48 * 1024 * 1024)  # under the per-file cap, almost nothing allocated
    with open(ws.root / "huge.bin", "wb") as fh:
        fh.truncate(50 * 1024**3)
    copy_clean(ws.root, tmp_path / "scoring")
    copied = (tmp_path / "scoring" / "sparse.bin").stat()
    assert copied.st_size == 48 * 1024 * 1024 and copied.st_blocks * 512 < 1024 * 1024
    from kit.tasks.snapshot import snapshot

    with snapshot(ws.root, ws.sandbox) as snap:
        names = {p.name for p in snap.tree.rglob("*")}
        assert "leak.txt" not in names and "pipe" not in names and "huge.bin" not in names
        assert all(not p.is_symlink() for p in snap.tree.rglob("*"))
        dropped = " ".join(snap.dropped)
        assert "leak.txt" in dropped and "pipe" in dropped and "huge.bin" in dropped
        assert (snap.tree / "sparse.bin").stat().st_size == 48 * 1024 * 1024
        assert (snap.tree / "sparse.bin").stat().st_blocks * 512 < 1024 * 1024
        copy_clean(snap.tree, tmp_path / "scoring-2")
    copied = (tmp_path / "scoring-2" / "sparse.bin").stat()
    assert copied.st_size == 48 * 1024 * 1024 and copied.st_blocks * 512 < 1024 * 1024
    assert "HOST-SECRET" not in diff(ws)


def test_no_oversized_agent_file_is_parsed_in_the_kits_process(tmp_path, monkeypatch):
    """A huge test file the agent leaves is never parsed by the kit itself (parsing costs hundreds of
    times a file's size in memory); pytest, in the sandbox, still runs it."""
    import ast

    import kit.tasks.requirements as requirements

    parsed: list[int] = []
    real_parse = ast.parse
    monkeypatch.setattr(
        requirements.ast, "parse", lambda src, *a, **k: parsed.append(len(src)) or real_parse(src, *a, **k)
    )
    task = load_task("micro-slugify")
    ws = create_workspace(task, tmp_path / "run" / "repo")
    body = "def test_padding():\n    assert True\n" + "# padding\n" * 400_000  # ~4 MB
    (ws.root / "tests" / "test_huge.py").write_text(body)
    result = score(task, ws, claimed_done=False)
    assert result.unscored_reason is None, result.unscored_reason
    from kit.scoring.testcount import MAX_PARSE_BYTES

    assert parsed and max(parsed) <= MAX_PARSE_BYTES, max(parsed)


def test_a_run_whose_agent_rigged_git_and_left_odd_files_is_scored_with_its_whole_diff(tmp_path):
    """End to end: the agent plants a nested repository, wipes its clone's objects, writes an ignored
    file and a non-UTF-8 one, and says done. The run is scored (not ``error``), and diff.patch is
    written with every file scoring copied."""
    from kit.model import scripted
    from kit.model.actions import FINISH, render
    from kit.run.runner import run_experiment
    from tests.support.helpers import experiment, run_json, write_profile

    rig = (
        "printf 'caf\\351 au lait\\n' > menu.txt; echo 'build/' > .gitignore; mkdir -p build nested; "
        "echo 'BUILT = 1' > build/out.py; cd nested && git init -q && echo n > n.txt && cd ..; "
        "rm -rf .git/objects/*; echo rigged"
    )

    def policy(request):
        step = sum(m.get("role") == "assistant" for m in request.messages)
        mode = request.context["action_mode"]
        if step == 0:
            return render(mode, "run", {"command": rig}, "rig")
        return render(mode, FINISH, {"summary": "done"}, "done")

    profile = write_profile(tmp_path, scripted.register(policy), "native")
    out = run_experiment(
        experiment("rigged", profile, ["micro-slugify"], ["vibe"]),
        results_dir=tmp_path / "results",
        progress=False,
    )
    (run_dir,) = (out / "runs").iterdir()
    run = run_json(run_dir)
    assert run["outcome"] == "done", run["error"]
    assert not run["error"], run["error"]
    assert run["score"]["unscored_reason"] is None and run["score"]["requirements_total"] == 7
    patch = (run_dir / "diff.patch").read_bytes()
    assert b"build/out.py" in patch and b"+BUILT = 1" in patch and b"nested/n.txt" in patch
    assert b"+caf\xe9 au lait" in patch


def test_the_snapshot_caps_count_and_bytes_keeping_what_is_nearest_the_top(tmp_path):
    """Over a cap, the snapshot keeps the entries nearest the top of the clone (breadth first) and
    lists every one it dropped; a file over the total is dropped, not truncated."""
    from kit.tasks.snapshot import Limits, snapshot

    ws = create_workspace(load_task("micro-slugify"), tmp_path / "run" / "repo")
    deep = ws.root / "venv" / "lib" / "site"
    deep.mkdir(parents=True)
    for i in range(30):
        (deep / f"m{i}.py").write_text("X = 1\n")
    (ws.root / "zz_big.bin").write_bytes(b"x" * 4096)
    limits = Limits(files=12, total_bytes=3000)
    with snapshot(ws.root, ws.sandbox, limits) as snap:
        kept = {p.relative_to(snap.tree).as_posix() for p in snap.tree.rglob("*") if p.is_file()}
        assert {"textkit.py", "README.md", "tests/test_textkit.py"} <= kept
        assert sum(k.startswith("venv/lib/site/") for k in kept) < 30
        dropped = "\n".join(snap.dropped)
        assert "zz_big.bin: over the snapshot's total of 3000 bytes" in dropped
        assert "over the snapshot's 12 entries" in dropped and snap.files <= 12


def test_a_compiled_extension_module_is_dropped_and_noted(tmp_path):
    """A compiled ``textkit.cpython-*.so`` would be imported ahead of textkit.py by the tests and show
    in the diff only as a binary blob: the tasks are pure Python, so the snapshot drops it, and says so."""
    from kit.tasks.snapshot import snapshot

    ws = create_workspace(load_task("micro-slugify"), tmp_path / "run" / "repo")
    names = ["textkit.cpython-311-x86_64-linux-gnu.so", "textkit.abi3.so", "helper.PYD", "libx.dylib"]
    for name in names:
        (ws.root / name).write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 64)
    with snapshot(ws.root, ws.sandbox) as snap:
        kept = {p.name for p in snap.tree.rglob("*")}
        assert "textkit.py" in kept and not kept & set(names)
        for name in names:
            assert f"{name}: compiled extension module: not scored" in snap.dropped


def test_names_that_are_not_utf8_are_noted_as_escapes(tmp_path):
    """A dropped entry whose name is not UTF-8 (Python reads its bytes as lone surrogates) is noted
    with its bytes escaped, so the note can be written to run.json."""
    from kit.tasks.snapshot import snapshot

    ws = create_workspace(load_task("micro-slugify"), tmp_path / "run" / "repo")
    root = os.fsencode(ws.root)
    os.mkfifo(root + b"/\xff\xfe-fifo")
    os.symlink("/etc/passwd", root + b"/\xffshadowlink")
    with snapshot(ws.root, ws.sandbox) as snap:
        for note in snap.dropped:
            note.encode("utf-8")  # no lone surrogate
        dropped = "\n".join(snap.dropped)
        assert "\\xff\\xfe-fifo: FIFO" in dropped and "\\xffshadowlink: symlink" in dropped


def test_many_dropped_entries_with_long_names_are_noted_cut_and_the_snapshot_is_taken(tmp_path):
    """The attacker's way to an ``unscored`` run (which --retry-errors redoes): 205 links out of the
    clone, 14 folders deep under 250-byte non-UTF-8 names, so the notes outgrew the kit's cap. (A
    path over ``Limits.path_bytes`` is dropped now, so the links sit 3 such folders deep.)"""
    from kit.tasks.snapshot import MAX_NOTES, snapshot

    ws = create_workspace(load_task("micro-slugify"), tmp_path / "run" / "repo")
    fd = os.open(ws.root, os.O_RDONLY)
    for _ in range(3):
        os.mkdir(b"\xff" * 250, dir_fd=fd)
        fd, old = os.open(b"\xff" * 250, os.O_RDONLY, dir_fd=fd), fd
        os.close(old)
    for i in range(205):
        os.symlink("/etc/passwd", b"l%03d" % i, dir_fd=fd)
    os.close(fd)
    with snapshot(ws.root, ws.sandbox) as snap:
        assert len(snap.dropped) == MAX_NOTES + 1 and snap.dropped[-1].startswith("... more")
        assert all(len(note) < 2000 for note in snap.dropped) and "...\\xff" in snap.dropped[0]


def test_a_long_chain_of_links_is_left_behind_and_the_run_is_scored(tmp_path):
    """1,500 links, each to the one before (attack-iso-2 F2): resolving one recursed once per link
    (``os.path.realpath``), the snapshot script died of RecursionError and the run was recorded
    ``unscored`` -- a failing run out of every mean. The kernel resolves them now (40 links at most)."""
    task = load_task("micro-slugify")
    ws = create_workspace(task, tmp_path / "run" / "repo")
    (ws.root / "f.txt").write_text("x\n")
    os.symlink("f.txt", ws.root / "l0")
    for i in range(1, 1500):
        os.symlink(f"l{i - 1}", ws.root / f"l{i}")
    os.symlink("/proc/self/ns/net", ws.root / "ns")  # the kernel resolves it to "net:[...]" (F2b)
    os.symlink("/proc/self/fd/1", ws.root / "out")
    s = score(task, ws, claimed_done=True)
    assert s.unscored_reason is None, s.unscored_reason
    assert s.requirements_total == 7 and s.requirements_failed == 7
    assert "l1000: symlink pointing outside" in "\n".join(s.dropped_files)  # noted, not followed
    assert diff(ws).startswith("diff --git")
