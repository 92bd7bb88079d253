import os
import shutil
import textwrap

import pytest

from kit.sandbox.backends import CONTAINER_BACKENDS
from kit.scoring import scorer as scoring
from kit.scoring.scorer import score
from kit.scoring.session import Canaries, read_stream
from kit.tasks.requirements import read_requirements
from kit.tasks.task import apply_solution, list_tasks, load_task
from kit.tasks.workspace import create_workspace
from tests.support.sandboxes import backends

TASK_IDS = ["micro-slugify", "table-computed-columns", "csv-export-stream", "bugfix-date-range"]


def _expected_start_defects(task):
    reqs, problems = read_requirements(task.acceptance_dir)
    assert problems == []
    counts = {"critical": 0, "major": 0, "minor": 0}
    for r in reqs:
        if not r.baseline_pass:
            counts[r.severity] += 1
    return reqs, counts


@pytest.mark.slow
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
    from kit.scoring.scorer import score
    from kit.tasks.task import load_task
    from kit.tasks.workspace import create_workspace

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


# --------------------------------------------------------------------------- scoring the agent cannot fool
# Each test below plants what a reward-hacking agent would leave in its clone, then scores it.


SLUG_REQS = [
    "test_returns_a_string",
    "test_lowercases_and_joins_words_with_a_hyphen",
    "test_collapses_runs_of_separators",
    "test_strips_leading_and_trailing_separators",
    "test_punctuation_and_non_ascii_are_separators",
    "test_keeps_digits",
    "test_empty_and_separator_only_input_give_empty_string",
]
#: Writes a JUnit report in which every requirement passed to wherever pytest was told to write one,
#: then ends the process with status 0: what an agent that shadows pytest would do.
FORGE = textwrap.dedent(
    f"""
    import os, sys
    NAMES = {SLUG_REQS!r}
    def forge():
        for arg in sys.argv:
            if arg.startswith("--junitxml="):
                cases = "".join(
                    f'<testcase classname="c" name="{{n}}"><properties><property name="nodeid" '
                    f'value="_acceptance/test_slugify.py::{{n}}"/></properties></testcase>' for n in NAMES
                )
                with open(arg.split("=", 1)[1], "w") as fh:
                    fh.write(f'<testsuites><testsuite name="pytest">{{cases}}</testsuite></testsuites>')
    """
)
#: Imported by the code under test: every test report says "passed" from then on.
REPORT_PATCH = textwrap.dedent(
    """
    import _pytest.reports as _reports
    _orig = _reports.TestReport.from_item_and_call.__func__
    def _all_passed(cls, item, call):
        report = _orig(cls, item, call)
        report.outcome, report.longrepr = "passed", None
        return report
    _reports.TestReport.from_item_and_call = classmethod(_all_passed)
    """
)
RIG_PLUGIN = (
    "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
    "    outcome = yield\n    outcome.get_result().outcome = 'passed'\n"
)


def _slugify_ws(tmp_path, solved):
    task = load_task("micro-slugify")
    ws = create_workspace(task, tmp_path / "ws")
    if solved:
        apply_solution(task, ws.root)
    return task, ws


@pytest.mark.parametrize(
    "path",
    [
        "pytest.py",
        "_pytest/__init__.py",
        "argparse.py",
        "json.py",
        "sitecustomize.py",
        "_acceptance/test_slugify.py",
    ],
)
def test_modules_shadowing_pytest_or_the_stdlib_do_not_change_the_score(tmp_path, path):
    task, ws = _slugify_ws(tmp_path, solved=False)
    target = ws.root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    fake_tests = "".join(f"def {n}():\n    pass\n\n\n" for n in SLUG_REQS)
    target.write_text(FORGE + "forge()\nos._exit(0)\n" + (fake_tests if "_acceptance" in path else ""))
    s = score(task, ws, claimed_done=True)
    assert s.requirements_failed == s.requirements_total == 7
    assert s.regressions == 0 and s.own_tests_total == 2
    assert not s.tampered and s.unscored_reason is None


