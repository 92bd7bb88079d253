"""Red team 44: the kit's test names follow the session's pytest collection configuration
(``python_functions`` / ``python_classes`` read from the configuration file and the test command's
``-o``: :mod:`kit.scoring.naming`). Attacked without reading the change. Each test asserts the SAFE
outcome; a trick that works is marked ``xfail(strict=True)`` and says what happens instead.

Worked (an honest run ``tampered``, or the scoring held), all closed since: 1 ``addopts = -o
python_functions=...``; 2 an empty ``python_functions =``; 5 many globs (``Collecting.forms()`` was
quadratic); 8 a ``[DEFAULT]`` section; 9 a byte-order mark, ``[tool.pytest]`` in ``pytest.toml``. No
effect: 1b, 2b, 3 (flagged unverified), 4, 6, 7 (the agent's configuration is never the session's).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kit.scoring.scorer import evaluate
from tests.scoring.test_real_shapes import SHAPES, SOLVED, STUB
from tests.scoring.test_redteam43 import OWN_FUNCTIONS_CONFIGURED
from tests.tasks.taskmaker import make_task, workspace

ROOT = Path(__file__).resolve().parents[2]
HIDDEN = {"test_a.py": SHAPES["pytest-base-class-tests"]}


def _clean(ev) -> None:
    assert not ev.tampered, ev.tampered
    assert not ev.problems, ev.problems
    assert not ev.failed_requirements and not ev.gamed, ev.results
    assert not ev.suspicious, ev.suspicious


def _run(tmp_path, repo, hidden=HIDDEN, solved=True, **fields):
    task = make_task(tmp_path / "task", repo, hidden, SOLVED, **fields)
    ws = workspace(task, tmp_path, solved=solved)
    return task, ws, evaluate(task, ws.root, ws)


#: a project that collects ``check_*`` functions (its ``test_data`` is a helper)
CHECKS = OWN_FUNCTIONS_CONFIGURED.replace("class HelperTests:", "class TestHelper:")
assert CHECKS != OWN_FUNCTIONS_CONFIGURED
CHECKS_RUN = ["tests/test_checks.py::TestHelper::check_helper_two", "tests/test_checks.py::check_helper_one"]


def _checks(config: dict[str, str]) -> dict[str, str]:
    return {"calc.py": STUB, "tests/__init__.py": "", "tests/test_checks.py": CHECKS, **config}


# --------------------------------------------------------------------------- 1: -o in addopts


@pytest.mark.parametrize("opt", ["-o python_functions=check_*", "--override-ini=python_functions=check_*"])
def test_rt44_1_override_ini_in_addopts(tmp_path, opt):
    _, _, ev = _run(tmp_path, _checks({"pytest.ini": f"[pytest]\naddopts = {opt}\n"}))
    _clean(ev)
    assert sorted(ev.own.outcomes) == CHECKS_RUN


def test_rt44_1b_the_test_commands_own_o_is_followed(tmp_path):
    """The same option in the task's test command: followed (no effect)."""
    repo = _checks({"pytest.ini": "[pytest]\n"})
    _, _, ev = _run(tmp_path, repo, test_command="python -m pytest -q -o python_functions=check_*")
    _clean(ev)
    assert sorted(ev.own.outcomes) == CHECKS_RUN


# --------------------------------------------------------------------------- 2: unittest projects

#: unittest's loader collects a TestCase's ``test*`` methods whatever ``python_functions`` says
UNITTEST_ONLY = """
import unittest

import calc


def test_helper_value():
    return 3


class HelperTest(unittest.TestCase):
    def test_helper_one(self):
        self.assertEqual(calc.helper(test_helper_value()), 3)

    def test_helper_two(self):
        self.assertEqual(calc.helper(2), 2)
"""
UNITTEST_RUN = [
    "tests/test_unit.py::HelperTest::test_helper_one",
    "tests/test_unit.py::HelperTest::test_helper_two",
]


