"""The specification audit (``kit tasks audit``, kit/importers/spec_audit.py): each kind of gap -- a
new name, a new constant read as an attribute, an exception type, a ``match=`` message, an exact
expected string, a random seed -- on a small task whose prompt never states them; the same task
with a prompt that does has none; a ``spec_notes`` entry shows a gap as explained. Nothing is run."""

from __future__ import annotations

import pytest

from kit.app.cli import main
from kit.importers.git.prompt import changed_names, interface
from kit.importers.spec_audit import audit_task, gap_counts, literal_part
from kit.pyast import parse
from tests.tasks.taskmaker import make_task

BASE = {"parser.py": "class Parser:\n    def parse(self, text):\n        return text\n"}
SOLUTION = {
    "parser.py": (
        "import random\n\n\nclass Parser:\n    MAX_NESTING_DEPTH = 100\n\n"
        "    def parse(self, text, *, strict=False):\n"
        "        if text.count('[') > self.MAX_NESTING_DEPTH:\n"
        "            raise LookupError('nesting deeper than the limit')\n"
        "        return text\n\n\n"
        "def shuffled(items):\n    return random.sample(items, len(items))\n\n\n"
        "def render(items):\n    return ' | '.join(items) + ' (end)'\n"
    )
}
HIDDEN = """
import random

import pytest

from parser import Parser, render, shuffled


@pytest.mark.severity("major")
def test_depth_limit():
    with pytest.raises(LookupError, match="deeper than the limit"):
        Parser().parse("[" * (Parser.MAX_NESTING_DEPTH + 1), strict=True)


@pytest.mark.severity("minor")
def test_order():
    random.seed(0)
    assert shuffled(["a", "b", "c"]) == ["c", "a", "b"]


class TestRender:
    def check(self, items):
        assert render(items) == "x | y (end)"

    @pytest.mark.severity("major")
    def test_render(self):
        self.check(["x", "y"])
"""
VAGUE = "Make the parser refuse deep nesting, add a shuffle and a renderer.\n"
FULL = (
    "Parser.MAX_NESTING_DEPTH = 100: `parse(text, *, strict=False)` raises LookupError ('nesting "
    "deeper than the limit') past it. shuffled(items): random.sample (the tests fix the random seed). "
    "render(items) joins with ' | ' and appends ' (end)': 'x | y (end)'.\n"
)


def _task(tmp_path, prompt, **fields):
    return make_task(tmp_path / "t", BASE, {"test_parser.py": HIDDEN}, SOLUTION, prompt=prompt, **fields)


def test_each_kind_of_gap_the_prompt_never_states(tmp_path):
    gaps = audit_task(_task(tmp_path, VAGUE))
    rows = {(g.test.split("::", 1)[1], g.kind, g.what) for g in gaps}
    assert rows == {  # not Parser, parse or random: the base defines them
        ("test_depth_limit", "exception", "LookupError"),
        ("test_depth_limit", "message", "deeper than the limit"),
        ("test_depth_limit", "attribute", "MAX_NESTING_DEPTH"),
        ("test_depth_limit", "name", "strict"),  # a keyword the change adds
        ("test_order", "name", "shuffled"),
        ("test_order", "seed", "random.seed(0)"),
        ("TestRender::test_render", "name", "render"),
        ("TestRender::test_render", "string", "'x | y (end)'"),  # read in the helper it calls
    }
    assert gap_counts(gaps) == {
        "name": 3,
        "attribute": 1,
        "exception": 1,
        "message": 1,
        "string": 1,
        "seed": 1,
    }
    line = next(g.line for g in gaps if g.kind == "attribute")
    assert line == 11  # the line of the hidden module that reads it


def test_a_prompt_that_states_everything_leaves_no_gap(tmp_path, capsys):
    task = _task(tmp_path, FULL)
    assert audit_task(task) == []
    assert main(["tasks", "audit", str(task.path)]) == 0  # says so in words, not as an empty table
    assert "no gaps -- nothing the hidden tests rely on is missing from the prompt" in capsys.readouterr().out


def test_an_explained_gap_is_shown_as_explained_and_the_cli_exits_by_the_unexplained(tmp_path, capsys):
    notes = [
        {"test": "*", "what": "random.seed(0)", "note": "pinned on purpose"},
        {"test": "test_parser.py::test_order", "what": "shuffled", "note": "named by the Interface"},
    ]
    task = _task(
        tmp_path,
        FULL.replace("(the tests fix the random seed)", "").replace("shuffled", "shuffle"),
        spec_notes=notes,
    )
    gaps = audit_task(task)
    assert [(g.kind, g.note) for g in gaps] == [
        ("seed", "pinned on purpose"),
        ("name", "named by the Interface"),
    ]
    assert gap_counts(gaps) == {}
    assert main(["tasks", "audit", str(task.path)]) == 0
    out = capsys.readouterr().out
    assert "test_parser.py::test_order  16  seed  random.seed(0)  (explained: pinned on purpose)" in out
    assert "unexplained gaps: 0 (none); explained: 2" in out
    vague = _task(tmp_path / "v", VAGUE)
    assert main(["tasks", "audit", str(vague.path)]) == 1
    assert "test_parser.py::test_depth_limit  10  exception  LookupError" in capsys.readouterr().out


