"""What the code under test writes while it is scored cannot break or outgrow the kit's scratch space
(:func:`kit.sandbox.quota.scratch`): a folder chain deeper than any recursion made in the scoring copy
is dropped with it (the copies were a plain temporary folder removed by ``shutil.rmtree``: the run was
recorded ``unscored``, "RecursionError", out of every mean), and writes stop at the space's cap
instead of filling the disk."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from kit.sandbox import quota
from kit.tasks.scoring.scorer import score
from kit.tasks.task import load_task
from kit.tasks.workspace import create_workspace

#: appended to the reference solution: runs when a scoring session imports the module
DEEP_CHAIN = """
import os as _os
if _os.path.basename(_os.getcwd()) in ("acc", "own"):
    _fd = _os.open(".", _os.O_RDONLY)
    for _i in range(3000):
        _os.mkdir("d", dir_fd=_fd)
        _next = _os.open("d", _os.O_RDONLY, dir_fd=_fd)
        _os.close(_fd)
        _fd = _next
    _os.close(_fd)
"""


def _leftovers() -> set[str]:
    return {p for p in os.listdir(tempfile.gettempdir()) if p.startswith("orchbench-score-")}


def test_a_deep_tree_made_during_scoring_is_scored_and_leaves_nothing(tmp_path):
    task = load_task("micro-slugify")
    ws = create_workspace(task, tmp_path / "clone")
    solution = (task.path / "solution" / "textkit.py").read_text()
    (ws.root / "textkit.py").write_text(solution + DEEP_CHAIN)
    before = _leftovers()
    s = score(task, ws, claimed_done=True)
    assert s.unscored_reason is None, s.unscored_reason
    assert s.requirements_total == 7 and s.requirements_failed == 0, s
    assert _leftovers() <= before


@pytest.mark.skipif(quota.quota_mechanism() != "loop", reason="the capped scratch space needs root on Linux")
def test_the_scratch_space_is_capped_and_dropped_whole(tmp_path):
    with quota.scratch("orchbench-score-", max_bytes=8 * 2**20, max_files=500) as folder:
        with pytest.raises(OSError) as full, open(folder / "blob", "wb") as fh:
            for _ in range(16):
                fh.write(b"x" * 2**20)
        assert "No space left" in str(full.value)
        (folder / "blob").unlink()
        with pytest.raises(OSError):
            for i in range(600):
                (folder / f"f{i}").touch()
        kept = Path(folder)
    assert not kept.exists()
