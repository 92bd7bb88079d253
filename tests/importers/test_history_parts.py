"""The importer's parts on their own (kit/importers/git/): test functions by ast, a module cut down,
tolerant imports, the severity rule, the prompt, the files laid with the hidden tests, and reading
an untrusted repository."""

from __future__ import annotations

import ast
import os
import sys
import textwrap

import pytest

from kit.errors import TaskError
from kit.importers.exercism.marks import SeverityMap
from kit.importers.git import layout, severity
from kit.importers.git.gitread import Commit, Repo
from kit.importers.git.plan import make_plan, resolve_change
from kit.importers.git.prompt import build_prompt, changed_names, commit_text, interface
from kit.importers.git.testfiles import (
    changed_tests,
    is_test_module,
    is_test_side,
    parse,
    reduce_module,
    tolerant_imports,
)
from kit.importers.git.testfiles import (
    test_functions as functions_of,
)
from tests.support.gitrepos import CALC_COMMITS, git, make_repo


def _tree(src: str) -> ast.Module:
    return ast.parse(textwrap.dedent(src))


# --------------------------------------------------------------------------- test side, test functions


def test_test_side_and_test_modules():
    assert is_test_module("tests/test_x.py") and is_test_module("pkg/x_test.py")
    assert not is_test_module("tests/conftest.py") and not is_test_module("tests/helpers.py")
    assert is_test_side("tests/helpers.py") and is_test_side("tests/data/a.json")
    assert is_test_side("src/pkg/conftest.py") and not is_test_side("pkg/core.py")
    assert is_test_module("checks/check_x.py", ["checks/check_*.py"])
    assert not is_test_module("tests/test_x.py", ["checks/check_*.py"])


BASE = """
import unittest

def helper():
    return 1

def test_same():
    assert helper() == 1

@pytest.mark.parametrize("x", [1, 2])
def test_param(x):
    assert x

def test_gone():
    pass

class ThingTest(unittest.TestCase):
    def setUp(self):
        self.x = 1

    def test_method(self):
        self.assertEqual(self.x, 1)
"""
HEAD = """
import unittest

def helper():
    return 1  # a comment changes nothing


def test_same():
    assert helper() == 1

@pytest.mark.parametrize("x", [1, 2, 3])
def test_param(x):
    assert x

class ThingTest(unittest.TestCase):
    def setUp(self):
        self.x = 1

    def test_method(self):
        self.assertEqual(self.x, 2)

    def test_new_method(self):
        self.assertTrue(self.x)

def test_new():
    assert True
"""


def test_changed_tests_by_ast():
    added, changed, removed = changed_tests(_tree(BASE), _tree(HEAD))
    assert added == ["ThingTest::test_new_method", "test_new"]
    assert changed == ["test_param", "ThingTest::test_method"]  # a decorator counts; a comment does not
    assert removed == ["test_gone"]
    assert changed_tests(None, _tree(HEAD))[0] == list(functions_of(_tree(HEAD)))


def test_reduce_module_keeps_what_the_tests_need():
    src = textwrap.dedent("""
        import pytest

        CASES = [1, 2]


        @pytest.fixture
        def thing():
            return 3


        def test_a(thing):
            assert thing == 3


        @pytest.mark.slow
        def test_b():
            assert False


        class BaseTests:
            def helper(self):
                return 1

            def test_inherited(self):
                assert self.helper()


        class TestDerived(BaseTests):
            def test_kept(self):
                assert self.helper() == 1

            def test_dropped(self):
                assert False


        class TestAlone:
            def test_x(self):
                assert False
    """)
    out = reduce_module(src, {"test_a", "TestDerived::test_kept"})
    assert set(functions_of(ast.parse(out))) == {"test_a", "TestDerived::test_kept"}
    assert "def thing()" in out and "CASES = [1, 2]" in out and "def helper(self)" in out
    assert "class BaseTests" in out and "TestAlone" not in out and "@pytest.mark.slow" not in out
    emptied = reduce_module(
        "class TestOnly:\n    def test_a(self):\n        pass\n\n\nclass TestK(TestOnly):\n    def test_b(self):\n        pass\n",
        {"TestK::test_b"},
    )
    ns: dict = {}
    exec(compile(emptied, "m", "exec"), ns)  # the emptied base class still parses and runs
    # a test the module runs at import (boltons' test_listutils.py: `test_barrel_list()`) goes with its call
    at_import = reduce_module(
        "def test_a():\n    pass\n\n\ndef test_b():\n    pass\n\n\ntest_a()\n", {"test_b"}
    )
    exec(compile(at_import, "m", "exec"), {})  # NameError: name 'test_a' is not defined, before
    assert [n for n in vars(ns["TestK"]) if n.startswith("test")] == ["test_b"]