def test_an_audit_over_its_work_budget_stops_and_says_so_never_a_silent_pass(tmp_path, capsys, monkeypatch):
    """The audit's work is bounded (a hidden test module is hostile input): over the budget it
    stops, and an ``incomplete`` gap says how many tests were not audited -- unexplained whatever
    the spec notes say, so ``tasks audit`` exits 1 and build-suite refuses the task."""
    from kit.importers import spec_nodes
    from kit.importers.spec_audit import report_line

    task = _task(tmp_path, FULL, spec_notes=[{"test": "*", "what": "*", "note": "all explained"}])
    assert audit_task(task) == []
    monkeypatch.setattr(spec_nodes, "MAX_WORK", 40)
    gaps = audit_task(task)
    assert gap_counts(gaps) == {"incomplete": 1}
    stop = next(g for g in gaps if g.kind == "incomplete")
    assert stop.note is None and stop.what.startswith(
        "audit incomplete: its work budget (40 steps) was spent"
    )
    assert " of 3 hidden test(s) not audited" in stop.what
    assert report_line(gaps).startswith("audit incomplete: ")
    assert main(["tasks", "audit", str(task.path)]) == 1
    assert "audit incomplete: " in capsys.readouterr().out


def test_test_classes_whose_bases_make_a_cycle_are_audited_not_a_recursion_error(tmp_path, monkeypatch):
    """``class TestA(TestB)`` / ``class TestB(TestA)`` in a hidden module (it never imports, but the
    audit only reads it) made the old audit recurse until RecursionError; 20 classes each based on
    all the others stop at the work budget instead."""
    test = '    @pytest.mark.severity("major")\n    def test_x(self):\n        assert render(["x"]) == "x"\n'
    two = f"import pytest\nfrom parser import render\n\nclass TestA(TestB):\n    pass\n\nclass TestB(TestA):\n{test}"
    task = make_task(tmp_path / "two", BASE, {"test_parser.py": two}, SOLUTION, prompt=FULL)
    assert audit_task(task) == []
    many = "import pytest\nfrom parser import render\n\n" + "".join(
        f"class C{i}(" + ", ".join(f"C{j}" for j in range(20) if j != i) + "):\n    pass\n\n"
        for i in range(20)
    )
    task = make_task(
        tmp_path / "many", BASE, {"test_parser.py": many + f"class TestX(C0):\n{test}"}, SOLUTION, prompt=FULL
    )
    from kit.importers import spec_nodes

    monkeypatch.setattr(spec_nodes, "MAX_WORK", 20_000)  # the same stop as 500,000, sooner
    assert gap_counts(audit_task(task)) == {"incomplete": 1}


@pytest.mark.parametrize(
    ("pattern", "literal"),
    [
        ("deeper than the limit", "deeper than the limit"),
        (r"^Comment cannot\.+ contain (line )?breaks$", "Comment cannot."),
        (r"a\.b\(c\)", "a.b(c)"),
    ],
)
def test_the_literal_part_of_a_match_pattern(pattern, literal):
    assert literal_part(pattern) == literal


def test_the_interface_lists_the_constants_and_attributes_the_hidden_tests_read():
    names = changed_names({"parser.py": (BASE["parser.py"], SOLUTION["parser.py"])})
    test = next(n for n in parse(HIDDEN).body if getattr(n, "name", "") == "test_depth_limit")
    used = interface(names, [test])
    assert [n.line() for n in used if "MAX" in n.qualname] == [
        "- `Parser.MAX_NESTING_DEPTH = 100` in `parser` (new)"
    ]


def test_a_task_folder_validate_refuses_is_refused_by_the_audit_before_anything_is_read(tmp_path, capsys):
    """acceptance/ holding a link to a host folder of tests: the audit read them through the link and
    said "no gaps" (exit 0) on a folder validate refuses."""
    import shutil

    from kit.errors import TaskError

    task = _task(tmp_path, FULL)
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.move(task.acceptance_dir / "test_parser.py", outside / "test_parser.py")
    (task.acceptance_dir / "tests").symlink_to(outside)
    with pytest.raises(TaskError, match=r"refused, not audited: .*acceptance/tests is a symbolic link"):
        audit_task(task)
    assert main(["tasks", "audit", str(task.path)]) == 1
    out = capsys.readouterr().out
    assert "refused, not audited" in out and "no gaps" not in out


TABLE_TESTS = """
import pytest

from parser import render


def assert_equal(expected, result):
    assert expected == result


@pytest.mark.severity("major")
def test_table_layout():
    expected = "\\n".join(["| name   |   count |", "|:-------|--------:|"])
    assert_equal(expected, render(["n", "c"]))


@pytest.mark.severity("major")
def test_round_trip():
    text = "\\n".join(["| keep | this |", "|:-----|-----:|"])
    assert render(text) == text
"""


def test_an_expected_string_kept_in_a_variable_is_read_and_a_round_trip_is_not_a_gap(tmp_path):
    """A new user's import of python-tabulate 8014ec6 ('Fix alignments in `github` tables', four tests
    comparing `expected = "\\n".join([...])` through the module's `assert_equal`) printed 'no gaps'
    for a 17-token prompt: the audit read only literals on the sides of `==` / assertEqual. A name
    assigned one static string and only compared is read now; one the test also passes in (a round
    trip: the expected value is the input) is not a gap."""
    task = make_task(tmp_path / "t", BASE, {"test_table.py": TABLE_TESTS}, SOLUTION, prompt=VAGUE)
    rows = {(g.test.split("::", 1)[1], g.kind, g.what) for g in audit_task(task)}
    assert ("test_table_layout", "string", repr("| name   |   count |\n|:-------|--------:|")) in rows
    assert not [r for r in rows if r[0] == "test_round_trip" and r[1] == "string"], rows