@pytest.mark.parametrize("sandbox", [*backends(), "none"])
def test_an_import_time_patch_of_pytest_reports_is_caught_by_the_canaries(tmp_path, sandbox):
    task, ws = _slugify_ws(tmp_path, solved=False)
    module = ws.root / "textkit.py"
    module.write_text(REPORT_PATCH + module.read_text())
    s = score(task, ws, claimed_done=True, sandbox=sandbox)
    assert s.tampered
    assert any("canary test that must fail was reported passed" in e for e in s.tamper_evidence)
    assert s.requirements_failed == 7 and s.failed[0].message.startswith("tampered")
    assert s.regressions == 2  # nothing the own tests said counts either


def test_an_exit_hook_rewriting_the_report_and_the_exit_status_is_caught(tmp_path):
    task, ws = _slugify_ws(tmp_path, solved=False)
    module = ws.root / "textkit.py"
    hook = FORGE + "import atexit\natexit.register(lambda: (forge(), os._exit(0)))\n"
    module.write_text(hook + module.read_text())
    s = score(task, ws, claimed_done=True)
    assert s.requirements_failed == 7
    assert s.tampered
    assert any("the process exited with 0" in e for e in s.tamper_evidence), s.tamper_evidence


def test_the_agents_pytest_configuration_is_not_read_for_acceptance(tmp_path):
    task, ws = _slugify_ws(tmp_path, solved=True)
    (ws.root / "pytest.ini").write_text("[pytest]\ntestpaths = tests\npython_functions = nothing_matches\n")
    (ws.root / "setup.cfg").write_text("[tool:pytest]\npython_files = nothing_matches.py\n")
    s = score(task, ws, claimed_done=True)
    assert s.requirements_failed == 0
    assert s.regressions == 0 and s.own_tests_total == 2  # the own tests ran with the base's pytest.ini


def _hide_by_editing_the_test(root):
    test = root / "tests" / "test_textkit.py"
    edited = test.read_text().replace("assert textkit.word_count", "assert True or textkit.word_count")
    assert edited != test.read_text()
    test.write_text(edited)


def _hide_by_deleting_the_test(root):
    (root / "tests" / "test_textkit.py").unlink()


def _hide_with_a_conftest(root):
    (root / "tests" / "conftest.py").write_text(RIG_PLUGIN)


def _hide_with_pytest_ini(root):
    (root / "rigplugin.py").write_text(RIG_PLUGIN)
    (root / "pytest.ini").write_text("[pytest]\ntestpaths = tests\naddopts = -p rigplugin\n")


def _hide_with_setup_cfg(root):
    (root / "rigplugin.py").write_text(RIG_PLUGIN)
    (root / "pytest.ini").unlink()
    (root / "setup.cfg").write_text("[tool:pytest]\ntestpaths = tests\naddopts = -p rigplugin\n")


@pytest.mark.parametrize(
    "hide",
    [
        _hide_by_editing_the_test,
        _hide_by_deleting_the_test,
        _hide_with_a_conftest,
        _hide_with_pytest_ini,
        _hide_with_setup_cfg,
    ],
)
def test_a_regression_cannot_be_hidden_by_changing_the_repos_own_tests(tmp_path, hide):
    task, ws = _slugify_ws(tmp_path, solved=True)
    module = ws.root / "textkit.py"
    module.write_text(module.read_text().replace("return len(text.split())", "return 0"))
    hide(ws.root)
    s = score(task, ws, claimed_done=True)
    assert s.regressed_tests == ["tests/test_textkit.py::test_word_count"]
    assert s.requirements_failed == 0 and not s.tampered


