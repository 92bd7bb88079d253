import argparse
from pathlib import Path

from kit.exercism import import_exercism
from kit.scoring import read_requirements
from kit.tasks import add_cli, load_task, validate_task

FIXTURES = Path(__file__).parent / "fixtures" / "exercism"


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
        report = validate_task(task)
        assert report.ok, (name, report.problems)
    two_fer = load_task(tmp_path / "exercism-two-fer")
    assert "instructions append" in two_fer.prompt.lower() and two_fer.title == "Exercism: Two Fer"
    assert len(read_requirements(load_task(tmp_path / "exercism-leap").acceptance_dir)[0]) == 4


def test_cli_reports_failures_but_writes_good_ones(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    add_cli(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["tasks", "import-exercism", str(FIXTURES), "--dest", str(tmp_path)])
    assert args.func(args) == 1
    out = capsys.readouterr().out
    assert "✗ broken-pipe: missing file .meta/example.py" in out
    assert "✓ leap" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "exercism-leap",
        "exercism-reverse-string",
        "exercism-two-fer",
    ]
    args = parser.parse_args(
        ["tasks", "import-exercism", str(FIXTURES / "leap"), "--dest", str(tmp_path / "one")]
    )
    assert args.func(args) == 0
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
