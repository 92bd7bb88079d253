"""Red team of the strategies' working files in scoring (merge fc60997: kit.paths.owned_paths, the
scored copy holds the base's version at each; the lines changed leave them out) -- as an experiment
file's author (linear's ``plan_file``), and as the agent under test."""

from __future__ import annotations

import os

import pytest

from kit import strategies
from kit.config import Experiment
from kit.errors import ConfigError
from kit.paths import owned_paths
from kit.run.runner import _narrowed
from kit.scoring.clean_copy import as_at_base, copy_clean
from kit.scoring.diffstats import line_stats
from kit.scoring.scorer import score
from kit.strategies.options import check_options
from kit.tasks.snapshot import snapshot
from kit.tasks.task import load_task
from tests.importers.test_attack39f import _clone
from tests.tasks.taskmaker import make_task, workspace

DEFAULTS = owned_paths()

REPO = {
    "calc/__init__.py": "from calc.ops import add\n",
    "calc/ops.py": "def add(a, b):\n    raise NotImplementedError\n",
    "tests/test_ops.py": "def test_import():\n    import calc\n",
}
HIDDEN = {
    "test_hidden.py": """
    from calc import add

    def test_add():
        assert add(2, 3) == 5
    """
}
SOLUTION = {"calc/ops.py": "def add(a, b):\n    return a + b\n"}


def _task(tmp_path, **fields):
    task = make_task(tmp_path / "task", REPO, HIDDEN, SOLUTION, **fields)
    return task, workspace(task, tmp_path)


# ------------------------------------------------------------------ (b) the experiment file's author


@pytest.mark.parametrize(
    "bad", [".", "./", "./.", "x/..", "PLAN.md\x00", "PLAN\n.md", ".GIT/plan", "C:/plan"]
)
def test_a_plan_file_naming_the_clone_itself_or_with_a_nul_is_refused(bad):
    """RTS-1: "." (and "./") passed the check and became the owned path "" -- the clone's root: the
    whole scored copy was set back to the base (every run scored as the unsolved base)."""
    with pytest.raises(ConfigError, match="plan_file"):
        check_options("linear", {"plan_file": bad})


def test_the_plan_file_of_a_strategy_the_experiment_does_not_run_is_checked_too():
    """RTS-2: check_experiment checked the options of the strategies run only, but owned_paths reads
    linear's plan_file for every run: ``strategies: [vibe]`` with ``linear: {plan_file: ../../x}`` went
    unchecked into scoring."""
    experiment = Experiment.model_validate(
        {
            "name": "x",
            "tasks": ["t"],
            "strategies": ["vibe"],
            "profile": "p",
            "strategy_options": {"linear": {"plan_file": "../../victim"}},
        }
    )
    with pytest.raises(ConfigError, match="plan_file"):
        strategies.check_experiment(experiment)


@pytest.mark.parametrize("bad", ["../../victim", ".", "", "a\x00b", "x/../../y", ".git/config", "\\..\\v"])
def test_an_unchecked_plan_file_out_of_the_clone_is_never_an_owned_path(bad):
    assert owned_paths({"linear": {"plan_file": bad}}) == DEFAULTS


def test_as_at_base_never_deletes_or_reads_outside_the_scored_copy(tmp_path):
    """RTS-3: as_at_base took ``tree / "../victim"``: it removed the folder beside the scored copy (and
    laid the one beside the base in)."""
    tree, base = tmp_path / "sub" / "tree", tmp_path / "sub" / "base"
    for folder in (tree, base):
        folder.mkdir(parents=True)
    (tree / "calc.py").write_text("x = 2\n")
    (tmp_path / "victim").mkdir()
    (tmp_path / "victim" / "keep.txt").write_text("mine\n")
    (tmp_path / "secret.txt").write_text("secret\n")
    as_at_base(tree, base, ("../../victim", "../../secret.txt", "", ".", "/etc/passwd", "a\x00b"))
    assert (tmp_path / "victim" / "keep.txt").read_text() == "mine\n"
    assert (tree / "calc.py").read_text() == "x = 2\n"
    assert sorted(os.listdir(tree)) == ["calc.py"]