def test_rt44_2_an_empty_python_functions_in_a_unittest_project(tmp_path):
    """``python_functions =`` (no plain function is a test: the project's are unittest classes)."""
    repo = {"calc.py": STUB, "tests/__init__.py": "", "tests/test_unit.py": UNITTEST_ONLY}
    _, _, ev = _run(tmp_path, {**repo, "pytest.ini": "[pytest]\npython_functions =\n"})
    _clean(ev)
    assert sorted(ev.own.outcomes) == UNITTEST_RUN


@pytest.mark.parametrize("glob", ["check_*", "*_should", "[c]heck_*", "Test*"])
def test_rt44_2b_a_check_star_project_with_unittest_classes(tmp_path, glob):
    """``python_functions = check_*`` beside unittest classes, whose ``test*`` methods are collected
    (and a canary named ``check_*`` in such a class would not be)."""
    repo = {"calc.py": STUB, "tests/__init__.py": "", "tests/test_unit.py": UNITTEST_ONLY}
    _, _, ev = _run(tmp_path, {**repo, "pytest.ini": f"[pytest]\npython_functions = {glob}\n"})
    _clean(ev)
    assert sorted(ev.own.outcomes) == UNITTEST_RUN


# --------------------------------------------------------------------------- 3: globs the kit cannot name


@pytest.mark.parametrize("glob", ["[c]heck_*", "ch?ck_*"])
def test_rt44_3_a_glob_the_kit_cannot_name_is_a_problem_not_a_silent_pass(tmp_path, glob):
    """A repo's author wanting a session without canaries: the run is flagged (a problem)."""
    _, _, ev = _run(tmp_path, _checks({"pytest.ini": f"[pytest]\npython_functions = {glob}\n"}))
    assert not ev.tampered, ev.tampered
    assert any("unverified" in p for p in ev.problems), ev.problems
    assert sorted(ev.own.outcomes) == CHECKS_RUN


# --------------------------------------------------------------------------- 4: configurations read alike


@pytest.mark.parametrize(
    "name, text",
    [
        ("pyproject.toml", "[tool.pytest]\npython_functions = ['check_*']\n"),
        ("pyproject.toml", "[tool.pytest.ini_options]\npython_functions = 'check_*'\n"),
        ("setup.cfg", "[tool:pytest]\npython_functions = check_*\n"),
        ("tox.ini", "[tox]\n[pytest]\npython_functions = check_*  # the project\n"),
        ("pytest.ini", "[pytest]\npython_functions =\n    check_*\n    verify_*\n"),
    ],
)
def test_rt44_4_each_configuration_file_and_form(tmp_path, name, text):
    _, _, ev = _run(tmp_path, _checks({name: text}))
    _clean(ev)
    assert sorted(ev.own.outcomes) == CHECKS_RUN


# --------------------------------------------------------------------------- 5: many globs

#: the kit's process reads the forms of a configuration of 20,000 globs (160 kB, under the 1 MB it
#: parses) -- a repository's author's pytest.ini; the scoring calls it several times, in no sandbox
MANY_GLOBS = textwrap.dedent(
    """
    import pathlib, sys, tempfile
    from kit.scoring.naming import read_collecting
    d = pathlib.Path(tempfile.mkdtemp())
    globs = " ".join(f"f{i}_*" for i in range(20000))
    (d / "pytest.ini").write_text(f"[pytest]\\npython_functions = test_* {globs}\\n")
    read_collecting(d / "pytest.ini", []).forms()
    """
)


def test_rt44_5_a_configuration_of_many_globs_does_not_hold_the_scoring(tmp_path):
    try:
        subprocess.run([sys.executable, "-c", MANY_GLOBS], timeout=10, check=True, cwd=ROOT)
    except subprocess.TimeoutExpired:
        pytest.fail("forms() of 20,000 globs took over 10 s")


# --------------------------------------------------------------------------- 6: the hidden tests' own config

HIDDEN_CHECKS = """
import calc


class TestDouble:
    def check_double_two(self):
        assert calc.double(2) == 4


def check_parse_five():
    assert calc.parse(" 5 ") == 5
"""