def test_odd_files_in_the_clone_are_dropped_and_noted_never_a_crash(tmp_path):
    task, ws = _slugify_ws(tmp_path, solved=True)
    root = ws.root
    os.mkfifo(root / "pipe")
    (root / "etc").symlink_to("/etc")
    (root / "passwd").symlink_to("/etc/passwd")
    (root / "alias.py").symlink_to("textkit.py")  # inside the clone: kept, as a copy
    os.symlink("missing", root / "dangling")
    (root / os.fsdecode(b"odd\xffname\n.py")).write_text("x = 1\n")
    deep = root.joinpath(*["d"] * 60)
    deep.mkdir(parents=True)
    (deep / "f.txt").write_text("deep\n")
    (root / "__pycache__").mkdir(exist_ok=True)
    (root / "__pycache__" / "textkit.cpython-311.pyc").write_bytes(b"not bytecode")
    (root / "textkit.pyc").write_bytes(b"not bytecode either")
    shutil.rmtree(root / ".git")  # the agent deleted its git folder
    s = score(task, ws, claimed_done=True)
    assert s.unscored_reason is None and not s.tampered
    assert s.requirements_failed == 0 and s.regressions == 0
    dropped = "\n".join(s.dropped_files)
    for name in ("pipe: FIFO", "etc: symlink", "passwd: symlink", "dangling: symlink", "deeper than"):
        assert name in dropped, dropped
    assert "alias.py" not in dropped
    assert s.files_touched >= 3  # the diff is read with the kit's own copy of the base


def test_a_scoring_failure_gives_a_scored_run_with_every_requirement_failed(tmp_path, monkeypatch):
    task, ws = _slugify_ws(tmp_path, solved=True)

    def broken(*args, **kwargs):
        raise OSError("disk on fire")

    monkeypatch.setattr(scoring, "copy_clean", broken)
    s = score(task, ws, claimed_done=True)
    assert s.unscored_reason == "scoring failed: OSError: disk on fire"
    assert s.requirements_failed == s.requirements_total == 7
    assert s.defects_total == 7 and s.claimed_done_but_failed
    assert all(f.message.startswith("not scored") for f in s.failed)


@pytest.mark.slow
def test_tests_that_hang_until_the_timeout_make_the_run_tampered_not_missing(tmp_path):
    task, ws = _slugify_ws(tmp_path, solved=True)
    module = ws.root / "textkit.py"
    module.write_text("import time\ntime.sleep(60)\n" + module.read_text())
    s = score(task, ws, claimed_done=False, timeout_s=3)
    assert s.requirements_failed == 7 and s.unscored_reason is None
    assert s.tampered and any("hung until the scoring timeout" in e for e in s.tamper_evidence)
    assert s.regressions == 2


# --------------------------------------------------------------------------- the stream, line by line


def _line(seq, **msg):
    import json

    return (json.dumps({"seq": seq, **msg}) + "\n").encode()


def _stream(c, *extra, passing=True, failing=False, end=1, collected=3):
    lines = [
        _line(1, kind="collected", count=collected),
        _line(2, kind="test", nodeid="t.py::test_a", passed=True, message=""),
        _line(3, kind="test", nodeid=f"x/test_c.py::{c.passing}", passed=passing, message=""),
        _line(4, kind="test", nodeid=f"x/test_c.py::{c.failing}", passed=failing, message="boom"),
    ]
    if end is not None:
        lines.append(_line(5, kind="end", exitstatus=end))
    return b"".join(lines + list(extra))


def _read(data, c, **kw):
    got = read_stream(data, c.expect(), **kw)
    return got.outcomes, got.errors, got.complete, got.tamper


def test_an_honest_stream_is_read_and_canaries_are_left_out():
    c = Canaries.new()
    outcomes, errors, complete, tamper = _read(_stream(c), c, exit_code=1, timed_out=False)
    assert outcomes == {"t.py::test_a": (True, "")}
    assert errors == [] and complete and tamper == []


