import argparse
import shutil

import pytest

from kit.app.tasks_cli import add_cli
from kit.errors import ConfigError, TaskError
from kit.importers.validate import validate_task
from kit.tasks.task import list_tasks, load_task

SHIPPED = {"micro-slugify", "table-computed-columns", "csv-export-stream", "bugfix-date-range"}


def _parser():
    parser = argparse.ArgumentParser(prog="kit")
    add_cli(parser.add_subparsers(dest="command"))
    return parser


def _run(argv):
    args = _parser().parse_args(argv)
    return args.func(args)


def test_shipped_tasks_load():
    tasks = {t.id: t for t in list_tasks()}
    assert set(tasks) >= SHIPPED
    for task_id in SHIPPED:
        t = tasks[task_id]
        assert t.long is False and t.tags and t.prompt.strip()
        assert t.repo_dir.is_dir() and t.acceptance_dir.is_dir() and t.solution_dir.is_dir()
        assert (t.repo_dir / "README.md").is_file()


@pytest.mark.slow
def test_validate_all_shipped_tasks():
    # the vendored suite tasks (exercism-*) are validated by `kit tasks validate --all`, the first step
    # of `make test`; validating them here again would double that time
    for task in (t for t in list_tasks() if not t.id.startswith("exercism-")):
        report = validate_task(task)
        assert report.ok, (task.id, report.problems)
        assert report.durations["total_s"] < 30


def test_unknown_task_lists_valid_ids():
    with pytest.raises(ConfigError) as err:
        load_task("no-such-task")
    assert "micro-slugify" in str(err.value) and "bugfix-date-range" in str(err.value)


def _copy_task(tmp_path, task_id="micro-slugify"):
    dest = tmp_path / "mytask"
    shutil.copytree(load_task(task_id).path, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def test_bad_yaml_names_file_and_field(tmp_path):
    folder = _copy_task(tmp_path)
    (folder / "task.yaml").write_text("id: mytask\ntitle: x\nprompt: y\nlimits: {max_stepz: 3}\n")
    with pytest.raises(ConfigError) as err:
        load_task(folder)
    assert "task.yaml" in str(err.value) and "limits.max_stepz" in str(err.value)
    (folder / "task.yaml").write_text("id: mytask\ntitle: x\n")
    with pytest.raises(ConfigError, match="prompt"):
        load_task(folder)
    (folder / "task.yaml").write_text("id: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_task(folder)


def test_missing_acceptance_folder(tmp_path):
    folder = _copy_task(tmp_path)
    shutil.rmtree(folder / "acceptance")
    with pytest.raises(TaskError, match="acceptance"):
        load_task(folder)


def test_task_outside_datasets_validates(tmp_path, capsys):
    folder = _copy_task(tmp_path)
    task = load_task(folder)
    assert task.path == folder.resolve() and task.id == "micro-slugify"
    assert _run(["tasks", "validate", str(folder)]) == 0
    assert "✓ micro-slugify" in capsys.readouterr().out


@pytest.mark.slow
def test_validate_reports_broken_tasks(tmp_path, capsys):
    folder = _copy_task(tmp_path)
    test_file = folder / "acceptance" / "test_slugify.py"
    src = test_file.read_text()
    # a test without a severity, a test that passes at the start, and a solution that misses a case
    src += "\n\ndef test_no_severity():\n    assert True\n"
    test_file.write_text(src)
    sol = folder / "solution" / "textkit.py"
    sol.write_text(sol.read_text().replace('.strip("-")', ""))
    report = validate_task(load_task(folder))
    assert not report.ok
    text = "\n".join(report.problems)
    assert "test_slugify.py::test_no_severity has no @pytest.mark.severity" in text
    assert "passes at the start: test_slugify.py::test_no_severity" in text
    assert (
        "with the solution, acceptance test fails: test_slugify.py::test_strips_leading_and_trailing_separators"
        in text
    )
    assert _run(["tasks", "validate", str(folder)]) == 1
    out = capsys.readouterr().out
    assert "✗ micro-slugify" in out and "test_strips_leading_and_trailing_separators" in out


def test_validate_reports_failing_own_tests(tmp_path):
    folder = _copy_task(tmp_path)
    (folder / "repo" / "tests" / "test_broken.py").write_text("def test_bad():\n    assert 1 == 2\n")
    report = validate_task(load_task(folder))
    assert not report.ok
    assert any("own tests fail at the start: tests/test_broken.py::test_bad" in p for p in report.problems)


def test_cli_list_and_usage(capsys):
    assert _run(["tasks", "list"]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("micro-slugify"))
    assert "7 requirements (1 critical, 3 major, 3 minor), 6 sealed" in line
    assert _run(["tasks", "validate"]) == 2
    assert _run(["tasks", "validate", "nope-nope"]) == 1
    assert "unknown task" in capsys.readouterr().out


def test_cli_list_of_a_folder_and_validate_print_requirements_by_severity_and_sealed(tmp_path, capsys):
    folder = _copy_task(tmp_path)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "task.yaml").write_text("id: broken\n")
    assert _run(["tasks", "list", str(tmp_path)]) == 1  # one folder is not a task: said, not raised
    out = capsys.readouterr().out
    assert "micro-slugify" in out and "7 requirements (1 critical, 3 major, 3 minor), 6 sealed" in out
    assert "broken" in out and "✗" in out and "suite:" not in out
    assert _run(["tasks", "list", str(folder)]) == 0
    assert "6 sealed" in capsys.readouterr().out
    assert _run(["tasks", "validate", str(folder)]) == 0
    assert "7 requirements (1 critical, 3 major, 3 minor), 6 sealed" in capsys.readouterr().out
    assert _run(["tasks", "list", str(tmp_path / "nope")]) == 1
