"""``acceptance_layout: repo``: the hidden tests run at their own paths in the scoring copy, with the
task's conftests, pytest configuration and data -- never the agent's; ``own_tests_deselect``."""

import pytest

from kit.importers.validate import validate_task
from kit.scoring.scorer import score
from tests.tasks.taskmaker import make_task, workspace

#: a src layout: only the task's configuration (pythonpath = src) makes ``calc`` importable; it also
#: declares the marker the hidden tests use under --strict-markers
CONFIG = """
[pytest]
pythonpath = src
addopts = --strict-markers
markers =
    arithmetic: a sum
testpaths = tests
"""
CALC = """
def add(a, b):
    return a + b


def total(numbers):
    raise NotImplementedError
"""
CONFTEST = """
import pytest


@pytest.fixture
def numbers():
    return [1, 2, 3, 4]
"""
OWN = """
import calc


def test_add(numbers):
    assert calc.add(2, 3) == 5


def test_old_total_is_missing():  # the change modifies it: its base version fails with the solution
    with __import__("pytest").raises(NotImplementedError):
        calc.total([1])
"""
HIDDEN = """
from pathlib import Path

import pytest

import calc

CASES = Path(__file__).parent / "data" / "cases.txt"


@pytest.mark.severity("major")
@pytest.mark.arithmetic
def test_total_of_the_fixture(numbers):
    assert calc.total(numbers) == 10


@pytest.mark.severity("minor")
def test_total_of_the_data_file():
    for line in CASES.read_text().splitlines():
        *parts, expected = line.split()
        assert calc.total([int(p) for p in parts]) == int(expected)
"""
HIDDEN_MORE = """
import pytest

import calc


@pytest.mark.severity("minor")
def test_total_of_nothing():
    assert calc.total([]) == 0
"""
SOLVED = CALC.replace("raise NotImplementedError", "return sum(numbers)")


def _task(tmp_path, **fields):
    repo = {"pytest.ini": CONFIG, "src/calc/__init__.py": CALC, "tests/conftest.py": CONFTEST}
    repo["tests/test_calc.py"] = OWN
    acceptance = {"pytest.ini": CONFIG, "tests/conftest.py": CONFTEST, "tests/test_calc.py": HIDDEN}
    acceptance["tests/test_more.py"] = HIDDEN_MORE
    acceptance["tests/data/cases.txt"] = "1 2 3\n5 5 10\n"
    fields.setdefault("own_tests_deselect", ["tests/test_calc.py::test_old_total_is_missing"])
    return make_task(
        tmp_path / "repo-layout",
        repo,
        acceptance,
        {"src/calc/__init__.py": SOLVED},
        acceptance_layout="repo",
        **fields,
    )


def test_a_repo_layout_task_validates_with_its_conftest_configuration_and_data(tmp_path):
    # before: the hidden module ran from the kit's folder without the task's conftest (fixture
    # 'numbers' not found), configuration (calc not importable) or data: it could not validate
    task = _task(tmp_path)
    report = validate_task(task)
    assert report.ok, report.problems
    s = score(task, workspace(task, tmp_path), claimed_done=True)
    assert s.requirements_failed == 0 and s.regressions == 0 and not s.suspicious and not s.tampered, s
    assert s.own_tests_total == 1  # the deselected base test is not run


def test_own_tests_deselect_keeps_a_modified_test_from_counting_as_a_regression(tmp_path):
    # before: own_tests_deselect was not honoured -- the base version of the modified test "regressed"
    task = _task(tmp_path, own_tests_deselect=[])
    s = score(task, workspace(task, tmp_path), claimed_done=True)
    assert s.regressed_tests == ["tests/test_calc.py::test_old_total_is_missing"]
    task = _task(tmp_path / "again")
    s = score(task, workspace(task, tmp_path / "again"), claimed_done=True)
    assert s.regressions == 0


RIG = """
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
"""


def _rig_root_conftest(root):
    (root / "conftest.py").write_text(RIG)


def _rig_tests_conftest(root):
    (root / "tests" / "conftest.py").write_text(RIG + "\n\n" + CONFTEST)


def _rig_a_sub_conftest(root):
    (root / "tests" / "data").mkdir(exist_ok=True)
    (root / "tests" / "data" / "conftest.py").write_text(RIG)
    (root / "tests" / "__init__.py").write_text("")