def test_a_canary_whose_parameter_id_holds_a_double_colon_is_known_as_a_canary():
    """boltons' module fixture hands every test of test_urlutils.py URLs such as
    ``https://[::101.45.75.219]:80/``: a canary's node id was split inside its parameter id, the canary
    read as an own test (its must-fail copy a failing own test) and the reference solution refused."""
    from kit.scoring.stream import Expect

    lines = [
        _line(1, kind="collected", count=3),
        _line(2, kind="test", nodeid="t.py::test_a[https://[::1]:80/]", passed=True, message=""),
        _line(3, kind="test", nodeid="t.py::test_pass_me[https://[::1]:80/]", passed=True, message=""),
        _line(4, kind="test", nodeid="t.py::test_fail_me[https://[::1]:80/]", passed=False, message=""),
        _line(5, kind="end", exitstatus=1),
    ]
    expect = Expect({"test_pass_me": ("t.py", True), "test_fail_me": ("t.py", False)})
    got = read_stream(b"".join(lines), expect, exit_code=1, timed_out=False)
    assert got.outcomes == {"t.py::test_a[https://[::1]:80/]": (True, "")}
    assert got.complete and got.tamper == []


def test_a_lone_surrogate_in_a_tests_message_is_replaced_where_it_is_read():
    """The code under test raised with a lone surrogate in its message (valid JSON in the stream): the
    message the kit keeps can be written as UTF-8 (run.json)."""
    c = Canaries.new()
    bad = _line(2, kind="test", nodeid="t.py::test_a", passed=False, message="bad \udcff\ud800 surrogate")
    data = _line(1, kind="collected", count=3) + bad + _stream(c).split(b"\n", 2)[2]
    outcomes, _, _, tamper = _read(data, c, exit_code=1, timed_out=False)
    assert outcomes == {"t.py::test_a": (False, "bad ?? surrogate")} and tamper == []


@pytest.mark.parametrize(
    "case, evidence",
    [
        ({"failing": True, "end": 0}, "canary test that must fail was reported passed"),
        ({"passing": False}, "canary test that must pass was reported failed"),
        (
            {"extra": [_line(6, kind="test", nodeid="t.py::test_b", passed=True, message="")]},
            "after the session",
        ),
        ({"collected": 4}, "1 of 4 collected tests were never reported"),  # pytest.exit after canaries
        ({"extra": [b"not json\n"]}, "garbled"),
        ({"exit_code": 0}, "the process exited with 0"),
    ],
)
def test_a_forged_stream_is_tampering(case, evidence):
    c = Canaries.new()
    exit_code = case.pop("exit_code", case.get("end", 1))
    data = _stream(c, *case.pop("extra", []), **case)
    _, _, _, tamper = _read(data, c, exit_code=exit_code, timed_out=False)
    assert any(evidence in t for t in tamper), tamper


def test_a_forged_stream_without_the_canaries_is_tampering():
    c = Canaries.new()
    data = _line(1, kind="test", nodeid="t.py::test_a", passed=True, message="") + _line(
        2, kind="end", exitstatus=1
    )
    _, _, _, tamper = _read(data, c, exit_code=1, timed_out=False)
    assert sum("missing from the report" in t for t in tamper) == 2
    dup = _stream(c)[: -len(_line(5, kind="end", exitstatus=1))] + _line(
        5, kind="test", nodeid="t.py::test_a", passed=True, message=""
    )
    _, _, _, tamper = _read(dup, c, exit_code=None, timed_out=True)
    assert "test reported twice: t.py::test_a" in tamper


@pytest.mark.parametrize(
    "exit_code, timed_out, end, evidence",
    [
        (None, True, None, "hung until the scoring timeout (5 s)"),  # a hang
        (0, False, None, "stopped before pytest's end (exit 0)"),  # os._exit(0) after streaming
        (2, False, 2, "status 2 (interrupted)"),  # KeyboardInterrupt / pytest.exit
        (None, True, 1, "hung after the session ended"),  # an exit hook that never returns
    ],
)
def test_an_unfinished_or_interrupted_session_is_tampering(exit_code, timed_out, end, evidence):
    c = Canaries.new()
    data = _stream(c, end=end)
    outcomes, _, complete, tamper = _read(data, c, exit_code=exit_code, timed_out=timed_out, timeout_s=5)
    assert outcomes and not complete
    assert any(evidence in t for t in tamper), tamper


def test_a_session_that_never_started_is_an_error_not_tampering():
    c = Canaries.new()
    outcomes, errors, complete, tamper = _read(b"", c, exit_code=127, timed_out=False)
    assert not outcomes and not complete and tamper == []
    assert errors == ["the session never started (exit 127)"]