@pytest.mark.parametrize("ini", ["python_functions = check_*", "addopts = -o python_functions=check_*"])
def test_rt44_6_repo_layout_hidden_tests_named_in_the_tasks_form(tmp_path, ini):
    """Hidden ``check_*`` tests under the task's laid configuration: the requirements are read as
    ``test_*`` whatever it says -- the task has none, and says so (a problem, never a silent score).
    (With ``addopts`` the session's canaries are also missing, as in RT44-1.)"""
    repo = {"calc.py": STUB, "tests/__init__.py": "", "pytest.ini": "[pytest]\n"}
    hidden = {"tests/test_hidden.py": HIDDEN_CHECKS, "pytest.ini": f"[pytest]\n{ini}\n"}
    _, _, ev = _run(tmp_path, repo, hidden, acceptance_layout="repo")
    assert any(p.startswith("no acceptance tests found") for p in ev.problems), ev.problems
    assert not ev.results


# --------------------------------------------------------------------------- 7: the agent's configuration

BROKEN = SOLVED["calc.py"].replace("def helper(n):\n    return n", "def helper(n):\n    return -n")


@pytest.mark.parametrize(
    "name, text",
    [
        ("pytest.ini", "[pytest]\npython_functions = nothing_*\npython_classes = Nothing\n"),
        ("tests/pytest.ini", "[pytest]\npython_functions = [n]othing_*\n"),
        ("pyproject.toml", "[tool.pytest]\npython_functions = ['[n]othing_*']\n"),
        (
            "tests/conftest.py",
            "def pytest_configure(config):\n    config._inicache['python_functions'] = ['x']\n",
        ),
    ],
)
def test_rt44_7_a_configuration_the_agent_adds_is_not_the_sessions(tmp_path, name, text):
    """The agent breaks ``helper`` (a regression of the repo's own tests) and adds a configuration that
    collects none of them, or only a glob the kit cannot name: the base's is used (no effect)."""
    repo = _checks({"pytest.ini": "[pytest]\npython_functions = check_*\n"})
    task = make_task(tmp_path / "task", repo, HIDDEN, SOLVED)
    ws = workspace(task, tmp_path)
    (ws.root / "calc.py").write_text(BROKEN, encoding="utf-8")
    (ws.root / name).write_text(text, encoding="utf-8")
    ev = evaluate(task, ws.root, ws)
    assert not ev.problems and not ev.tampered, (ev.problems, ev.tampered)
    assert sorted(ev.regressed) == CHECKS_RUN


# --------------------------------------------------------------------------- 8: an ini's DEFAULT section

PLAIN = "import calc\n\n\ndef test_helper_one():\n    assert calc.helper(1) == 1\n"


@pytest.mark.parametrize("name, section", [("setup.cfg", "tool:pytest"), ("tox.ini", "pytest")])
def test_rt44_8_a_default_section_pytest_does_not_read(tmp_path, name, section):
    text = f"[DEFAULT]\npython_functions = check_*\n\n[{section}]\nminversion = 7\n"
    repo = {"calc.py": STUB, "tests/__init__.py": "", "tests/test_plain.py": PLAIN, name: text}
    _, _, ev = _run(tmp_path, repo)
    _clean(ev)
    assert sorted(ev.own.outcomes) == ["tests/test_plain.py::test_helper_one"]


# --------------------------------------------------------------------------- 9: files pytest reads otherwise

#: (file, text, the project's tests): pytest reads each one otherwise than the kit's reader
MISREAD = {
    # a byte-order mark (an editor's): iniconfig reads past it, configparser finds no section
    "bom-ini": ("pytest.ini", "\ufeff[pytest]\npython_functions = check_*\n", "checks"),
    "bom-cfg": ("setup.cfg", "\ufeff[tool:pytest]\npython_functions = check_*\n", "checks"),
    # pytest.toml's table is [pytest]: [tool.pytest] there is not pytest's
    "toml-tool-only": ("pytest.toml", "[tool.pytest]\npython_functions = ['check_*']\n", "plain"),
    "toml-both": (
        "pytest.toml",
        "[pytest]\npython_functions = ['check_*']\n[tool.pytest]\nx = 1\n",
        "checks",
    ),
}