def _rig_the_configuration(root):
    (root / "rig.py").write_text(RIG)
    (root / "pytest.ini").write_text("[pytest]\npythonpath = src .\naddopts = -p rig\n")


def _rig_the_data(root):
    (root / "tests" / "data").mkdir(exist_ok=True)
    (root / "tests" / "data" / "cases.txt").write_text("")  # no case: the data test would pass


def _rig_the_test_module(root):
    (root / "tests" / "test_calc.py").write_text(
        "import pytest\n\n\n@pytest.mark.severity('major')\ndef test_total_of_the_fixture():\n    pass\n\n\n"
        "@pytest.mark.severity('minor')\ndef test_total_of_the_data_file():\n    pass\n"
    )


def _rewrite_a_laid_module_at_import(root):
    # the code under test, imported by the first hidden module, rewrites the second one on disk
    # before pytest collects it
    calc = root / "src" / "calc" / "__init__.py"
    forged = "import pytest\n\n\n@pytest.mark.severity('minor')\ndef test_total_of_nothing():\n    pass\n"
    calc.write_text(
        "import pathlib\n"
        "try:\n"
        f"    pathlib.Path(__file__).parents[2].joinpath('tests', 'test_more.py').write_text({forged!r})\n"
        "except OSError:\n"
        "    pass\n" + calc.read_text()
    )


@pytest.mark.parametrize(
    "rig",
    [
        _rig_root_conftest,
        _rig_tests_conftest,
        _rig_a_sub_conftest,
        _rig_the_configuration,
        _rig_the_data,
        _rig_the_test_module,
        _rewrite_a_laid_module_at_import,
    ],
)
def test_the_agents_conftests_configuration_data_and_test_files_do_not_count(tmp_path, rig):
    task = _task(tmp_path)
    ws = workspace(task, tmp_path, solved=False)
    rig(ws.root)
    s = score(task, ws, claimed_done=True)
    assert s.requirements_failed == s.requirements_total == 3, s
    assert not s.tampered, s.tamper_evidence


def test_the_code_under_test_reading_the_laid_hidden_files_is_suspicious(tmp_path):
    task = _task(tmp_path)
    ws = workspace(task, tmp_path)
    calc = ws.root / "src" / "calc" / "__init__.py"
    calc.write_text(
        calc.read_text().replace(
            "return sum(numbers)",
            "import pathlib\n    pathlib.Path(__file__).parents[2].joinpath('tests', 'data', 'cases.txt').read_text()\n"
            "    return sum(numbers)",
        )
    )
    s = score(task, ws, claimed_done=True)
    assert any("opened the hidden tests" in e and "cases.txt" in e for e in s.suspicious_evidence), s
    assert s.requirements_failed == 0


def test_the_hidden_tests_own_conftest_and_data_reads_are_not_suspicious(tmp_path):
    # the test reads its data file itself, its conftest is test code: neither is the repo's doing
    task = _task(tmp_path)
    s = score(task, workspace(task, tmp_path), claimed_done=True)
    assert not s.suspicious, s.suspicious_evidence


def test_own_tests_deselect_leaves_out_exactly_what_it_names(tmp_path):
    # pytest's --deselect takes any prefix: "::test_f" would leave out "::test_foo" too
    own = """
import pytest


def test_f():
    assert True


def test_foo():
    assert True


@pytest.mark.parametrize("n", [1, 2])
def test_p(n):
    assert n


class TestC:
    def test_m(self):
        assert True
"""
    hidden = '@__import__("pytest").mark.severity("minor")\ndef test_x():\n    import lib\n    assert lib.X\n'
    task = make_task(
        tmp_path / "desel",
        {"lib.py": "X = 0\n", "tests/test_own.py": own},
        {"test_x.py": hidden},
        {"lib.py": "X = 1\n"},
        own_tests_deselect=[
            "tests/test_own.py::test_f",
            "tests/test_own.py::test_p",
            "tests/test_own.py::TestC",
        ],
    )
    s = score(task, workspace(task, tmp_path), claimed_done=True)
    assert s.own_tests_total == 1 and s.regressions == 0 and s.requirements_failed == 0, s