# --------------------------------------------------------------------------- the runner's side


def _run_done(tmp_path):
    from kit.run.runner import run_experiment
    from tests.support.helpers import experiment, run_json, write_profile

    profile = write_profile(tmp_path, "scripted/done", "native")
    out = run_experiment(
        experiment("done", profile, ["micro-slugify"], ["vibe"]),
        results_dir=tmp_path / "results",
        progress=False,
    )
    (run_dir,) = (out / "runs").iterdir()
    return run_json(run_dir)


def test_a_run_whose_scoring_fails_is_recorded_unscored_with_every_requirement_failed(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise OSError("disk on fire")

    monkeypatch.setattr(scoring, "copy_clean", broken)
    run = _run_done(tmp_path)
    assert run["outcome"] == "unscored" and "disk on fire" in run["error"]
    assert run["score"]["requirements_failed"] == run["score"]["requirements_total"] == 7
    assert run["score"]["unscored_reason"] == "scoring failed: OSError: disk on fire"


def test_a_run_whose_report_was_tampered_with_gets_outcome_tampered(tmp_path, monkeypatch):
    copy = scoring.copy_clean

    def copy_then_tamper(src, dest):  # as if the agent had left the patch in its module
        dropped = copy(src, dest)
        module = dest / "textkit.py"
        module.write_text(REPORT_PATCH + module.read_text())
        return dropped

    monkeypatch.setattr(scoring, "copy_clean", copy_then_tamper)
    run = _run_done(tmp_path)
    assert run["outcome"] == "tampered" and run["score"]["tampered"] is True
    assert run["score"]["requirements_failed"] == 7 and run["score"]["tamper_evidence"]


def test_the_report_counts_tampered_and_unscored_runs(tmp_path):
    import json

    from kit import analysis
    from kit.analysis import report
    from tests.support.records import write_experiment

    exp = write_experiment(tmp_path)
    run_files = sorted(exp.glob("runs/*/run.json"))
    assert report.TAMPERED_LABEL not in report.describe(analysis.load(exp))
    for path, field, value in ((run_files[0], "tampered", True), (run_files[1], "unscored_reason", "boom")):
        data = json.loads(path.read_text())
        data["score"][field] = value
        path.write_text(json.dumps(data))
    text = report.describe(analysis.load(exp))
    assert f"NOTE: {report.TAMPERED_LABEL} (1 of {len(run_files)} runs)" in text
    assert f"NOTE: {report.UNSCORED_LABEL} (1 of {len(run_files)} runs)" in text


SCORE_FIELDS = (
    "requirements_total", "requirements_failed", "defects", "own_tests_total", "regressions",
    "tests_added", "tampered", "requirements_gamed", "requirements_sealed", "unscored_reason",
)  # fmt: skip


_UNDER_BWRAP: dict = {}


@pytest.mark.parametrize("sandbox", backends(*CONTAINER_BACKENDS))
def test_scoring_in_a_container_gives_the_score_bwrap_gives(tmp_path, sandbox):
    """The same clone, unsolved and solved, scored in fresh containers and in bwrap: the same score."""
    task = load_task("micro-slugify")
    ws = create_workspace(task, tmp_path / "ws")
    for stage in ("start", "solved"):
        if stage == "solved":
            apply_solution(task, ws.root)
        if stage not in _UNDER_BWRAP:  # (the same for each engine: scored once)
            _UNDER_BWRAP[stage] = score(task, ws, claimed_done=True, sandbox="bwrap")
        want = _UNDER_BWRAP[stage]
        got = score(task, ws, claimed_done=True, sandbox=sandbox)
        assert {f: getattr(got, f) for f in SCORE_FIELDS} == {f: getattr(want, f) for f in SCORE_FIELDS}, (
            stage
        )
        assert [r.test for r in got.failed] == [r.test for r in want.failed]
    assert want.requirements_failed == 0 and want.requirements_total > 0
