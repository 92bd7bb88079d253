"""Attack round 39g on import-git, build-suite, validate and the scoring of a built task (black box).

Each test below is a case that got through, asserting the SAFE behaviour, so it is an expected
failure until the kit is fixed. Everything is built in tmp_path; the kit runs as a user runs it
(``python -m kit ...`` in a subprocess, its results folder in tmp_path).

What held (tried, refused or harmless):
- tree entries ``.git/config`` / ``.git/hooks/*`` and ``sub/.git`` (a gitfile to a host repo): left out, named
- a hand-made task whose repo/ holds ``.git/`` (fsmonitor, hooks) and ``sub/.git``: validate and a scripted run ran none
- setup making .git/config, .git/info, COMMIT_EDITMSG, index, description, objects links to host paths: refused
- setup writing .git/config.worktree, include/includeIf, core.worktree, core.hooksPath, gc.auto + pre-auto-gc: nothing ran, nothing read
- setup making a nested repository (sub/.git with fsmonitor and hooks): refused
- .git/config: extensions.objectFormat with an escaped newline (config injection): refused; include.path, config.worktree: ignored
- origin URLs with tokens in userinfo, query, fragment, ssh userinfo, several remotes: cut (a ``;token=`` path parameter stays)
- packed-refs, HEAD, shallow, objects/info/alternates as named pipes; a loose object as a named pipe: refused or stopped at git's time limit
- 20 GB sparse packed-refs / shallow: refused by size; a 20 GB sparse loose ref: ignored, no memory growth
- commondir naming another repository (in a worktree folder or a plain .git): refused
- .git as a link to another repository's .git, or to a gitfile naming one: refused
- symlinks '.', '..', loops, ``../../proc/self/environ``, a chain through a link to '..': left out
- paths that are not UTF-8: refused, named
- escape sequences and bidi controls in the subject, parametrize ids, failure messages: escaped (import-git, tasks list)
- an own test printing os.environ: the sandbox's environment is scrubbed (no provider key anywhere the kit writes)
- a test writing gigabytes to every inherited descriptor: timed out, the kit's memory stayed flat
- a YAML alias bomb as task.yaml's title: refused at once
- ``1+1+...`` 5,000 deep in the solution or a test module: one clear message, no traceback
- a solution file named by a hidden test's string literal, or opened by the hidden test: not laid into acceptance/
- a suite manifest from a path: URL pattern strict, project name '..' and ids with '/' refused, --timeout over an hour refused
- a final tree with a hidden test's path made a directory: scored (failed), not unscored
- task.yaml ``packages:`` naming pytest, _pytest, pluggy, iniconfig, packaging, py: refused; naming kit,
  yaml, pydantic, tomli, exceptiongroup, numpy with a raising copy in the tree: scoring never imported it
- a Containerfile's context holding links to host files, or ``RUN --mount=type=bind`` of a host folder: podman refused
- the kit's own git on a run's base (after setup): -c pins, no hook, fsmonitor, filter or worktree of the base's config ran
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

KIT_ROOT = Path(__file__).resolve().parents[2]

BASE = {
    "calc/__init__.py": "def add(a, b):\n    return a + b\n",
    "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n",
}
HEAD = {
    "calc/__init__.py": "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n",
    "tests/test_calc.py": (
        "from calc import add, sub\n\n\ndef test_add():\n    assert add(1, 2) == 3\n\n\n"
        "def test_sub():\n    assert sub(3, 2) == 1\n"
    ),
}
WRONG_SUB = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return 99\n"


def _git(repo: Path, *args: str) -> str:
    env = dict(
        os.environ,
        GIT_AUTHOR_NAME="a",
        GIT_AUTHOR_EMAIL="a@b",
        GIT_COMMITTER_NAME="a",
        GIT_COMMITTER_EMAIL="a@b",
        GIT_AUTHOR_DATE="1700000000 +0000",
        GIT_COMMITTER_DATE="1700000000 +0000",
        GIT_CONFIG_NOSYSTEM="1",
        HOME=str(repo.parent),
    )
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, check=True
    )
    return done.stdout.strip()


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _repo(path: Path, base: dict[str, str] | None = None, head: dict[str, str] | None = None) -> Path:
    """A repository at ``path``: a base commit, then a fix commit 'add sub' (HEAD)."""
    path.mkdir(parents=True)
    _git(path, "init", "-q", "-b", "main")
    _write(path, base or BASE)
    _git(path, "add", "-A")
    _git(path, "commit", "-qm", "base")
    _write(path, head or HEAD)
    _git(path, "add", "-A")
    _git(path, "commit", "-qm", "add sub")
    return path


def _kit(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", ANTHROPIC_API_KEY="sk-ant-canary-39g")
    return subprocess.run(
        [sys.executable, "-m", "kit", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=KIT_ROOT,
        timeout=timeout,
    )


def _import(repo: Path, out: Path, task_id: str, *extra: str) -> subprocess.CompletedProcess:
    return _kit(
        "tasks", "import-git", str(repo), *extra, "--out", str(out), "--id", task_id, "--timeout", "60"
    )


def _score_as_agent(tmp_path: Path, task: Path, final: dict[str, str]) -> dict:
    """Score ``final`` (files over the task's base) as a finished run: the task's copy with ``final``
    as its reference solution, run by the scripted oracle (which writes the solution and stops)."""
    cheat = tmp_path / "cheat"
    subprocess.run(["cp", "-r", str(task), str(cheat)], check=True)
    spec = yaml.safe_load((cheat / "task.yaml").read_text())
    spec["id"] = "cheat"
    (cheat / "task.yaml").write_text(yaml.safe_dump(spec))
    _write(cheat / "solution", final)
    results = tmp_path / "results-run"
    done = _kit(
        "run", "scripted-smoke", "--tasks", str(cheat), "--results", str(results), "--quiet", "--no-report"
    )
    runs = list(results.glob("*/runs/*/run.json"))
    assert runs, done.stdout + done.stderr
    return json.loads(runs[0].read_text())["score"]


# ---------------------------------------------------------------------------------------------------
# 1. A .git file may name ANY host repository whose path merely looks like a worktree's or a
#    submodule's git folder: the check is on the path's shape, not on the repository.


def test_gitfile_naming_a_host_repository_called_modules_is_refused(tmp_path):
    """The folder handed to import-git holds only a ``.git`` file: ``gitdir: <host>/modules/.git``.
    ``modules`` is an ordinary clone elsewhere on the host (a Terraform/Ansible ``modules`` repository,
    say) -- not a submodule of anything. The kit takes ``<x>/modules/<name>`` for a submodule's git
    folder and imports the OTHER repository's history into a task: its code, tests and commit
    messages land in --out (the same for a bare ``<x>/modules/foo.git``). Safe: refused, as a gitdir
    naming a plain ``/x/victim/.git`` is ("no worktree's or submodule's git folder")."""
    victim = _repo(tmp_path / "host" / "modules")
    hostile = tmp_path / "hostile"
    hostile.mkdir()
    (hostile / ".git").write_text(f"gitdir: {victim / '.git'}\n")
    done = _import(hostile, tmp_path / "out", "stolen", "--commit", "main")
    assert done.returncode != 0 and "refused" in done.stdout + done.stderr, done.stdout[-600:]
    assert not (tmp_path / "out" / "stolen").exists()


def test_gitfile_naming_another_repositorys_worktree_is_refused(tmp_path):
    """``gitdir: <victim>/.git/worktrees/<wt>``: a real linked worktree of ANOTHER host repository
    (its ``gitdir`` back-link names the victim's own worktree, not this folder). The kit accepts it
    and imports the victim's history. git itself checks nothing here, but the kit's rule is that it
    reads no other repository: safe is to require the worktree's back-link to name this ``.git``."""
    victim = _repo(tmp_path / "victim")
    _git(victim, "worktree", "add", "-q", str(tmp_path / "victim-wt"), "HEAD~1")
    hostile = tmp_path / "hostile"
    hostile.mkdir()
    (hostile / ".git").write_text(f"gitdir: {victim / '.git' / 'worktrees' / 'victim-wt'}\n")
    done = _import(hostile, tmp_path / "out", "stolen", "--commit", "main")
    assert done.returncode != 0, done.stdout[-600:]
    assert not (tmp_path / "out" / "stolen").exists()


def test_a_real_worktree_and_a_real_submodule_are_still_read(tmp_path):
    """The back-link rule keeps what git itself makes: a linked worktree (``git worktree add``: its
    git folder's ``gitdir`` names the worktree's ``.git``) and a submodule (its git folder under the
    superproject's ``.git/modules``, ``core.worktree`` naming the submodule's tree) are read."""
    from kit.importers.git.gitview import GitView

    main = _repo(tmp_path / "main")
    _git(main, "worktree", "add", "-q", str(tmp_path / "wt"), "HEAD~1")
    sub = _repo(tmp_path / "sub-src")
    top = _repo(tmp_path / "top")
    _git(top, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "vendored")
    assert (top / "vendored" / ".git").is_file()
    for tree, rev in ((tmp_path / "wt", "HEAD"), (top / "vendored", "HEAD")):
        view = GitView(tree)
        try:
            assert "def add" in view.run("show", f"{rev}:calc/__init__.py").stdout, tree
        finally:
            view.close()


# ---------------------------------------------------------------------------------------------------
# 2. The specification audit's time grows with (tests x size of the helpers they call): no cap bounds it.


def _audit_bomb(elements: int, tests: int) -> str:
    """One helper whose body is a list of ``elements`` ones, and ``tests`` hidden tests that call it."""
    src = "import pytest\n\nfrom calc import sub\n\n\ndef h0(x):\n    return [" + "1," * elements + "]\n"
    return src + "".join(
        f'\n\n@pytest.mark.severity("major")\ndef test_sub_{k}():\n    h0(1)\n    assert sub(3, 2) == 1\n'
        for k in range(tests)
    )


def _hand_task(root: Path, task_id: str, acceptance: str) -> Path:
    task = root / task_id
    _write(task / "repo", BASE)
    _write(task / "solution", {"calc/__init__.py": HEAD["calc/__init__.py"]})
    _write(task / "acceptance", {"tests/test_calc.py": acceptance})
    spec = {
        "id": task_id,
        "title": "calc: sub",
        "prompt": "Add `sub(a, b)` to calc.",
        "acceptance_layout": "repo",
        "packages": ["calc"],
    }
    (task / "task.yaml").write_text(yaml.safe_dump(spec))
    return task


def test_spec_audit_of_a_100_kb_test_module_is_quick(tmp_path):
    """A hidden test module of 100 KB (the parse cap is 2 MB): one helper whose body is a list
    literal of 40,000 elements and 200 tests that each call it. The audit walks every node of every
    helper a test reaches, again for each test (several ``ast.walk`` passes each): 100 tests x
    20,000 elements (49 KB) took 15 s here, the work grows with the square of the module's size, so
    a 2 MB module is some 16 hours -- and import-git, ``tasks validate``, ``tasks list``, ``tasks
    audit`` and build-suite all run it in the kit's own process, under no timer. (Helpers that call
    each other do the same: 160 helpers and 160 tests, 800 KB, took 685 s.) Safe: such a module is
    audited in seconds, or the audit is bounded and says so."""
    task = _hand_task(tmp_path / "tasks", "audit-bomb", _audit_bomb(40_000, 200))
    assert len((task / "acceptance/tests/test_calc.py").read_text()) < 100_000
    start = time.monotonic()
    try:
        _kit("tasks", "audit", str(task), timeout=25)
    except subprocess.TimeoutExpired:
        raise AssertionError(
            f"kit tasks audit still running after {time.monotonic() - start:.0f} s"
        ) from None


# ---------------------------------------------------------------------------------------------------
# 3. A range's prompt is 60 commit subjects taken whole: the 16,000-character cap on a commit
#    message in a prompt does not bound it.


def test_a_range_prompt_is_capped_like_one_commit_message(tmp_path):
    """61 commits between BASE and HEAD, each with a one-line subject of 10,000 characters (the
    repository writes them; 610 KB of commit objects). A single commit's message is cut at 16,000
    characters (``MAX_MESSAGE_CHARS``), but a range's subjects are taken whole, 60 of them
    (``MAX_SUBJECTS``): here a 600,000-character prompt, ~150,000 tokens that every call of every
    strategy carries, in every run of the task. Subjects of up to 1 MB (the per-commit cap) make it
    up to the 16 MB a range's commits may hold -- a task.yaml over the 4 MB the loader takes.
    Safe: the commit text of a range's prompt is capped as one message's is."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _write(repo, BASE)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    base = _git(repo, "rev-parse", "HEAD")
    for i in range(61):
        if i == 60:
            _write(repo, HEAD)
        (repo / "notes.txt").write_text(f"{i}\n")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-qm", f"S{i} " + "word " * 2000)
    done = _import(repo, tmp_path / "out", "long-prompt", "--range", f"{base}..main")
    assert done.returncode == 0, done.stdout[-800:] + done.stderr[-800:]
    prompt = yaml.safe_load((tmp_path / "out" / "long-prompt" / "task.yaml").read_text())["prompt"]
    assert len(prompt) <= 16_000 + 2_000, f"prompt of {len(prompt)} characters"


# ---------------------------------------------------------------------------------------------------
# 4. A hidden test's checks made in the code under test: an agent's no-op is credited.


_ADD_TEST = "def test_add():\n    assert add(1, 2) == 3\n"


def _helper_repo(tmp_path: Path, helper: str, tests: str, base_tests: str | None = None) -> Path:
    """import-git of a change adding ``sub`` and tests of it; ``base_tests`` (default: ``tests`` up
    to its last test, without ``sub``) is the base's test module."""
    base_tests = base_tests or (tests[: tests.rindex("\n\n\n")] + "\n").replace(", sub", "")
    base = dict(BASE, **{"calc/testing.py": helper, "tests/test_calc.py": base_tests})
    head = dict(HEAD, **{"calc/testing.py": helper, "tests/test_calc.py": tests})
    repo = _repo(tmp_path / "repo", base, head)
    done = _import(repo, tmp_path / "out", "helpers", "--commit", "main")
    assert done.returncode == 0, done.stdout[-800:] + done.stderr[-800:]
    return tmp_path / "out" / "helpers"


@pytest.mark.xfail(
    strict=True, raises=AssertionError, reason="twin checks only assert_* helpers: check() no-op credited"
)
def test_a_no_op_check_helper_of_the_package_is_not_credited(tmp_path):
    """The project's tests assert through its own helper ``calc.testing.check(got, want)`` (a module
    of the package, so code under test: ``verify``, ``expect``, ``check_equal`` behave the same).
    import-git builds the task without a word. The scorer's twin check for a helper (case 09 of
    issue 40) is keyed on the name ``assert_*``: an agent that returns a wrong value from ``sub``
    and turns ``check`` into ``pass`` has the requirement credited (only counted 'unguarded').
    Safe: not credited (or the task refused at import for a requirement nothing guards)."""
    helper = "def check(got, want):\n    assert got == want, (got, want)\n"
    tests = (
        "from calc import add, sub\nfrom calc.testing import check\n\n\n"
        "def test_add():\n    check(add(1, 2), 3)\n\n\ndef test_sub():\n    check(sub(3, 2), 1)\n"
    )
    task = _helper_repo(tmp_path, helper, tests)
    final = {"calc/__init__.py": WRONG_SUB, "calc/testing.py": "def check(got, want):\n    pass\n"}
    score = _score_as_agent(tmp_path, task, final)
    assert score["requirements_total"] == 1
    assert score["requirements_failed"] == 1, score


def test_assert_methods_overridden_in_the_packages_test_base_are_not_credited(tmp_path):
    """The hidden test class derives from the project's ``calc.testing.Base(unittest.TestCase)``
    (a module of the package: code under test) and checks with ``self.assertTrue(sub(3, 2) == 1)``,
    ``self.assertIn(...)``, ``self.assertAlmostEqual(...)``. The agent returns 99 from ``sub`` and
    defines those methods as no-ops in that base class: all three requirements are credited --
    counted neither gamed nor unguarded, so nothing in the record shows it. The same held for
    assertIs, assertGreater, assertCountEqual, assertRegex, assertNotEqual and assertFalse; only
    assertEqual and assertListEqual are sealed and failed as they should. Safe: not credited."""
    helper = "import unittest\n\n\nclass Base(unittest.TestCase):\n    pass\n"
    checks = {
        "assertTrue": "self.assertTrue(sub(3, 2) == 1)",
        "assertIn": "self.assertIn(sub(3, 2), [1])",
        "assertAlmostEqual": "self.assertAlmostEqual(sub(3, 2), 1)",
    }
    head = "from calc import add, sub\nfrom calc.testing import Base\n\n\n"
    cases = "".join(
        f"    def test_{name.lower()}(self):\n        {line}\n\n" for name, line in checks.items()
    )
    tests = head + _ADD_TEST + "\n\nclass TestSub(Base):\n" + cases.rstrip() + "\n"
    base_tests = head.replace(", sub", "") + _ADD_TEST
    task = _helper_repo(tmp_path, helper, tests, base_tests)
    no_ops = "".join(f"    def {name}(self, *a, **k):\n        pass\n\n" for name in checks)
    cheat = "import unittest\n\n\nclass Base(unittest.TestCase):\n" + no_ops.rstrip() + "\n"
    score = _score_as_agent(tmp_path, task, {"calc/__init__.py": WRONG_SUB, "calc/testing.py": cheat})
    assert score["requirements_total"] == 3
    assert score["requirements_failed"] == 3, score


# ---------------------------------------------------------------------------------------------------
# 6. A task folder's container/ (the build context of its Containerfile) may be a link to a host folder.


def _podman_ready() -> bool:
    try:
        done = subprocess.run(
            ["podman", "image", "exists", "localhost/orchbench-python:3.11"], capture_output=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@pytest.mark.skipif(not _podman_ready(), reason="needs podman and localhost/orchbench-python:3.11")
def test_a_task_whose_container_folder_is_a_link_is_refused(tmp_path):
    """A hand-made task folder (``kit tasks validate`` treats one as hostile input) whose
    ``container`` entry is a symbolic link to a host folder, and a ``Containerfile`` that copies
    from it: ``FROM localhost/orchbench-python:3.11`` / ``COPY secret.txt /leak.txt``. With
    ``--sandbox podman`` the kit builds the image from the host folder the link names and validates
    the task (here /leak.txt of the image held the host file; ``container -> /root`` or ``/`` puts
    any host file in the image every command of a run, the agent's included, runs in, and the
    context is hashed through the link too). task.yaml, repo/, acceptance/ and solution/ are
    refused as links; container/ is not. Safe: refused, the link named, and no image built."""
    secret = tmp_path / "host-secret"
    secret.mkdir()
    (secret / "secret.txt").write_text("HOST-SECRET-39g\n")
    task_id = f"attack39g-cf-{os.getpid()}"
    hidden = 'import pytest\n\nfrom calc import sub\n\n\n@pytest.mark.severity("major")\ndef test_sub():\n'
    task = _hand_task(tmp_path / "tasks", task_id, hidden + "    assert sub(3, 2) == 1\n")
    (task / "container").symlink_to(secret)
    (task / "Containerfile").write_text("FROM localhost/orchbench-python:3.11\nCOPY secret.txt /leak.txt\n")
    try:
        done = _kit("tasks", "validate", str(task), "--sandbox", "podman")
        assert done.returncode != 0, done.stdout[-600:] + done.stderr[-600:]
    finally:
        images = subprocess.run(
            ["podman", "images", "-q", f"localhost/orchbench-task-{task_id}"], capture_output=True, text=True
        ).stdout.split()
        for image in images:
            subprocess.run(["podman", "rmi", "-f", image], capture_output=True)


def test_a_task_image_is_never_built_from_a_linked_context(tmp_path):
    """The same at the one place every task image is built (``kit run`` builds a task's image before
    validation ever sees the folder): a Containerfile or ``container/`` that is a link, or a link
    inside ``container/``, is refused before any engine is asked to build."""
    from kit.sandbox.base import SandboxUnavailable
    from kit.sandbox.images import task_image

    secret = tmp_path / "host-secret"
    secret.mkdir()
    for case in ("context", "inside", "file"):
        task = tmp_path / case
        task.mkdir()
        (task / "Containerfile").write_text(
            "FROM localhost/orchbench-python:3.11\nCOPY secret.txt /leak.txt\n"
        )
        if case == "context":
            (task / "container").symlink_to(secret)
        elif case == "inside":
            (task / "container").mkdir()
            (task / "container" / "secret.txt").symlink_to(secret / "secret.txt")
        else:
            (task / "real").write_text("FROM scratch\n")
            (task / "Containerfile").unlink()
            (task / "Containerfile").symlink_to(task / "real")
        with pytest.raises(SandboxUnavailable, match="symbolic link"):
            task_image(None, f"t-{case}", task / "Containerfile")  # type: ignore[arg-type]
