"""The laid hidden files of the ``repo`` layout -- and the folders holding them -- are out of the code
under test's reach while it is scored; an ``__init__.py`` the agent adds on a hidden path is not
imported. (attack-scoring-1: 08 renamed the laid data folder away at import and put its own in
place; 06 planted a tests/__init__.py.) Small tasks written here, no third-party code."""

import pytest

from kit.sandbox.backends import CONTAINER_BACKENDS
from kit.scoring.layout import lay
from kit.scoring.scorer import score
from tests.support.sandboxes import backends, skip_unless_ready
from tests.tasks.taskmaker import make_task, workspace, write_tree

RENDER = """
def render(kind):
    raise NotImplementedError
"""
SOLVED = RENDER.replace("raise NotImplementedError", 'return "<" + kind + ">"')
HIDDEN = """
from pathlib import Path

import pytest

from shapes import render

GOLDEN = Path(__file__).parent / "golden"


@pytest.mark.severity("major")
def test_render_matches_the_golden_file():
    want = (GOLDEN / "rect.txt").read_text().strip()
    assert render("rect") == want
"""
#: At import the code under test puts its own golden file where the hidden test reads it.
SWAPS = {
    "rename-the-data-folder": (
        "os.rename(TESTS / 'golden', TESTS / '_gone')\n"
        "os.mkdir(TESTS / 'golden')\n"
        "(TESTS / 'golden' / 'rect.txt').write_text('FAKE')\n"
    ),
    "rename-the-tests-folder": (  # (a link to the moved module keeps pytest's file check happy)
        "os.rename(TESTS, TESTS.parent / '_tests')\n"
        "os.makedirs(TESTS / 'golden')\n"
        "(TESTS / 'golden' / 'rect.txt').write_text('FAKE')\n"
        "os.symlink(TESTS.parent / '_tests' / 'test_render.py', TESTS / 'test_render.py')\n"
    ),
    "replace-the-file": (
        "(TESTS / 'fake.txt').write_text('FAKE')\nos.replace(TESTS / 'fake.txt', TESTS / 'golden' / 'rect.txt')\n"
    ),
    # F7 (attack-iso-2): a user + mount namespace of the pytest process's own, a tmpfs over the folder
    "mount-over-the-data-folder": (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "uid, gid = os.getuid(), os.getgid()\n"
        "if libc.unshare(0x10000000 | 0x00020000) != 0:\n"
        "    raise OSError(ctypes.get_errno(), 'unshare')\n"
        "Path('/proc/self/setgroups').write_text('deny')\n"
        "Path('/proc/self/uid_map').write_text(f'{uid} {uid} 1')\n"
        "Path('/proc/self/gid_map').write_text(f'{gid} {gid} 1')\n"
        "if libc.mount(b'none', bytes(TESTS / 'golden'), b'tmpfs', 0, None) != 0:\n"
        "    raise OSError(ctypes.get_errno(), 'mount')\n"
        "(TESTS / 'golden' / 'rect.txt').write_text('FAKE')\n"
    ),
    "remove-and-rewrite": (
        "import shutil\nshutil.rmtree(TESTS / 'golden')\nos.mkdir(TESTS / 'golden')\n"
        "(TESTS / 'golden' / 'rect.txt').write_text('FAKE')\n"
    ),
}
CHEAT = """
import os
from pathlib import Path

TESTS = Path(__file__).resolve().parent / "tests"
try:
{swap}except OSError:
    pass


def render(kind):
    return "FAKE"
"""


def _task(tmp_path):
    return make_task(
        tmp_path / "golden",
        {"shapes.py": RENDER, "tests/test_own.py": "def test_nothing():\n    assert True\n"},
        {"tests/test_render.py": HIDDEN, "tests/golden/rect.txt": "<rect>\n"},
        {"shapes.py": SOLVED},
        acceptance_layout="repo",
        packages=["shapes"],
    )


def test_the_reference_solution_reads_the_laid_golden_file(tmp_path):
    task = _task(tmp_path)
    s = score(task, workspace(task, tmp_path), claimed_done=True)
    assert s.requirements_failed == 0 and not s.tampered and not s.suspicious, s