@pytest.mark.parametrize("case", sorted(MISREAD))
def test_rt44_9_configuration_files_pytest_reads_otherwise(tmp_path, case):
    name, text, tests = MISREAD[case]
    if tests == "checks":
        repo, run = _checks({name: text}), CHECKS_RUN
    else:
        repo = {"calc.py": STUB, "tests/__init__.py": "", "tests/test_plain.py": PLAIN, name: text}
        run = ["tests/test_plain.py::test_helper_one"]
    _, _, ev = _run(tmp_path, repo)
    _clean(ev)
    assert sorted(ev.own.outcomes) == run


def test_rt44_5b_over_the_cap_the_session_is_unverified_and_says_why():
    from kit.scoring.naming import MAX_PATTERNS, Collecting, read_collecting

    many = Collecting(tuple(f"f{i}_*" for i in range(MAX_PATTERNS + 1)))
    assert many.forms()  # (a Collecting made by hand is not refused)
    config = " ".join(f"f{i}_*" for i in range(MAX_PATTERNS + 1))
    for args in (["-o", f"python_functions={config}"], ["-o", f"python_classes=X{'x' * 300}"]):
        refused = read_collecting(None, args)
        assert not refused.forms()
        assert "over what the kit reads" in refused.unnamed and "unverified" in refused.unnamed, (
            refused.unnamed
        )


#: (file, text): each read by the kit as pytest 9 reads it (RT44-8/9), errors included
PARITY = [
    ("pytest.ini", "\ufeff[pytest]\npython_functions = check_*\n"),
    ("pytest.ini", "[DEFAULT]\npython_functions = check_*\n[pytest]\nx = 1\n"),
    ("pytest.ini", "[other]\nx = 1\n"),
    ("pytest.ini", "[pytest]\npython_functions = a  # b\n  c\n"),
    ("pytest.ini", "[pytest]\nx = 1\nx = 2\n"),
    ("pytest.ini", "no section = 1\n"),
    ("setup.cfg", "\ufeff[tool:pytest]\npython_functions = check_*\n"),
    ("setup.cfg", "[DEFAULT]\npython_functions = check_*\n[tool:pytest]\nminversion = 7\n"),
    ("setup.cfg", "[metadata]\nname = x\n"),
    ("tox.ini", "[DEFAULT]\npython_functions = check_*\n[pytest]\nminversion = 7\n"),
    ("tox.ini", "[tox]\nenvlist = py\n"),
    ("pytest.toml", "[tool.pytest]\npython_functions = ['check_*']\n"),
    ("pytest.toml", "[pytest]\npython_functions = ['check_*']\n[tool.pytest]\nx = 1\n"),
    ("pytest.toml", "python_functions = ['check_*']\n"),
    ("pyproject.toml", "[tool.pytest]\npython_functions = ['check_*']\n"),
    ("pyproject.toml", "[tool.pytest.ini_options]\npython_functions = 'check_*'\nminversion = 7\n"),
    ("pyproject.toml", "[pytest]\npython_functions = ['check_*']\n"),
    ("pyproject.toml", "[tool.pytest]\nx = 1\n[tool.pytest.ini_options]\ny = '2'\n"),
    ("pyproject.toml", "\ufeff[tool.pytest]\nx = 1\n"),
    ("custom.toml", "[pytest]\npython_functions = ['check_*']\n"),
    ("custom.toml", "[tool.pytest]\npython_functions = ['check_*']\n"),
    ("custom.toml", "[pytest]\nx = 1\n[tool.pytest]\ny = 1\n"),
    ("custom.ini", "\ufeff[pytest]\nx = 1\n"),
]


