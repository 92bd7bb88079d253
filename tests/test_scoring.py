import pytest

from kit.scoring import read_requirements, score
from kit.tasks import apply_solution, list_tasks, load_task
from kit.workspace import create_workspace

TASK_IDS = ["micro-slugify", "table-computed-columns", "csv-export-stream", "bugfix-date-range"]


def _expected_start_defects(task):
    reqs, problems = read_requirements(task.acceptance_dir)
    assert problems == []
    counts = {"critical": 0, "major": 0, "minor": 0}
    for r in reqs:
        if not r.baseline_pass:
            counts[r.severity] += 1
    return reqs, counts


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_start_is_all_defects_and_solution_is_clean(task_id, tmp_path):
    task = load_task(task_id)
    reqs, expected = _expected_start_defects(task)
    ws = create_workspace(task, tmp_path / "ws")

    start = score(task, ws, claimed_done=True)
    assert start.requirements_total == sum(not r.baseline_pass for r in reqs)  # baseline-pass: no requirement
    assert start.requirements_by_severity == expected and start.baseline_broken == []
    assert start.defects == expected
    assert start.requirements_failed == sum(expected.values())
    assert start.claimed_done_but_failed is True
    assert start.regressions == 0 and start.own_tests_total > 0
    assert start.files_touched == 0 and start.tests_added == 0
    assert 0 < start.scoring_s < 30
    assert score(task, ws, claimed_done=False).claimed_done_but_failed is False

    apply_solution(task, ws.root)
    end = score(task, ws, claimed_done=True)
    assert end.defects == {"critical": 0, "major": 0, "minor": 0}
    assert end.requirements_failed == 0 and end.failed == []
    assert end.regressions == 0
    assert end.claimed_done_but_failed is False
    assert end.files_touched >= 1 and end.lines_added > 0


def test_every_shipped_task_is_scored():
    assert sorted(TASK_IDS) == sorted(t.id for t in list_tasks() if not t.id.startswith("exercism-"))


def test_regressions_tests_added_and_minor_only_failures(tmp_path):
    task = load_task("micro-slugify")
    ws = create_workspace(task, tmp_path / "ws")
    apply_solution(task, ws.root)
    src = (ws.root / "textkit.py").read_text()
    # break the existing helper (an own-test regression) and one minor requirement (digits)
    src = src.replace("return len(text.split())", "return 0")
    src = src.replace('re.compile(r"[^a-z0-9]+")', 're.compile(r"[^a-z]+")')
    (ws.root / "textkit.py").write_text(src)
    (ws.root / "tests" / "test_more.py").write_text(
        "from textkit import slugify\n\n\ndef test_a():\n    assert slugify('A') == 'a'\n\n\n"
        "class TestB:\n    def test_b(self):\n        assert slugify('') == ''\n"
    )
    s = score(task, ws, claimed_done=True)
    assert s.regressions == 1
    assert s.regressed_tests == ["tests/test_textkit.py::test_word_count"]
    assert s.tests_added == 2
    assert s.defects == {"critical": 0, "major": 0, "minor": 1}
    assert [f.test for f in s.failed] == ["test_slugify.py::test_keeps_digits"]
    assert s.claimed_done_but_failed is False  # only a minor failure
    assert s.files_touched == 2


def test_broken_module_fails_every_requirement(tmp_path):
    task = load_task("micro-slugify")
    ws = create_workspace(task, tmp_path / "ws")
    (ws.root / "textkit.py").write_text("this is not python(\n")
    s = score(task, ws, claimed_done=False)
    assert s.requirements_failed == s.requirements_total == 7
    assert all(f.message for f in s.failed)
    assert s.regressions == 2


def test_skipped_acceptance_tests_count_as_failed(tmp_path):
    task = load_task("micro-slugify")
    ws = create_workspace(task, tmp_path / "ws")
    apply_solution(task, ws.root)
    # an agent whose module skips the tests that import it does not get credit
    module = ws.root / "textkit.py"
    module.write_text("import pytest\n\npytest.skip('nope', allow_module_level=True)\n" + module.read_text())
    s = score(task, ws, claimed_done=True)
    assert s.requirements_failed == 7
    assert "skip" in s.failed[0].message.lower(), s.failed[0].message


def test_a_conftest_written_by_the_agent_cannot_rig_the_acceptance_tests(tmp_path):
    from kit.scoring import score
    from kit.tasks import load_task
    from kit.workspace import create_workspace

    task = load_task("micro-slugify")
    ws = create_workspace(task, tmp_path / "repo")
    rig = (
        "import pytest\n\n"
        "@pytest.hookimpl(hookwrapper=True)\n"
        "def pytest_runtest_makereport(item, call):\n"
        "    outcome = yield\n"
        "    report = outcome.get_result()\n"
        "    report.outcome = 'passed'\n"
    )
    (ws.root / "conftest.py").write_text(rig)
    result = score(task, ws, claimed_done=True)
    assert result.requirements_failed == result.requirements_total == 7
    assert result.claimed_done_but_failed
