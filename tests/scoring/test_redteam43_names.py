"""RT43-2b, closed: the kit's test names (canaries, twins, shadows) follow the session's collection
configuration (:mod:`kit.scoring.naming`) -- ``python_functions`` in ``pytest.ini`` (the reproducer:
``test_redteam43.py``), ``pyproject.toml`` and ``setup.cfg``, a suffix glob, and a configuration no
name the kit can make fits (said, not ``tampered``). The default is unchanged: ``test_`` names."""

from __future__ import annotations

import random
from pathlib import Path

from kit.scoring.inject import inject_folder, inject_own
from kit.scoring.naming import DEFAULT, Collecting, Namer, read_collecting
from kit.scoring.scorer import evaluate
from kit.scoring.session import Canaries
from kit.scoring.sessions import Sessions
from kit.scoring.testcount import count_test_functions
from kit.scoring.usednames import used_test_names
from tests.scoring.test_real_shapes import SHAPES, SOLVED, STUB
from tests.scoring.test_redteam43 import OWN_FUNCTIONS_CONFIGURED, _clean
from tests.tasks.taskmaker import make_task, workspace

EXPECTED = [
    "tests/test_configured.py::HelperTests::check_helper_two",
    "tests/test_configured.py::check_helper_one",
]

PYPROJECT = """[project]
name = "calc"

[tool.pytest.ini_options]
python_functions = ["check_*"]
python_classes = ["*Tests"]
"""
SETUP_CFG = """[metadata]
name = calc

[tool:pytest]
python_functions = check_*
python_classes =
    *Tests
"""


def _evaluate(tmp_path: Path, config: dict[str, str], own: str = OWN_FUNCTIONS_CONFIGURED):
    repo = {"calc.py": STUB, **config, "tests/__init__.py": "", "tests/test_configured.py": own}
    task = make_task(tmp_path / "task", repo, {"test_a.py": SHAPES["pytest-base-class-tests"]}, SOLVED)
    ws = workspace(task, tmp_path)
    return evaluate(task, ws.root, ws)


def test_rt43_2b_python_functions_in_pyproject_toml(tmp_path):
    ev = _evaluate(tmp_path, {"pyproject.toml": PYPROJECT})
    _clean(ev)  # (before: "canary test that must pass (tests/test_configured.py) is missing")
    assert sorted(ev.own.outcomes) == EXPECTED


def test_rt43_2b_python_functions_in_setup_cfg(tmp_path):
    ev = _evaluate(tmp_path, {"setup.cfg": SETUP_CFG})
    _clean(ev)
    assert sorted(ev.own.outcomes) == EXPECTED


OWN_SUFFIXED = """
import calc


def helper_one_check():
    assert calc.helper(1) == 1


def helper_two_check():
    assert calc.helper(2) == 2
"""


def test_rt43_2b_a_suffix_glob_gets_names_with_the_suffix(tmp_path):
    ev = _evaluate(tmp_path, {"pytest.ini": "[pytest]\npython_functions = *_check\n"}, OWN_SUFFIXED)
    _clean(ev)
    assert sorted(ev.own.outcomes) == [f"tests/test_configured.py::helper_{n}_check" for n in ("one", "two")]


OWN_NUMBERED = """
import calc


def helper1():
    assert calc.helper(1) == 1
"""


def test_rt43_2b_a_configuration_no_kit_name_fits_is_said_not_called_tampered(tmp_path):
    ev = _evaluate(tmp_path, {"pytest.ini": "[pytest]\npython_functions = *[0-9]\n"}, OWN_NUMBERED)
    assert not ev.tampered, ev.tampered  # (before: "pytest reported success although a canary ...")
    assert ev.own.outcomes == {"tests/test_configured.py::helper1": (True, "")}
    assert any("own session: python_functions = *[0-9] collects no name" in p for p in ev.problems), (
        ev.problems
    )


def test_rt43_2b_the_canary_file_where_no_module_holds_canaries_follows_the_configuration(tmp_path):
    """Tests in ``check_*.py`` modules (``python_files``): no module the kit injects into, the
    own-tests session runs the kit's canary file -- its functions named ``check_`` too."""
    repo = {
        "calc.py": STUB,
        "pytest.ini": "[pytest]\npython_files = check_*.py\npython_functions = check_*\n",
        "tests/check_calc.py": "import calc\n\n\ndef check_one():\n    assert calc.helper(1) == 1\n",
    }
    task = make_task(tmp_path / "task", repo, {"test_a.py": SHAPES["pytest-base-class-tests"]}, SOLVED)
    ws = workspace(task, tmp_path)
    ev = evaluate(task, ws.root, ws)
    _clean(ev)  # (before: "canary test that must pass (canary file) is missing from the report")
    assert sorted(ev.own.outcomes) == ["tests/check_calc.py::check_one"]


# --------------------------------------------------------------------------- the configuration read