@pytest.mark.parametrize("name, text", PARITY)
def test_rt44_9b_the_kits_reader_is_pytests(tmp_path, name, text):
    """The options the kit reads and the file it takes as the configuration are pytest's own."""
    from _pytest.config.findpaths import load_config_dict_from_file, locate_config

    from kit.scoring.clean_copy import pytest_config_file
    from kit.scoring.naming import read_config

    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    try:
        loaded = load_config_dict_from_file(path)
        expected = {k: v.value for k, v in (loaded or {}).items()}
    except BaseException:  # (a usage error, or pytest's fail(): the session stops)
        loaded, expected = "stops", {}
    assert read_config(path) == expected
    if name.startswith("custom"):
        return
    try:
        located = locate_config(tmp_path, [tmp_path])[1]
    except BaseException:
        located = path  # (pytest stops on it: the kit takes it, so the session stops as well)
    assert pytest_config_file(tmp_path) == located, loaded


@pytest.mark.parametrize(
    "addopts, args, functions",
    [
        ("-o python_functions=check_*", [], ("check_*",)),
        ("-q --override-ini=python_functions=check_* -ra", [], ("check_*",)),
        ("--override-ini python_functions=check_*", [], ("check_*",)),
        ("-opython_functions=check_*", [], ("check_*",)),
        ("-o python_functions=check_*", ["-o", "python_functions=verify_*"], ("verify_*",)),
        ("-o python_functions=a_* -o python_functions=b_*", [], ("b_*",)),
        ("-o 'python_functions=a_* b_*'", [], ("a_*", "b_*")),
        ("-k python_functions=check_*", [], ("test",)),
    ],
)
def test_rt44_1c_addopts_overrides_as_pytest_applies_them(tmp_path, addopts, args, functions):
    from kit.scoring.naming import read_collecting

    (tmp_path / "pytest.ini").write_text(f"[pytest]\naddopts = {addopts}\n", encoding="utf-8")
    assert read_collecting(tmp_path / "pytest.ini", args).functions == functions


@pytest.mark.parametrize(
    "name, text",
    [
        ("pytest.ini", "[pytest]\npython_functions =\n"),
        ("pyproject.toml", "[tool.pytest]\npython_functions = []\n"),
    ],
)
def test_rt44_2c_an_empty_python_functions_without_unittest_classes_is_unverified(tmp_path, name, text):
    """No TestCase to hold a canary: the session runs without them and says so (pytest runs no test)."""
    _, _, ev = _run(tmp_path, _checks({name: text}))
    assert not ev.tampered, ev.tampered
    assert any("is empty" in p and "unverified" in p for p in ev.problems), ev.problems
    assert not ev.own.outcomes


@pytest.mark.parametrize(
    "args",
    [
        ["-qo", "python_functions=check_*"],
        ["-sxo", "python_functions=check_*"],
        ["-vvvqopython_functions=check_*"],
        ["-qo=x=y"],
        ["-o=python_functions=check_*"],
        ["-m", "slow", "-qo", "python_functions=check_*"],
        ["-kfoo", "-o", "a=b"],
        ["-ro", "python_functions=check_*"],
        ["-W", "ignore", "-o", "w=1", "--override-ini=w=2"],
        ["tests/", "-o", "z=1", "--", "-o", "python_functions=check_*"],
        ["-p", "no:x", "-qvo", "python_classes=Check"],
    ],
)
def test_the_o_options_are_read_as_pytests_parser_reads_them(args):
    """Combined short flags (``-qo name=value``) in ``addopts`` were not read, nor the end of the
    options (``--``): the kit's names then followed another configuration than the session's."""
    from _pytest.config import get_config

    from kit.scoring.naming import _overrides

    try:
        given = get_config()._parser.parse_known_args(args).override_ini or []
    except pytest.UsageError:
        pytest.skip("pytest refuses these arguments: the session stops")
    assert _overrides(args) == {k: v for k, sep, v in (t.partition("=") for t in given) if sep}
