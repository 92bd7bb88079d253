"""Scoring agrees with real test suites: multiprocessing works in the scoring sandbox, introspection the
repo's own code does at the base is not the agent's, and a task's package imports from the tree
under test even when the kit's environment has one of that name."""

from kit.sandbox.backends import get_sandbox
from kit.tasks.scoring.scorer import score
from kit.tasks.validate import validate_task
from tests.tasks.taskmaker import make_task, workspace

MP_LIB = """
def square(x):
    raise NotImplementedError
"""
MP_OWN = """
import multiprocessing


def _put(q):
    q.put("hello")


def test_a_queue_and_a_process():
    q = multiprocessing.Queue()
    p = multiprocessing.Process(target=_put, args=(q,))
    p.start()
    assert q.get(timeout=20) == "hello"
    p.join()
"""
MP_HIDDEN = """
import multiprocessing

import pytest

import lib


@pytest.mark.severity("major")
def test_square_in_a_pool():
    with multiprocessing.Pool(2) as pool:
        assert pool.map(lib.square, [1, 2, 3]) == [1, 4, 9]


@pytest.mark.severity("minor")
def test_square_through_a_queue():
    q = multiprocessing.Queue()
    q.put(lib.square(4))
    assert q.get(timeout=20) == 16
"""


def test_multiprocessing_works_in_the_scoring_sandbox(tmp_path):
    # before: PermissionError on SemLock (bwrap's /dev/shm belonged to root, mode 0755)
    task = make_task(
        tmp_path / "mp",
        {"lib.py": MP_LIB, "tests/test_mp.py": MP_OWN},
        {"test_square.py": MP_HIDDEN},
        {"lib.py": MP_LIB.replace("raise NotImplementedError", "return x * x")},
    )
    report = validate_task(task, sandbox="bwrap")
    assert report.ok, report.problems
    s = score(task, workspace(task, tmp_path), claimed_done=True, sandbox="bwrap")
    assert s.requirements_failed == 0 and s.regressions == 0 and not s.suspicious, s


def test_the_sandboxes_shared_memory_is_private_and_writable(tmp_path):
    box = get_sandbox("bwrap")
    (tmp_path / "w").mkdir()
    res = box.run(
        ["sh", "-c", "ls -A /dev/shm; touch /dev/shm/mine && echo made"],
        tmp_path / "w",
        writable=True,
        timeout_s=30,
    )
    assert res.output.split() == ["made"], res.output  # empty (nothing of the host's), writable
    again = box.run(["ls", "-A", "/dev/shm"], tmp_path / "w", writable=True, timeout_s=30)
    assert again.output.strip() == ""  # nothing left from the command before
