"""Scoring agrees with real test suites: multiprocessing works in the scoring sandbox, introspection the
repo's own code does at the base is not the agent's, and a task's package imports from the tree
under test even when the kit's environment has one of that name."""

import pytest

from kit.importers.validate import validate_task
from kit.sandbox.backends import get_sandbox
from kit.scoring.scorer import score
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


# --------------------------------------------------------------------------- the project's own introspection

INTRO_LIB = '''
import inspect
import multiprocessing
import sys

NAME = sys._getframe(0).f_globals["__name__"]  # introspection at import


def caller_name():
    """The name of the function that called the caller: the project's own introspection."""
    return sys._getframe(2).f_code.co_name


def who_am_i():
    return caller_name()


def stack_depth():
    return len(inspect.stack())


def squares(numbers):
    with multiprocessing.Pool(2) as pool:
        return pool.map(abs, numbers)


def greet(name):
    raise NotImplementedError
'''
INTRO_OWN = """
import inspect

import lib


def test_who_am_i():
    assert lib.who_am_i() == "test_who_am_i"


def test_walks_its_own_stack():
    assert inspect.currentframe().f_code.co_name == "test_walks_its_own_stack" and lib.stack_depth() > 1
"""
INTRO_HIDDEN = """
import pytest

import lib


@pytest.mark.severity("major")
def test_greet():
    assert lib.greet("ann") == "hello ann"
    assert lib.who_am_i() == "test_greet"
    assert lib.squares([-1, 2]) == [1, 2]
"""


def _intro_task(tmp_path):
    return make_task(
        tmp_path / "intro",
        {"lib.py": INTRO_LIB, "tests/test_lib.py": INTRO_OWN},
        {"test_greet.py": INTRO_HIDDEN},
        {"lib.py": INTRO_LIB.replace("raise NotImplementedError", 'return "hello " + name')},
    )


def test_introspection_the_projects_own_code_does_at_the_base_is_not_suspicious(tmp_path):
    # before: "lib.py:13 called sys._getframe", "lib.py:25 started a process", "own tests:
    # tests/test_lib.py:9 called sys._getframe" ... on every run, the reference solution's too
    task = _intro_task(tmp_path)
    report = validate_task(task)
    assert report.ok, report.problems
    s = score(task, workspace(task, tmp_path), claimed_done=True)
    assert not s.suspicious and s.requirements_failed == 0 and s.regressions == 0, s


def _line_of(path, text):
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


@pytest.mark.parametrize(
    "change, evidence",
    [
        # the agent's code reaching the test's frame through the project's helper
        ('return "hello " + name', 'return "hello " + name + caller_name()[:0]'),
        # the agent changing the project's helper itself
        ("return sys._getframe(2).f_code.co_name", "return sys._getframe(2).f_code.co_name[:99]"),
        # the agent's code starting processes through the project's code
        ('return "hello " + name', 'return "hello " + name + str(squares([]))[:0]'),
    ],
)
def test_the_agents_code_reaching_introspection_through_base_code_is_still_suspicious(
    tmp_path, change, evidence
):
    task = _intro_task(tmp_path)
    ws = workspace(task, tmp_path)
    lib = ws.root / "lib.py"
    lib.write_text(lib.read_text().replace(change, evidence))
    s = score(task, ws, claimed_done=True)
    line = _line_of(lib, evidence)
    assert any(e.startswith(f"lib.py:{line} ") for e in s.suspicious_evidence), s.suspicious_evidence


def test_the_own_tests_copys_base_code_is_derived_without_reading_it_again(tmp_path):
    from kit.scoring.basecode import base_code, with_base_tests
    from kit.scoring.clean_copy import use_base_tests
    from tests.tasks.taskmaker import write_tree

    base, copy = tmp_path / "base", tmp_path / "copy"
    write_tree(base, {"lib.py": INTRO_LIB, "tests/test_lib.py": INTRO_OWN, "tests/helper.py": "X = 1\n"})
    write_tree(copy, {"lib.py": INTRO_LIB + "\nY = 2\n", "tests/test_lib.py": "", "tests/new_test.py": ""})
    derived = with_base_tests(base_code(copy, base), base)
    use_base_tests(copy, base)
    assert derived == base_code(copy, base)
    assert derived["same"] == ["tests/helper.py", "tests/test_lib.py"] and list(derived["changed"]) == [
        "lib.py"
    ]