def test_the_configuration_is_read_as_pytest_reads_it(tmp_path):
    def read(name: str, text: str, args: list[str] = ()) -> Collecting:  # type: ignore[assignment]
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return read_collecting(path, list(args))

    assert read_collecting(None) == DEFAULT == read("empty.ini", "[pytest]\n")
    assert read("pyproject.toml", PYPROJECT) == Collecting(("check_*",), ("*Tests",))
    assert read("setup.cfg", SETUP_CFG) == Collecting(("check_*",), ("*Tests",))
    assert read("tox.ini", "[pytest]\npython_functions = check_* test\n").functions == ("check_*", "test")
    assert read("pytest.toml", '[pytest]\npython_functions = ["check_*"]\n').functions == ("check_*",)
    native = '[tool.pytest]\npython_functions = ["check"]\n'
    assert read("pyproject.toml", native).functions == ("check",)
    assert read("setup.cfg", "[pytest]\npython_functions = check_*\n") == DEFAULT  # (pytest: [tool:pytest])
    assert read("pytest.ini", "[pytest]\n", ["-o", "python_functions=check_*"]).functions == ("check_*",)
    assert read("pytest.ini", "[pytest]\n", ["--override-ini=python_classes=*Tests"]).classes == ("*Tests",)


def test_each_session_reads_the_configuration_it_runs_with(tmp_path):
    """The own tests: the repo's file (as ``Sessions.own`` picks it) and the command's ``-o``; the
    acceptance session: the task's laid file (``repo`` layout), else the kit's ini (the defaults)."""
    config = {"pytest.ini": "[pytest]\npython_functions = check_*\n"}
    laid = make_task(
        tmp_path / "laid",
        config,
        {**config, "tests/test_a.py": "def test_a():\n    pass\n"},
        acceptance_layout="repo",
        test_command="python -m pytest -o python_classes=*Tests",
    )
    folder = make_task(tmp_path / "folder", config, {"test_a.py": "def test_a():\n    pass\n"})
    laid_sessions = Sessions(laid, "none", tmp_path / "kit1", 60)
    assert laid_sessions.collecting() == Collecting(("check_*",))
    assert laid_sessions.own_collecting(laid.repo_dir) == Collecting(("check_*",), ("*Tests",))
    assert Sessions(folder, "none", tmp_path / "kit2", 60).collecting() == DEFAULT
    assert Sessions(folder, "none", tmp_path / "kit3", 60).own_collecting(tmp_path) == DEFAULT


def test_the_forms_of_a_name_each_configuration_collects():
    assert DEFAULT.forms() == [("test_", "")]
    assert Collecting(("check_*",)).forms() == [("check_", "")]
    assert Collecting(("check",)).forms() == [("check_", "")]
    assert Collecting(("*_check",)).forms() == [("", "_check")]
    assert Collecting(("test", "check_*")).forms() == [("test_", ""), ("check_", "")]
    assert Collecting(("*[0-9]",)).forms() == [] and Collecting(("*[0-9]",)).unnamed
    assert not DEFAULT.unnamed


def test_the_module_uses_its_own_tests_form_and_helpers_are_never_collected():
    c = Collecting(("test", "check*"), ("Check*",))
    namer = Namer(random.Random(3), set(), c)
    from kit import pyast

    namer.use_module(pyast.parse("def check_one_check():\n    pass\ndef check_two_checks():\n    pass\n"))
    assert namer.form == ("check_", "")
    names = [namer.test_name() for _ in range(30)]
    assert all(n.startswith("check_") for n in names)
    assert namer.test_name(unittest=True).startswith("test_")  # type: ignore[union-attr]
    idents = [namer.ident() for _ in range(30)] + [namer.ident(cls=True) for _ in range(30)]
    assert not any(c.function(n) or c.test_class(n) or "test" in n.lower() for n in idents)


def test_the_canary_files_names_in_a_suffix_form_are_identifiers_it_collects():
    canaries = Canaries.new().in_form("", "_check")
    assert all(n.isidentifier() and n.endswith("_check") for n in canaries.names)
    assert all(Collecting(("*_check",)).function(n) for n in canaries.names)


def test_names_counted_and_avoided_follow_the_configuration(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "__init__.py").write_text(
        "class Mixin:\n    def check_red_blue(self):\n        pass\n"
    )
    (tmp_path / "tests" / "test_x.py").write_text(
        "def check_a():\n    pass\n\nclass AThings:\n    def check_b(self):\n        pass\n"
    )
    (tmp_path / "data-file.txt").write_text("")
    c = Collecting(("check_*",), ("*Things",))
    found = used_test_names(tmp_path, forms=c.forms())
    assert {"check_red_blue", "check_data_file", "check_a", "test_data_file"} <= found
    assert "check_red_blue" not in used_test_names(tmp_path)
    assert count_test_functions(tmp_path, c) == 2 and count_test_functions(tmp_path) == 0


def test_the_default_names_are_unchanged(tmp_path):
    """No configuration: the same names, seed for seed, as with pytest's defaults given."""
    source = SHAPES["pytest-base-class-tests"]
    out = []
    for collecting in (None, DEFAULT):
        folder = tmp_path / str(collecting is None)
        folder.mkdir()
        (folder / "test_a.py").write_text(source, encoding="utf-8")
        kwargs = {} if collecting is None else {"collecting": collecting}
        found = inject_folder(folder, rng=random.Random(7), **kwargs)
        out.append(((folder / "test_a.py").read_text(encoding="utf-8"), found.canaries, found.twins))
        own = inject_own(folder, ["test_a.py"], rng=random.Random(7), **kwargs)
        out.append(own.canaries)
    assert out[0] == out[2] and out[1] == out[3]
    assert all(n.startswith("test_") for n in [*out[0][1], *out[0][2], *out[1]])
