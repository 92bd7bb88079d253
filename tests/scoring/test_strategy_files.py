"""The strategies' own working files (kit.paths.STRATEGY_FILES) are no part of what is scored: the
scored copy holds, at each of them, what the base holds there, and the lines changed do not count
them -- for every run, whatever strategy ran (RT45: a hidden test could tell harness's runs by
feature_list.json)."""

from __future__ import annotations

import pytest

from kit import paths
from kit.errors import ConfigError
from kit.paths import STRATEGY_FILES, is_owned, owned_paths
from kit.scoring.clean_copy import as_at_base
from kit.scoring.diffstats import line_stats
from kit.strategies import STRATEGIES, harness, linear
from kit.strategies.options import LinearOptions, check_options, option_models
from kit.strategies.pdca.settings import STATUS_DIR
from kit.tasks.snapshot import TOP_LEVEL_SKIP, snapshot
from tests.importers.test_attack39f import _clone

DEFAULTS = (".pdca/status", "PLAN.md", "feature_list.json", "harness-progress.md", "init.sh")


def test_every_strategy_declares_its_files_and_reads_its_names_from_the_declaration():
    assert set(STRATEGY_FILES) == set(STRATEGIES)
    assert STRATEGY_FILES["harness"] == harness.NAMES
    assert (harness.FEATURE_LIST, harness.INIT_SH, harness.PROGRESS) == (
        "feature_list.json",
        "init.sh",
        "harness-progress.md",
    )
    assert linear.PLAN_FILE == LinearOptions().plan_file == "PLAN.md"
    assert STATUS_DIR == ".pdca/status" and TOP_LEVEL_SKIP == (STATUS_DIR,)
    for strategy, names in paths.PATH_OPTIONS.items():  # an option of the same name, same default
        fields = option_models()[strategy].model_fields
        assert all(fields[name].default == STRATEGY_FILES[strategy][name] for name in names)


def test_the_paths_left_out_are_every_strategys_and_the_experiments_moved_plan_file():
    assert owned_paths() == DEFAULTS
    moved = owned_paths({"linear": {"plan_file": "./notes/HAIKU.md"}, "vibe": {"max_steps": 3}})
    assert moved == tuple(sorted((*DEFAULTS, "notes/HAIKU.md")))  # the default PLAN.md stays left out
    assert is_owned("PLAN.md", DEFAULTS) and is_owned("./init.sh", DEFAULTS)
    assert is_owned(".pdca/status/t-1.md", DEFAULTS)
    for kept in (
        "docs/PLAN.md",
        "PLAN.md.bak",
        "plan.md",
        ".pdca/notes.md",
        "src/init.sh",
        "feature_list.py",
    ):
        assert not is_owned(kept, DEFAULTS), kept


@pytest.mark.parametrize("bad", ["calc.py", "../PLAN.md", "/tmp/PLAN.md", ".git/PLAN", "pkg/x.pyi", ""])
def test_a_plan_file_on_code_or_outside_the_clone_is_refused_before_any_run(bad):
    with pytest.raises(ConfigError, match="plan_file"):
        check_options("linear", {"plan_file": bad})
    check_options("linear", {"plan_file": "notes/plan.txt"})


def test_the_scored_copy_holds_the_bases_version_at_each_working_file_and_nothing_else_changes(tmp_path):
    base, tree = tmp_path / "base", tmp_path / "tree"
    for rel, text in {"init.sh": "#!/bin/sh\nmake\n", "calc.py": "x = 1\n", "docs/a.md": "a\n"}.items():
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_text(text)
    files = {
        "PLAN.md": "plan\n",  # linear's (or a vibe agent's): not in the base -> gone
        "init.sh": "#!/bin/sh\npytest\n",  # harness's over the repository's own -> the base's again
        "harness-progress.md": "# Progress\n",
        "calc.py": "x = 2\n",  # the agent's code: kept
        "docs/PLAN.md": "kept\n",  # another path: kept
        "PLAN.md.bak": "kept\n",
        ".pdca": "a file where pdca keeps a folder\n",
    }
    for rel, text in files.items():
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(text)
    (tree / "feature_list.json").mkdir()  # a folder at a working file's path goes too
    (tree / "feature_list.json" / "x.py").write_text("y = 1\n")
    as_at_base(tree, base, owned_paths())
    held = sorted(str(p.relative_to(tree)) for p in tree.rglob("*") if p.is_file())
    assert held == [".pdca", "PLAN.md.bak", "calc.py", "docs/PLAN.md", "init.sh"]
    assert (tree / "init.sh").read_text() == "#!/bin/sh\nmake\n" and (
        tree / "calc.py"
    ).read_text() == "x = 2\n"
    assert (tree / ".pdca").read_text() == files[".pdca"]  # (.pdca/status is the folder left out)


def test_a_working_folder_the_base_holds_is_laid_back_whole(tmp_path):
    base, tree = tmp_path / "base", tmp_path / "tree"
    (base / "notes" / "deep").mkdir(parents=True)
    (base / "notes" / "deep" / "a.txt").write_text("base\n")
    tree.mkdir()
    (tree / "notes").write_text("the agent made it a file\n")
    as_at_base(tree, base, ("notes/deep",))
    assert (tree / "notes" / "deep" / "a.txt").read_text() == "base\n"


def test_the_lines_changed_leave_out_the_working_files(tmp_path):
    ws = _clone(tmp_path)
    (ws.root / "PLAN.md").write_text("1. change\n2. test\n")
    (ws.root / "feature_list.json").write_text('[{"id": "F1", "passes": true}]\n')
    (ws.root / "data.txt").write_text("new\n")  # the agent's work: 50 lines removed, 1 added
    with snapshot(ws.root, ws.sandbox) as snap:
        everything, scored = line_stats(ws, snap), line_stats(ws, snap, owned_paths())
    assert (everything.files, everything.added) == (3, 4)
    assert (scored.files, scored.added, scored.removed) == (1, 1, 50)
