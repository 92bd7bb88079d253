"""``exclude_tests`` (task.yaml, a suite manifest's import entry): a hidden test left out on purpose, with
why, is no requirement and is never run as a hidden test; ``kit tasks list`` shows it."""

import pytest
from pydantic import ValidationError

from kit.importers.validate import requirements_line, unknown_exclusions, validate_task
from kit.tasks.requirements import read_requirements
from kit.tasks.suite_manifest import SuiteImport
from tests.tasks.taskmaker import make_task

LIB = "def triple(x):\n    raise NotImplementedError\n"
OWN = "import lib\n\n\ndef test_lib_imports():\n    assert lib.triple\n"
HIDDEN = """
import random

import pytest

import lib


@pytest.mark.severity("major")
def test_triple():
    assert lib.triple(2) == 6


class TestPinned:
    @pytest.mark.severity("minor")
    def test_pinned_to_the_seed(self):
        random.seed(0)
        assert lib.triple(random.randrange(10)) == 99  # incidental: no solution could pass it
"""
PINNED = "tests_hidden/test_lib.py::TestPinned::test_pinned_to_the_seed"


@pytest.fixture
def task(tmp_path):
    return make_task(
        tmp_path / "pinned",
        {"lib.py": LIB, "test_own.py": OWN},
        {"tests_hidden/test_lib.py": HIDDEN},
        {"lib.py": "def triple(x):\n    return 3 * x\n"},
        exclude_tests=[{"test": PINNED, "reason": "pinned to random.seed(0): incidental output"}],
    )


def test_an_excluded_test_is_no_requirement_and_never_runs(task):
    assert task.excluded == {PINNED}
    reqs, problems = read_requirements(task.acceptance_dir, task.excluded)
    assert problems == [] and [r.key for r in reqs] == ["tests_hidden/test_lib.py::test_triple"]
    assert requirements_line(task).startswith("1 requirements (1 major)")
    report = validate_task(task)  # the pinned test fails with the solution: run, it would refuse the task
    assert report.ok, report.problems


def test_each_excluded_test_needs_a_reason():
    with pytest.raises(ValidationError, match="reason"):
        SuiteImport.model_validate(
            {"id": "t", "project": "p", "commit": "a" * 40, "exclude_tests": [{"test": PINNED}]}
        )


def test_an_exclusion_naming_no_test_is_a_validation_problem(tmp_path):
    task = make_task(
        tmp_path / "typo",
        {"lib.py": LIB, "test_own.py": OWN},
        {"tests_hidden/test_lib.py": HIDDEN},
        {"lib.py": "def triple(x):\n    return 3 * x\n"},
        exclude_tests=[{"test": "tests_hidden/test_lib.py::test_pined", "reason": "a typo"}],
    )
    assert unknown_exclusions(task) == [
        "exclude_tests: tests_hidden/test_lib.py::test_pined names no test of acceptance/ "
        "(give a node id such as test_x.py::test_y)"
    ]
