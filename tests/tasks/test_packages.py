"""A task's ``packages`` import from the tree under test, never from the kit's environment -- here the
kit's .venv has ``idna`` installed, and the task's repo provides a package of that name too."""

import importlib.util

import pytest

from kit.agent.toolbox import Toolbox
from kit.config import Limits
from kit.errors import ConfigError
from kit.importers.validate import validate_task
from kit.scoring.scorer import score
from kit.tasks.packages import command_env
from tests.tasks.taskmaker import make_task, workspace

INSTALLED = importlib.util.find_spec("idna")
pytestmark = pytest.mark.skipif(INSTALLED is None, reason="needs idna installed in the kit's environment")

TREE = """
MARK = "tree"


def encode(text):
    raise NotImplementedError
"""
OWN = """
import idna


def test_the_trees_package():
    assert idna.MARK == "tree"
"""
HIDDEN = """
import pytest

import idna


@pytest.mark.severity("major")
def test_encode():
    assert idna.encode("abc") == b"abc"  # the installed idna does this too
"""
SOLVED = TREE.replace("raise NotImplementedError", 'return text.encode("ascii")')


def _task(tmp_path, root=""):
    pkg = f"{root}idna/__init__.py"
    return make_task(
        tmp_path / f"pkg{root.strip('/')}",
        {pkg: TREE, "tests/test_own.py": OWN},
        {"test_encode.py": HIDDEN},
        {pkg: SOLVED},
        packages=["idna"],
    )


@pytest.mark.parametrize("root", ["", "src/"])
def test_a_package_also_installed_in_the_kits_environment_is_scored_from_the_tree(tmp_path, root):
    # before: the installed idna shadowed the tree's (the repo goes last on sys.path): its encode
    # passed the hidden test at the start, and the own test failed (no MARK)
    task = _task(tmp_path, root)
    report = validate_task(task)
    assert report.ok, report.problems


def test_a_package_missing_from_the_tree_never_falls_back_to_the_installed_one(tmp_path):
    # before: the agent deleted its package and the installed one met the requirement
    task = _task(tmp_path)
    ws = workspace(task, tmp_path)
    (ws.root / "idna" / "__init__.py").unlink()
    (ws.root / "idna").rmdir()
    s = score(task, ws, claimed_done=True)
    assert s.requirements_failed == 1 and "in the tree under test" in s.failed[0].message, s.failed
    assert s.regressed_tests == ["tests/test_own.py::test_the_trees_package"]


def test_the_agents_commands_import_the_package_from_the_clone(tmp_path):
    task = _task(tmp_path)
    ws = workspace(task, tmp_path, solved=False)
    probe = "cd tests && python -c 'import idna; print(idna.__file__)'"  # (cwd: not the clone's root)
    box = Toolbox(ws.root, {"exec"}, env=command_env(task.packages, task.repo_dir, ws.root))
    result = box.execute("run", {"command": probe})
    from kit.sandbox.view import VIEW_REPO

    # the clone, as the agent sees it: at its neutral path in the sandbox (kit.sandbox.view), else as is
    clone = {str(ws.root / "idna" / "__init__.py"), str(VIEW_REPO / "idna" / "__init__.py")}
    assert result.output.splitlines()[0] in clone, result.output
    bare = Toolbox(ws.root, {"exec"}).execute("run", {"command": probe})
    assert "site-packages" in bare.output  # what the kit's environment alone gives


def test_the_run_context_gives_the_agent_and_the_gates_the_packages_environment(tmp_path):
    from tests.support.context import run_context
    from tests.support.pdca import scripted_profile

    task = _task(tmp_path)
    profile, sheet = scripted_profile(lambda request: None)
    ctx = run_context(tmp_path / "run", "vibe", profile, sheet, task=task, limits=Limits())
    expected = str(ctx.workspace.root)
    assert ctx.toolbox("coder", {"exec"}).env == {"PYTHONPATH": expected}
    assert ctx.command_env()["PYTHONPATH"] == expected


@pytest.mark.parametrize("name", ["json", "pytest", "more.itertools"])
def test_a_name_the_tree_cannot_provide_is_refused(tmp_path, name):
    with pytest.raises(ConfigError, match="packages"):
        make_task(tmp_path / "bad", {"x.py": ""}, {"test_x.py": ""}, packages=[name])