@pytest.mark.parametrize("how", sorted(SWAPS))
def test_the_code_under_test_cannot_swap_the_laid_data_or_its_folders(tmp_path, how):
    # before: renaming the folder (or its parent) away worked -- only the laid files were bound
    # read-only -- and the test compared the stub's output with the agent's own golden file; the
    # mount over it (F7) worked until the seccomp filter denied unshare and mount
    task = _task(tmp_path)
    ws = workspace(task, tmp_path, solved=False)
    swap = "".join("    " + line + "\n" for line in SWAPS[how].splitlines())
    (ws.root / "shapes.py").write_text(CHEAT.format(swap=swap))
    s = score(task, ws, claimed_done=True)
    assert s.requirements_failed == s.requirements_total == 1, s


@pytest.mark.parametrize("sandbox", backends(*CONTAINER_BACKENDS))
def test_a_mount_over_the_data_folder_gets_no_credit_in_a_container(tmp_path, sandbox):
    # before: under podman the mount worked as under bwrap (its seccomp profile allowed unshare and
    # mount) and the test was credited; docker's profile already refused them
    skip_unless_ready(sandbox)
    task = _task(tmp_path)
    ws = workspace(task, tmp_path, solved=False)
    swap = "".join("    " + line + "\n" for line in SWAPS["mount-over-the-data-folder"].splitlines())
    (ws.root / "shapes.py").write_text(CHEAT.format(swap=swap))
    s = score(task, ws, claimed_done=True, sandbox=sandbox)
    assert s.unscored_reason is None and s.requirements_failed == s.requirements_total == 1, s


def test_an_init_file_the_agent_adds_on_a_hidden_path_is_removed_a_packages_own_is_kept(tmp_path):
    # before: every __init__.py on the way stayed, and pytest imported the agent's as the hidden
    # module's package -- before it compiled the hidden module
    base, acceptance, copy = tmp_path / "base", tmp_path / "acc", tmp_path / "copy"
    write_tree(base, {"pkg/__init__.py": "", "pkg/tests/test_a.py": "", "tests/test_b.py": ""})
    hidden = {
        "pkg/tests/test_a.py": "def test_a():\n    pass\n",
        "tests/test_b.py": "def test_b():\n    pass\n",
    }
    write_tree(acceptance, hidden)
    agent = {
        "pkg/__init__.py": "X = 1\n",
        "pkg/tests/__init__.py": "",
        "tests/__init__.py": "",
        "__init__.py": "",
    }
    write_tree(copy, {**agent, "tests/golden/x.txt": "agent's"})
    lay(acceptance, acceptance, copy, base)
    assert (copy / "pkg/__init__.py").read_text() == "X = 1\n"  # the package's own: the code under test
    for gone in ("pkg/tests/__init__.py", "tests/__init__.py", "__init__.py"):
        assert not (copy / gone).exists(), gone


def test_a_laid_data_folder_holds_only_the_tasks_and_the_bases_files(tmp_path):
    base, acceptance, copy = tmp_path / "base", tmp_path / "acc", tmp_path / "copy"
    write_tree(base, {"tests/data/old.txt": "base", "tests/test_a.py": ""})
    write_tree(
        acceptance, {"tests/data/cases.txt": "1 2 3\n", "tests/test_a.py": "def test_a():\n    pass\n"}
    )
    write_tree(
        copy, {"tests/data/old.txt": "agent's", "tests/data/extra.txt": "agent's", "tests/mine.py": ""}
    )
    laid = lay(acceptance, acceptance, copy, base.resolve())
    data = copy.resolve() / "tests" / "data"
    assert sorted(p.name for p in data.iterdir()) == ["cases.txt", "old.txt"]
    assert (data / "old.txt").read_text() == "base"
    assert laid.data_dirs == [data] and laid.pins == [copy.resolve() / "tests"]
    assert data in laid.read_only() and (copy.resolve() / "tests/test_a.py") in laid.read_only()
