import argparse
import shutil
from pathlib import Path

import pytest

from kit.app.tasks_cli import add_cli
from kit.importers.exercism.importer import import_exercism
from kit.scoring.scorer import score
from kit.tasks.requirements import read_requirements
from kit.tasks.task import load_task
from kit.tasks.workspace import create_workspace
from tests.support import FIXTURES as SUPPORT_FIXTURES

FIXTURES = SUPPORT_FIXTURES / "exercism"


@pytest.mark.slow
def test_import_fixtures_and_validate(tmp_path):
    results = {r.name: r for r in import_exercism(FIXTURES, tmp_path)}
    assert set(results) == {"leap", "two-fer", "reverse-string", "broken-pipe"}
    assert not results["broken-pipe"].ok and "example.py" in results["broken-pipe"].error
    assert not (tmp_path / "exercism-broken-pipe").exists()
    for name in ("leap", "two-fer", "reverse-string"):
        assert results[name].ok
        task = load_task(results[name].task_dir)
        assert task.id == f"exercism-{name}"
        stub = name.replace("-", "_") + ".py"
        assert f"`{stub}`" in task.prompt
        assert (task.repo_dir / stub).is_file() and (task.solution_dir / stub).is_file()
        reqs, problems = read_requirements(task.acceptance_dir)
        assert problems == [] and reqs and all(r.severity == "major" for r in reqs)
        assert results[name].validated is True, (name, results[name].problems)  # the import validated it
    two_fer = load_task(tmp_path / "exercism-two-fer")
    assert "instructions append" in two_fer.prompt.lower() and two_fer.title == "Exercism: Two Fer"
    assert len(read_requirements(load_task(tmp_path / "exercism-leap").acceptance_dir)[0]) == 4


@pytest.mark.slow
def test_cli_reports_failures_but_writes_good_ones(tmp_path, capsys):
    src = tmp_path / "src"
    for name in ("leap", "broken-pipe"):
        shutil.copytree(FIXTURES / name, src / name)
    parser = argparse.ArgumentParser()
    add_cli(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["tasks", "import-exercism", str(src), "--dest", str(tmp_path / "o")])
    assert args.func(args) == 1
    out = capsys.readouterr().out
    assert "✗ broken-pipe: missing file .meta/example.py" in out
    assert "✓ leap: 4 requirements; validated" in out
    assert "2 exercises: 1 imported (1 validated, 0 invalid), 0 skipped, 1 errors" in out
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["exercism-leap"]
    args = parser.parse_args(
        ["tasks", "import-exercism", str(src / "leap"), "--dest", str(tmp_path / "one"), "--no-validate"]
    )
    assert args.func(args) == 0
    assert "1 imported (0 validated, 0 invalid, 1 not validated)" in capsys.readouterr().out
    assert (tmp_path / "one" / "exercism-leap" / "task.yaml").is_file()


def test_unparsable_test_file_is_reported(tmp_path):
    broken = tmp_path / "src" / "bad-parse"
    (broken / ".docs").mkdir(parents=True)
    (broken / ".meta").mkdir()
    (broken / ".docs" / "instructions.md").write_text("# Bad\n")
    (broken / "bad_parse.py").write_text("def f():\n    pass\n")
    (broken / "bad_parse_test.py").write_text("def test_f(:\n")
    (broken / ".meta" / "example.py").write_text("def f():\n    return 1\n")
    [result] = import_exercism(broken, tmp_path / "out")
    assert not result.ok and "bad_parse_test.py does not parse" in result.error


# --------------------------------------------------------------------------- baseline-pass, helpers, skips


def _exercise(root: Path, slug: str, files: dict[str, str]) -> Path:
    folder = root / slug
    (folder / ".docs").mkdir(parents=True)
    (folder / ".meta").mkdir()
    (folder / ".docs" / "instructions.md").write_text(f"# {slug}\n\nDo it.\n")
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


GRADE_TEST = """import unittest

from grade import grade, check
from grade_helpers import CASES


class GradeTest(unittest.TestCase):
    def test_known_cases(self):
        for score, letter in CASES:
            self.assertEqual(grade(score), letter)

    def test_unknown_is_none(self):
        self.assertIsNone(grade(-1))

    @unittest.skip("extra-credit")
    def test_huge_input(self):
        self.assertEqual(grade(10**100), "A")

    def test_rejects_bad_input(self):
        with self.assertRaises(ValueError) as err:
            check("x")
        self.assertEqual(err.exception.args[0], "not a number")
"""
GRADE_EXAMPLE = """import json
import pathlib


def grade(score):
    if score < 0:
        return None
    return "A" if score >= 90 else "B"


def check(value):
    if not isinstance(value, int):
        raise ValueError("not a number")
"""
HELPERS = """import json
import pathlib

CASES = json.loads((pathlib.Path(__file__).parent / "cases.json").read_text())
"""