def test_a_plan_file_of_dot_does_not_score_the_solved_clone_as_the_base(tmp_path):
    """RTS-1 end to end: the own files ``owned_paths`` gave before the fix for ``plan_file: "."``."""
    task, ws = _task(tmp_path)
    s = score(task, ws, claimed_done=True, own_files=("", *DEFAULTS))
    assert not s.unscored_reason and (s.requirements_total, s.requirements_failed) == (1, 0), s
    assert s.files_touched == 1


@pytest.mark.xfail(
    strict=True,
    reason="a plan_file naming a folder of code (`calc`) is accepted: scoring sets the agent's package "
    "back to the base's (an experiment author's own choice; the check refuses .py files only, and a "
    "suffix-less path may be a plan file)",
)
def test_a_plan_file_on_a_folder_of_code_is_refused():
    with pytest.raises(ConfigError, match="plan_file"):
        check_options("linear", {"plan_file": "calc"})


# ------------------------------------------------------------------ (a) the agent under test


def test_pdcas_folder_is_no_leftover_a_hidden_test_can_see(tmp_path):
    """RTS-4: the snapshot leaves ``.pdca/status`` out but kept an empty ``.pdca/`` above it: a
    hidden test ``assert not os.path.exists('.pdca')`` failed pdca's runs only."""
    ws = _clone(tmp_path)
    (ws.root / ".pdca" / "status").mkdir(parents=True)
    (ws.root / ".pdca" / "status" / "t-1.md").write_text("# PLAN\n")
    (ws.root / "notes").mkdir()
    (ws.root / "notes" / "PLAN.md").write_text("moved plan\n")
    (ws.root / "docs").mkdir()
    (ws.root / "docs" / "PLAN.md").write_text("kept: not a working file\n")
    base = tmp_path / "base"
    (base / "docs").mkdir(parents=True)
    with snapshot(ws.root, ws.sandbox) as snap:
        copy_clean(snap.tree, tmp_path / "acc")
    as_at_base(tmp_path / "acc", base, owned_paths({"linear": {"plan_file": "notes/PLAN.md"}}))
    held = sorted(os.listdir(tmp_path / "acc"))
    assert ".pdca" not in held and "notes" not in held and "docs" in held, held


def test_a_folder_kept_by_the_base_above_a_working_file_stays(tmp_path):
    tree, base = tmp_path / "tree", tmp_path / "base"
    (tree / ".pdca" / "status").mkdir(parents=True)
    (base / ".pdca").mkdir(parents=True)
    (base / ".pdca" / "README").write_text("the repository's own\n")
    as_at_base(tree, base, DEFAULTS)
    assert (tree / ".pdca").is_dir() and not (tree / ".pdca" / "status").exists()


def test_working_files_made_hostile_shapes_are_scored_and_hide_no_code(tmp_path):
    """The agent makes its working files a folder of code, a read-only deep folder, a FIFO, a file
    where pdca keeps a folder, and puts code the package imports under PLAN.md/: scoring still
    scores (no unscored run), the code there is not the agent's (the import fails), and the lines
    changed count only ``calc/``."""
    task, ws = _task(tmp_path)
    root = ws.root
    (root / "PLAN.md").mkdir()
    (root / "PLAN.md" / "helper.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "calc" / "ops.py").write_text(
        "import sys, os\nsys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'PLAN.md'))\n"
        "from helper import add\n"
    )
    deep = root / "feature_list.json" / "a" / "b"
    deep.mkdir(parents=True)
    (deep / "x.txt").write_text("x\n")
    os.chmod(deep, 0o500)
    os.chmod(root / "feature_list.json", 0o500)
    os.mkfifo(root / "harness-progress.md")
    (root / ".pdca").write_text("a file\n")
    (root / "init.sh").symlink_to("/etc/passwd")
    try:
        s = score(task, ws, claimed_done=True)
    finally:
        os.chmod(root / "feature_list.json", 0o700)
        os.chmod(deep, 0o700)
    assert not s.unscored_reason, s.unscored_reason
    assert (s.requirements_total, s.requirements_failed) == (1, 1)  # helper.py under PLAN.md/ is not scored
    assert s.files_touched == 2, s  # calc/ops.py and .pdca (a file: not .pdca/status)


