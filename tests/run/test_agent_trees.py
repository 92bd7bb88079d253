"""No file tree an agent makes breaks the kit's own file handling: a run whose agent leaves the
worst tree it can in its clone is scored, diffed and recorded like any other, and redone (a torn run,
``--retry-errors``, ``--redo-changed``, Ctrl-C) from scratch -- never recorded ``error`` for it.

Before :mod:`kit.trees`, ``shutil.rmtree`` raised ``RecursionError`` on the 2,500-deep chain every
time the run was redone, and the snapshot stopped on a path past the system's limit (the run was
``unscored``)."""

from __future__ import annotations

import os
import sys

import pytest

from kit.model import scripted
from kit.model.actions import FINISH, render
from kit.run.runner import run_experiment
from kit.trees import remove_tree, visit
from tests.support.helpers import experiment, run_json, write_profile

#: What the agent runs in its clone (as the sandbox user, in the sandbox): depth, long names, odd
#: bytes, links of every kind, special files, modes that lock the kit out, a sparse file.
MAKE_TREE = r"""
import os, socket, stat
os.makedirs("pkg", exist_ok=True)
fd = os.open(".", os.O_RDONLY)
for i in range(2500):                                       # a 2,500-deep chain
    os.mkdir("d", dir_fd=fd); nxt = os.open("d", os.O_RDONLY, dir_fd=fd); os.close(fd); fd = nxt
os.close(fd)
fd = os.open(".", os.O_RDONLY)
for i in range(40):                                         # paths past PATH_MAX (40 x 255 bytes)
    name = ("L%02d" % i) + "x" * 252
    os.mkdir(name, dir_fd=fd); nxt = os.open(name, os.O_RDONLY, dir_fd=fd); os.close(fd); fd = nxt
    os.close(os.open("f.py", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
os.close(fd)
odd = b"odd/na\nme \xff\xfe -rf \\ \x1b[31m.py"
os.makedirs(b"odd", exist_ok=True)
open(odd, "wb").write(b"print('odd')\n")
os.symlink("loop", "loop"); os.symlink("/", "root_link"); os.symlink("../../../../..", "up_link")
os.symlink("pkg", "dir_link"); os.symlink("missing", "dangling")
os.mkfifo("fifo")
s = socket.socket(socket.AF_UNIX); s.bind("sock")
os.link("textkit.py", "hard_link.py")
with open("sparse.bin", "wb") as fh:
    fh.truncate(400 * 2**20)
os.makedirs("locked/inner"); open("locked/inner/x.py", "w").write("x = 1\n")
os.chmod("locked/inner", 0); os.chmod("locked", 0o100)       # neither listable nor writable
open("unreadable.py", "w").write("y = 2\n"); os.chmod("unreadable.py", 0)
os.makedirs("wide")
for i in range(300):
    open(f"wide/f{i}.txt", "w").write(str(i))
print("tree made")
"""


def _agent(request):
    """First turn: write the tree maker and run it; then finish."""
    mode = request.context.get("action_mode") or "native"
    said = sum("Make the tree." in str(m.get("content") or "") + str(m.get("tool_calls") or "")
               for m in request.messages if m.get("role") == "assistant")  # fmt: skip
    if not said:
        command = f"cat > make_tree.py <<'EOF'\n{MAKE_TREE}\nEOF\npython make_tree.py"
        return render(mode, "run", {"command": command}, "Make the tree.")
    return render(mode, FINISH, {"summary": "Done."}, "Done.")


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="the tree needs Linux")
def test_a_run_whose_agent_made_the_worst_tree_is_scored_recorded_and_redone(tmp_path):
    model = scripted.register(_agent, "worst-tree")
    profile = write_profile(tmp_path, model, "native")
    exp = experiment("trees", profile, ["micro-slugify"], ["vibe"])
    try:
        _run_twice(exp, tmp_path / "results")
    finally:  # (pytest's own clean-up of old temp folders would meet the chain: shutil.rmtree)
        remove_tree(tmp_path / "results")


def _run_twice(exp, results) -> None:
    out = run_experiment(exp, results_dir=results, progress=False)
    (run_dir,) = (out / "runs").iterdir()
    run = run_json(run_dir)
    assert run["outcome"] != "error" and run["outcome"] != "unscored", run["error"]
    assert run["score"]["requirements_total"] == 7, run
    dropped = "\n".join(run["score"]["dropped_files"])
    assert "nested deeper than" in dropped and "path longer than" in dropped and "FIFO" in dropped, dropped
    assert (run_dir / "diff.patch").read_bytes().startswith(b"diff --git"), run["error"]

    (run_dir / "run.json").unlink()  # a torn run: the next `kit run` removes its folder and redoes it
    run_experiment(exp, results_dir=results, progress=False)
    again = run_json(run_dir)
    assert again["outcome"] not in ("error", "unscored"), again["error"]
    assert again["started_at"] != run["started_at"]


def test_remove_tree_and_visit_take_any_depth_and_leave_nothing(tmp_path):
    top = tmp_path / "top"
    top.mkdir()
    fd = os.open(top, os.O_RDONLY)
    for _ in range(3000):
        os.mkdir("d", dir_fd=fd)
        nxt = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = nxt
    os.symlink(str(tmp_path), "out", dir_fd=fd)  # a link out of the tree is removed, not followed
    os.close(fd)
    (tmp_path / "keep.txt").write_text("kept")
    seen = []
    open_before = len(os.listdir("/proc/self/fd"))  # (the session's other tests hold some)
    try:
        visit(top, lambda _fd, name, _st: seen.append(name))
        assert len(seen) == 3001 and len(os.listdir("/proc/self/fd")) - open_before < 8
    finally:
        remove_tree(top)
    assert not top.exists() and (tmp_path / "keep.txt").read_text() == "kept"