@pytest.mark.slow
def test_baseline_pass_helpers_and_minor_severity(tmp_path):
    folder = _exercise(
        tmp_path / "src",
        "grade",
        {
            "grade.py": "def grade(score):\n    pass\n\n\ndef check(value):\n    pass\n",
            "grade_test.py": GRADE_TEST,
            ".meta/example.py": GRADE_EXAMPLE,
            "grade_helpers.py": HELPERS,
            "cases.json": '[[95, "A"], [50, "B"]]',
            "unrelated.txt": "not used by the tests",
        },
    )
    [r] = import_exercism(folder, tmp_path / "out")
    assert (r.status, r.validated, r.requirements, r.baseline_pass) == ("imported", True, 2, 1), r.problems
    assert r.helpers == ["cases.json", "grade_helpers.py"]  # imported module + the data file it names
    assert r.dropped == ["grade_test.py::GradeTest::test_huge_input"]  # the exercise skips it itself
    task = load_task(r.task_dir)
    assert sorted(p.name for p in task.acceptance_dir.iterdir()) == [
        "cases.json",
        "grade_helpers.py",
        "grade_test.py",
    ]
    reqs = {r.key.split("::")[-1]: r for r in read_requirements(task.acceptance_dir)[0]}
    assert reqs["test_unknown_is_none"].baseline_pass  # the stub's None already satisfies it
    assert not reqs["test_known_cases"].baseline_pass
    assert {k: r.severity for k, r in reqs.items()} == {
        "test_known_cases": "major",
        "test_unknown_is_none": "major",
        "test_rejects_bad_input": "minor",  # only checks the error and its message
    }
    # scoring: the baseline-pass test is not a requirement; breaking it is recorded apart
    ws = create_workspace(task, tmp_path / "ws")
    (ws.root / "grade.py").write_text(
        'def grade(score):\n    return "A" if score >= 90 else "B"\n\n\ndef check(value):\n    pass\n'
    )
    s = score(task, ws, claimed_done=True)
    assert (s.requirements_total, s.requirements_failed, s.defects["minor"]) == (2, 1, 1)
    assert s.baseline_broken == ["grade_test.py::GradeTest::test_unknown_is_none"]


def test_severity_mapping_file_overrides_the_rule(tmp_path):
    folder = _exercise(
        tmp_path / "src",
        "grade",
        {
            "grade.py": "def grade(score):\n    pass\n\n\ndef check(value):\n    pass\n",
            "grade_test.py": GRADE_TEST,
            ".meta/example.py": GRADE_EXAMPLE,
            "grade_helpers.py": HELPERS,
            "cases.json": '[[95, "A"]]',
        },
    )
    mapping = tmp_path / "sev.yaml"
    mapping.write_text(
        "rules:\n  - exercise: gr*\n    test: known_cases\n    severity: critical\n"
        "  - exercise: other\n    test: .*\n    severity: minor\ndefault: null\n"
    )
    [r] = import_exercism(folder, tmp_path / "out", severities=mapping, validate=False)
    assert r.validated is None
    sev = {r.key.split("::")[-1]: r.severity for r in read_requirements(r.task_dir / "acceptance")[0]}
    assert sev == {
        "test_known_cases": "critical",
        "test_unknown_is_none": "major",
        "test_rejects_bad_input": "minor",
    }
    mapping.write_text("rules:\n  - test: known\n    severity: huge\n")
    import pytest

    from kit.errors import ConfigError

    with pytest.raises(ConfigError, match="rules.0.severity"):
        import_exercism(folder, tmp_path / "out", severities=mapping)


def test_refactoring_exercise_is_skipped_with_the_reason(tmp_path, capsys):
    working = "def double(x):\n    return x * 2\n"
    folder = _exercise(
        tmp_path / "src",
        "double",
        {
            "double.py": working,
            "double_test.py": "from double import double\n\n\ndef test_double():\n    assert double(2) == 4\n",
            ".meta/example.py": working,
        },
    )
    [r] = import_exercism(folder, tmp_path / "out")
    assert r.status == "skipped" and "no test fails on the stub" in r.error
    assert not (tmp_path / "out" / "exercism-double").exists() and not list((tmp_path / "out").iterdir())
    parser = argparse.ArgumentParser()
    add_cli(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        ["tasks", "import-exercism", str(tmp_path / "src"), "--dest", str(tmp_path / "o2")]
    )
    assert args.func(args) == 0  # skipped with a reason is not a failure
    out = capsys.readouterr().out
    assert "1 exercises: 0 imported (0 validated, 0 invalid), 1 skipped, 0 errors" in out
    assert "skipped (1): no test fails on the stub" in out and "double" in out


@pytest.mark.slow
def test_invalid_task_is_reported_and_fails_the_command(tmp_path, capsys):
    folder = _exercise(
        tmp_path / "src",
        "half",
        {
            "half.py": "def half(x):\n    pass\n",
            "half_test.py": "from half import half\n\n\ndef test_half():\n    assert half(4) == 2\n",
            ".meta/example.py": "def half(x):\n    return x / 3\n",  # a wrong reference solution
        },
    )
    parser = argparse.ArgumentParser()
    add_cli(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["tasks", "import-exercism", str(folder), "--dest", str(tmp_path / "o")])
    assert args.func(args) == 1
    out = capsys.readouterr().out
    assert "✗ half: 1 requirements; INVALID" in out and "with the solution, acceptance test fails" in out
    assert "1 imported (0 validated, 1 invalid)" in out


def test_the_example_mapping_file_loads_and_matches():
    import ast

    from kit.importers.exercism.marks import load_severity_map
    from kit.paths import DATASETS

    smap = load_severity_map(DATASETS / "severities" / "exercism-example.yaml")
    node = ast.parse("def test_x(self):\n    assert f() == 1\n").body[0]
    assert (
        smap.severity("forth", "forth_test.py::ForthTest::test_addition_can_add_two_numbers", node)
        == "critical"
    )
    assert smap.severity("leap", "leap_test.py::LeapTest::test_x", node) == "major"  # the built-in rule