# ------------------------------------------------------------------ (b) a hostile task's repo/


@pytest.mark.parametrize("target", [".", "calc", "calc/ops.py", "nowhere"])
def test_a_tasks_link_at_a_working_file_is_laid_back_without_following_it_round_a_loop(tmp_path, target):
    """RTS-5: the base's ``init.sh -> .`` was laid back with copytree following links: init.sh/init.sh/...
    until ELOOP, every run of the task unscored. (A link out of the repository is refused by the base's
    extraction: tarfile's data filter.)"""
    folder = tmp_path / "task"
    make_task(folder, REPO, HIDDEN, SOLUTION)
    (folder / "repo" / "init.sh").symlink_to(target)
    task = load_task(folder)
    s = score(task, workspace(task, tmp_path), claimed_done=True)
    assert not s.unscored_reason, s.unscored_reason
    assert (s.requirements_total, s.requirements_failed) == (1, 0)


def test_a_run_narrowed_to_other_strategies_is_scored_with_the_experiments_plan_file_left_out():
    """RTS-6: ``--strategies vibe`` dropped linear's options from the runs' experiment: its vibe runs
    were scored with ``notes/PLAN.md`` as the agent's, the same experiment's full runs without it."""
    experiment = Experiment.model_validate(
        {
            "name": "x",
            "tasks": ["t"],
            "strategies": ["vibe", "linear"],
            "profile": "p",
            "strategy_options": {"linear": {"plan_file": "notes/PLAN.md", "reviewers": 1}},
        }
    )
    run, full = _narrowed(experiment, {"strategies": ["vibe"]})
    assert owned_paths(run.strategy_options) == owned_paths(full.strategy_options) != DEFAULTS
    assert run.strategy_options == {"linear": {"plan_file": "notes/PLAN.md"}}  # (no other option of it)


def test_a_file_named_with_a_backslash_is_counted_as_it_is_scored(tmp_path):
    """RTS-7: ``is_owned`` read a git path's ``\\`` as a separator: the agent's file ``PLAN.md\\impl.py``
    (one name on Linux, kept in the scored copy: as_at_base removes ``PLAN.md`` only) was left out of
    the lines changed -- code the tests ran, counted as no line."""
    ws = _clone(tmp_path)
    (ws.root / "PLAN.md\\impl.py").write_text("def add(a, b):\n    return a + b\n")
    (ws.root / "init.sh\\").write_text("x\n")
    with snapshot(ws.root, ws.sandbox) as snap:
        stats = line_stats(ws, snap, owned_paths())
        copy_clean(snap.tree, tmp_path / "acc")
    as_at_base(tmp_path / "acc", tmp_path / "nobase", owned_paths())
    assert sorted(p.name for p in (tmp_path / "acc").iterdir() if "\\" in p.name) == [
        "PLAN.md\\impl.py",
        "init.sh\\",
    ]
    assert (stats.files, stats.added) == (2, 3)


def test_code_linked_to_a_working_file_is_scored_and_counted_where_the_link_is(tmp_path):
    """The agent writes its code in PLAN.md and links ``impl.py`` to it (or ``plans`` to a working
    folder): the snapshot takes the file link as a file, counted and scored at ``impl.py``; the folder
    link is dropped. Nothing is scored that is not counted."""
    ws = _clone(tmp_path)
    (ws.root / "PLAN.md").write_text("def add(a, b):\n    return a + b\n")
    (ws.root / "impl.py").symlink_to("PLAN.md")
    (ws.root / "feature_list.json").mkdir()
    (ws.root / "feature_list.json" / "more.py").write_text("x = 1\n")
    (ws.root / "plans").symlink_to("feature_list.json")
    with snapshot(ws.root, ws.sandbox) as snap:
        stats = line_stats(ws, snap, owned_paths())
        copy_clean(snap.tree, tmp_path / "acc")
    as_at_base(tmp_path / "acc", tmp_path / "nobase", owned_paths())
    assert (tmp_path / "acc" / "impl.py").read_text().startswith("def add")
    assert not (tmp_path / "acc" / "plans").exists() and not (tmp_path / "acc" / "PLAN.md").exists()
    assert (stats.files, stats.added) == (1, 2)