def test_tolerant_imports_fail_only_the_tests_using_a_missing_name(tmp_path, monkeypatch):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("def old():\n    return 1\n")
    src = '"""Doc."""\nfrom __future__ import annotations\nimport os\nfrom pkg import old, new as renamed\n\n\ndef test_old():\n    assert old() == 1\n'
    out = tolerant_imports(src, {"pkg"})
    assert out.startswith('"""Doc."""\nfrom __future__ import annotations\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    ns: dict = {}
    exec(compile(out, "test_mod", "exec"), ns)
    assert ns["old"]() == 1
    with pytest.raises(ImportError, match="cannot import name 'new' from 'pkg'"):
        ns["renamed"](1)
    with pytest.raises(ImportError):
        ns["renamed"].attribute  # noqa: B018
    assert not hasattr(ns["renamed"], "__test__")  # pytest's probing sees a plain object
    assert tolerant_imports("from os import path\n", {"pkg"}) == "from os import path\n"
    sys.modules.pop("pkg", None)


# --------------------------------------------------------------------------- severity


@pytest.mark.parametrize(
    ("message", "timed_out", "kind"),
    [
        ("timeout: ran past 10 s", True, "hang"),
        ("MemoryError", False, "memory"),
        ("ImportError: cannot import name 'div' from 'calc'", False, "missing"),
        ("NameError: name 'div' is not defined", False, "missing"),
        ("AttributeError: module 'calc' has no attribute 'div'", False, "missing"),
        ("AttributeError: 'Stack' object has no attribute 'peek'", False, "missing"),
        ("AttributeError: 'NoneType' object has no attribute 'x'", False, "crash"),
        ("assert 7 == 6", False, "wrong"),
        ("AssertionError: 7 != 6", False, "wrong"),
        ("Failed: DID NOT RAISE <class 'ValueError'>", False, "wrong"),
        ("sealed check failed: got 7, expected 6", False, "wrong"),
        ("TypeError: unsupported operand", False, "crash"),
        ("ZeroDivisionError: division by zero", False, "crash"),
    ],
)
def test_failure_kind(message, timed_out, kind):
    assert severity.failure_kind(message, timed_out) == kind


def test_rule_and_mapping():
    [check_value, check_error] = _tree("""
        def test_value():
            assert f(1) == 2

        def test_error():
            with pytest.raises(ValueError, match="bad"):
                f(-1)
    """).body
    assert severity.rule_severity("wrong", check_value) == "major"
    assert severity.rule_severity("missing", check_value) == "major"
    assert severity.rule_severity("crash", check_value) == "critical"
    assert severity.rule_severity("crash", check_error) == "minor"  # error-path checks only
    assert severity.rule_severity("hang", check_error) == "critical"  # a runaway beats the shape
    smap = SeverityMap.model_validate(
        {
            "rules": [
                {"test": "test_x\\.py::test_value$", "severity": "minor"},
                {"exercise": "other-*", "test": ".*", "severity": "critical"},
            ]
        }
    )
    assert severity.severity(smap, "calc-1", "tests/test_x.py::test_value", "crash", check_value) == "minor"
    assert severity.severity(smap, "calc-1", "tests/test_x.py::test_error", "wrong", check_error) == "minor"
    assert (
        severity.severity(smap, "other-1", "tests/test_x.py::test_error", "wrong", check_error) == "critical"
    )


# --------------------------------------------------------------------------- prompt


def test_commit_text_and_interface_never_show_test_bodies():
    one = Commit(
        "a" * 40,
        ["b" * 40],
        "2024-01-01T00:00:00+00:00",
        "Fix mul\n\nIt added one.\n\nSigned-off-by: Ann <a@b>",
    )
    assert commit_text([one]) == "Fix mul\n\nIt added one."
    merge = Commit("c" * 40, ["a" * 40, "d" * 40], "", "Merge pull request #3 from ann/div")
    two = Commit("e" * 40, ["a" * 40], "", "Add div")
    text = commit_text([one, merge, two])
    assert "- Fix mul" in text and "- Add div" in text and "Merge pull request" not in text
    base = "def mul(a, b):\n    return a * b + 1\n\n\ndef keep():\n    return 1\n\n\ndef _private():\n    return 2\n"
    head = "def mul(a, b):\n    return a * b\n\n\ndef keep():\n    return 1\n\n\ndef div(a, b, *, exact=False):\n    return a / b\n\n\ndef _private():\n    return 3\n\n\nclass Box:\n    def open(self, force=False):\n        return force\n"
    names = changed_names({"calc/ops.py": (base, head)})
    assert {n.qualname for n in names} == {"mul", "div", "Box", "Box.open"}
    tests = _tree("def test_div():\n    assert div(6, 3) == 2.0 and mul(2, 3) == 6\n").body
    prompt = build_prompt([one], interface(names, tests))
    assert "`div(a, b, *, exact=False)` in `calc.ops` (new)" in prompt
    assert "`mul(a, b)` in `calc.ops` (changed)" in prompt
    assert "keep" not in prompt and "_private" not in prompt and "Box" not in prompt
    assert "2.0" not in prompt and "== 6" not in prompt and "test_div" not in prompt


def test_a_range_commit_text_is_capped_like_one_message_and_says_so():
    """61 subjects of 10,000 characters: each cut at MAX_SUBJECT_CHARS, the list at
    MAX_MESSAGE_CHARS, both cuts said (the old text took 60 subjects whole: 600,000 characters)."""
    from kit.importers.git.prompt import MAX_MESSAGE_CHARS, MAX_SUBJECT_CHARS

    commits = [Commit(f"{i:040x}", ["f" * 40], "", f"S{i} " + "w" * 10_000) for i in range(61)]
    text = commit_text(commits)
    assert len(text) <= MAX_MESSAGE_CHARS + 100
    assert "- S0 " + "w" * (MAX_SUBJECT_CHARS - 3) + " [... 9,703 characters cut]" in text
    assert text.endswith(f"- ... and {61 - text.count('characters cut]')} more")
    short = [Commit(f"{i:040x}", ["f" * 40], "", f"Add thing {i}\n\nbody") for i in range(3)]
    assert commit_text(short).endswith("- Add thing 0\n- Add thing 1\n- Add thing 2")


# --------------------------------------------------------------------------- files laid with the hidden tests


def test_support_files_and_packages(tmp_path):
    files = {
        "pyproject.toml": "[tool.pytest.ini_options]\nmarkers = ['slow']\n",
        "conftest.py": "",
        "src/calc/__init__.py": "",
        "src/calc/helpers.py": "",
        "tool.py": "",
        "setup.py": "",
        "tests/__init__.py": "",
        "tests/conftest.py": "",
        "tests/unit/__init__.py": "",
        "tests/unit/conftest.py": "",
        "tests/unit/test_x.py": "from tests.unit.util import load\nfrom calc import helpers\nDATA = 'cases.json'\nSHAPES = 'shapes'\n",
        "tests/unit/util.py": "from . import deeper\n",
        "tests/unit/deeper.py": "",
        "tests/unit/cases.json": "[]",
        "tests/shapes/square.txt": "",
        "tests/other.json": "{}",
        "tests/unit/test_other.py": "",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    laid = layout.support_files(tmp_path, ["tests/unit/test_x.py"])
    assert laid == [
        "conftest.py",
        "pyproject.toml",
        "tests/__init__.py",
        "tests/conftest.py",
        "tests/shapes/square.txt",
        "tests/unit/__init__.py",
        "tests/unit/cases.json",
        "tests/unit/conftest.py",
        "tests/unit/deeper.py",
        "tests/unit/util.py",
    ]  # never the code under test (src/calc/helpers.py), another test module, or unnamed data
    assert layout.packages(tmp_path) == ["calc", "tool"]
    assert layout.shadowed(["calc", "yaml", "pytest"]).keys() == {"yaml", "pytest"}


# --------------------------------------------------------------------------- an untrusted repository


def test_export_writes_the_tree_as_committed_and_runs_nothing_of_the_repo(tmp_path):
    repo = tmp_path / "r"
    marker = tmp_path / "ran"
    make_repo(
        repo,
        [
            (
                "start",
                {
                    ".gitattributes": "* filter=evil\nsecret.txt export-ignore\n",
                    "secret.txt": "kept\n",
                    "run.sh": "#!/bin/sh\n",
                    "pkg/data.txt": "data\n",
                },
            )
        ],
    )
    os.chmod(repo / "run.sh", 0o755)
    os.symlink("pkg/data.txt", repo / "inside")
    os.symlink("/etc/passwd", repo / "outside")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "links")
    git(repo, "config", "filter.evil.smudge", f"touch {marker}")
    git(repo, "config", "filter.evil.clean", f"touch {marker}")
    git(repo, "config", "core.fsmonitor", f"touch {marker}")
    git(repo, "config", "remote.origin.url", "https://ann:token@example.org/ann/r.git")
    hook = repo / ".git" / "hooks" / "post-checkout"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    r = Repo(repo)
    out = tmp_path / "out"
    export = r.export(r.resolve("HEAD"), out)
    assert (out / "secret.txt").read_text() == "kept\n"  # no export-ignore: the tree as committed
    assert os.access(out / "run.sh", os.X_OK) and (out / "inside").read_text() == "data\n"
    assert (
        not (out / "inside").is_symlink() and not (out / "outside").exists() and not (out / ".git").exists()
    )
    assert any("outside" in n for n in export.notes)
    r.changes(r.resolve("HEAD~1"), r.resolve("HEAD"))
    r.range_commits(r.resolve("HEAD~1"), r.resolve("HEAD"))
    assert not marker.exists()  # no filter, fsmonitor or hook of the repository ran
    assert r.remote_url() == "https://example.org/ann/r.git"  # credentials cut
    git(repo, "config", "remote.origin.url", str(tmp_path / "elsewhere"))
    assert r.remote_url() is None  # a local path is no public URL
    assert r.licence(r.resolve("HEAD")) is None


def test_plan_and_its_errors(tmp_path):
    shas = make_repo(tmp_path / "calc", CALC_COMMITS)
    r = Repo(tmp_path / "calc")
    with pytest.raises(TaskError, match="not a git repository"):
        Repo(tmp_path)
    with pytest.raises(TaskError, match="unknown commit 'nope'"):
        resolve_change(r, "nope", None)
    with pytest.raises(TaskError, match="root commit"):
        resolve_change(r, shas[0], None)
    with pytest.raises(TaskError, match="not an ancestor"):
        resolve_change(r, None, f"{shas[2]}..{shas[1]}")
    with pytest.raises(TaskError, match="not BASE..HEAD"):
        resolve_change(r, None, shas[1])
    base, head, commits = resolve_change(r, None, f"{shas[0]}..{shas[3]}")
    assert (base, head, [c.sha for c in commits]) == (shas[0], shas[3], shas[1:4])
    trees = {}
    for side, sha in (("base", base), ("head", head)):
        trees[side] = tmp_path / side
        r.export(sha, trees[side])
    plan = make_plan(r, base, head, commits, trees, None)
    assert [c.path for c in plan.solution] == ["README.md", "calc/__init__.py", "calc/ops.py"]
    assert plan.candidates == {
        "tests/test_div.py": [
            "DivTest::test_div",
            "DivTest::test_div_by_zero",
            "DivTest::test_add_still_works",
        ],
        "tests/test_ops.py": ["test_mul_on_gpu", "test_mul_small"],
    }
    assert plan.deselect == {"tests/test_ops.py::test_mul_small": "changed by the change"}
    docs = resolve_change(r, shas[3], None)
    with pytest.raises(TaskError, match="adds or changes no test module"):
        make_plan(r, *docs[:2], docs[2], trees, None)
    assert parse("def f(:\n", "x.py") is None


# --------------------------------------------------------------------------- settling the assembled task


def test_own_modules_that_do_not_collect_are_ignored_and_failing_own_tests_deselected():
    from types import SimpleNamespace as NS

    from kit.importers.git import settle
    from kit.importers.git.result import ImportResult, own_test_command

    start = NS(
        own=NS(
            errors=[
                "tests/test_toml_tests.py: FileNotFoundError: toml-test",
                "the session never started (exit 1)",
            ],
            outcomes={
                "tests/t.py::test_a": (True, ""),
                "tests/t.py::test_b": (False, "assert 1 == 2"),
                "tests/t.py::test_c": (False, "skipped: not here"),
                "tests/t.py::test_d": (True, ""),
            },
        )
    )
    end = NS(
        own=NS(errors=[], outcomes={"tests/t.py::test_a": (True, ""), "tests/t.py::test_d": (False, "boom")})
    )
    r = ImportResult("x")
    assert settle.uncollected(start, end, r) and not settle.uncollected(start, end, r)
    assert list(r.ignored) == ["tests/test_toml_tests.py"]
    assert r.ignored["tests/test_toml_tests.py"].startswith("does not collect at the base: FileNotFoundError")
    assert own_test_command(r.ignored) == "python -m pytest -q --ignore=tests/test_toml_tests.py"
    assert settle.own_failures(start, end, r)
    assert r.deselected == {
        "tests/t.py::test_b": "fails at the base: assert 1 == 2",
        "tests/t.py::test_d": "fails with the reference solution: boom",
    }  # a skip at the base is neutral: test_c stays
