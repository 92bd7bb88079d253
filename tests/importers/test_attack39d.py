"""Attack round 39d on task folders, build-suite and scoring, by a helper who had not read the recent
changes: each test reproduces a case that got through, marked ``xfail(strict=True)`` so that the fix
flips it (and the marker must then go). Nothing here reaches outside ``tmp_path``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kit.app.cli import main
from kit.app.tasks_cli import _run_import
from kit.errors import KitError, TaskError
from kit.importers import suite_build
from kit.tasks.task import load_suite, load_task
from kit.tasks.workspace import create_workspace
from tests.importers.test_attack39c import _suite
from tests.support.gitrepos import make_repo


def _hand_made_task(root: Path, extra_yaml: str = "") -> Path:
    """A small valid task: repo/ with one own test, one hidden test, the solution."""
    task = root / "t"
    for sub in ("repo", "acceptance", "solution"):
        (task / sub).mkdir(parents=True)
    (task / "task.yaml").write_text(f"id: t\ntitle: t\nprompt: p\n{extra_yaml}")
    (task / "repo" / "calc.py").write_text("def double(x):\n    return 0\n\n\ndef one():\n    return 1\n")
    (task / "repo" / "test_own.py").write_text(
        "from calc import one\n\n\ndef test_one():\n    assert one() == 1\n"
    )
    (task / "acceptance" / "test_x.py").write_text(
        'import pytest\nfrom calc import double\n\n\n@pytest.mark.severity("major")\n'
        "def test_x():\n    assert double(2) == 4\n"
    )
    (task / "solution" / "calc.py").write_text(
        "def double(x):\n    return x + x\n\n\ndef one():\n    return 1\n"
    )
    return task


def _peak_mb(tmp_path: Path, argv: list[str]) -> tuple[int, str]:
    """Run ``kit`` with ``argv`` in a child process; its peak memory (VmHWM, MB) and its output."""
    script = (
        "import sys\nfrom kit.app.cli import main\n"
        "try:\n    main(sys.argv[1:])\nexcept BaseException:\n    pass\n"
        "print([int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:')][0] // 1024)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, *argv],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "ORCHBENCH_RESULTS_DIR": str(tmp_path / "results")},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return int(proc.stdout.split()[-1]), proc.stdout


# --------------------------------------------------------------------------- (3) what scoring sees


def test_a_gitignore_in_repo_does_not_drop_files_from_the_clone_and_the_scored_base(tmp_path):
    """A run's clone is documented as "a fresh git repository holding repo/ as its one commit", but the
    kit commits the cached base with `git add -A`, which honours a `.gitignore` of repo/: a task (or a
    repository import-git copied, whose tracked files may match its own .gitignore -- force-added
    fixtures are common) whose .gitignore names an own test module loses it from the agent's clone and
    from the base scoring extracts, so that module's tests are never run and their regressions never
    counted -- and `kit tasks validate` still passes (seen: ✓, with repo/test_own.py missing)."""
    task = _hand_made_task(tmp_path)
    (task / "repo" / ".gitignore").write_text("test_own.py\n")
    (task / "repo" / "test_other.py").write_text("def test_ok():\n    assert True\n")
    ws = create_workspace(load_task(task), tmp_path / "clone")
    missing = sorted(
        p.relative_to(task / "repo").as_posix()
        for p in (task / "repo").rglob("*")
        if p.is_file() and not (ws.root / p.relative_to(task / "repo")).exists()
    )
    assert missing == [], f"repo/ files missing from the run's clone: {missing}"


# --------------------------------------------------------------------------- (1) a task's setup


def test_a_setup_made_link_out_of_the_base_is_one_clear_error(tmp_path, capsys):
    """A task's `setup:` runs sandboxed (it could not read the canary nor write outside), but a link
    it makes in the base (`ln -s /etc/passwd x`) is committed into the cached base, and when scoring
    extracts the base commit (tarfile's `data` filter refuses the link) `kit tasks validate` dies with
    a Python traceback (RuntimeError: cannot read the base commit ...: 'x' is a link to an absolute
    path) instead of one error naming the task and what to do; every run of such a task errors the
    same way at scoring. (Seen with the CLI: a traceback, exit status 1.)"""
    task = _hand_made_task(tmp_path, "setup: ['ln -s /etc/passwd x']\n")
    status = main(["tasks", "validate", str(task)])
    out = capsys.readouterr().out
    assert status != 0 and "x" in out


# --------------------------------------------------------------------------- (4) size caps


def test_a_huge_acceptance_helper_module_is_refused_by_its_size_before_it_is_read(tmp_path):
    """Round 39c capped the hidden test modules (2 MB, by size before reading), but `kit tasks
    validate` also reads every other .py of acceptance/ (a helper module, not collected) whole with
    `read_bytes()` before kit.pyast refuses it for its size (uncollected_test_files): a sparse 512 MB
    acceptance/helper.py took validate to 550 MB peak (VmHWM of a child) -- and it still printed ✓."""
    task = _hand_made_task(tmp_path)
    with open(task / "acceptance" / "helper.py", "wb") as f:
        f.truncate(512 * 1024 * 1024)
    peak_mb, out = _peak_mb(tmp_path, ["tasks", "validate", str(task)])
    assert peak_mb < 300, f"validating the task took {peak_mb} MB: {out[-500:]}"


# --------------------------------------------------------------------------- (2) a manifest's options


def _build(tmp_path: Path, options: list[str]) -> list:
    """build-suite on a suite manifest of the attacker's whose one task gives ``options``."""
    suite, repos, out = _suite(tmp_path, "evil", options)
    return suite_build.build_suite(suite, repos, _run_import, out=out)


def test_a_manifest_option_value_argparse_refuses_is_one_failed_task_not_an_exit(tmp_path, capsys):
    """A manifest's options may give only --tests, --timeout and --probe-budget, but their values are
    not checked: `options: [--timeout, abc]` (or `[--timeout, --tests]`: a value that is an option)
    reaches import-git's argparse in build-suite's own process, which calls sys.exit(2): the whole
    build stops at that task -- no summary, later tasks not built -- as `--id -h` did in round 39c."""
    with pytest.raises(TaskError, match="give seconds"):  # refused before anything is built
        _build(tmp_path, ["--timeout", "abc"])


def test_a_manifest_timeout_of_nan_is_one_clear_error(tmp_path, capsys):
    """`options: ['--timeout=nan']` passes the manifest's check (an allowed flag with a value) and
    argparse's float(); import-git probes with it and then builds the task file, whose model refuses
    `scoring_timeout_s: nan` with a pydantic ValidationError that escapes import-git and build-suite
    (not a KitError): a traceback instead of one error, and the build stops there."""
    with pytest.raises(TaskError, match="give seconds"):  # refused before anything is built
        _build(tmp_path, ["--timeout=nan"])


def test_a_gitattributes_in_repo_does_not_change_the_clone_against_repo(tmp_path):
    """Scoring extracts the base with the tree's .gitattributes overridden, but the kit's own
    `git add -A` of the cached base and the clone's checkout still apply repo/'s: with
    `data.txt text` a CRLF file is committed and checked out as LF, with `*.py ident` the agent's
    clone shows `$Id: <blob> $` where repo/ (and the base scoring extracts) says `$Id$` -- so the
    clone is not repo/, an own test about bytes fails at the base (import-git then drops it as
    'fails at the base'), and a file the agent never touched differs from the scored base."""
    task = _hand_made_task(tmp_path)
    (task / "repo" / ".gitattributes").write_text("data.txt text\n*.py ident\n")
    (task / "repo" / "data.txt").write_bytes(b"a\r\nb\r\n")
    with open(task / "repo" / "calc.py", "a") as f:
        f.write("# $Id$\n")
    ws = create_workspace(load_task(task), tmp_path / "clone")
    differ = [
        rel
        for rel in ("data.txt", "calc.py")
        if (task / "repo" / rel).read_bytes() != (ws.root / rel).read_bytes()
    ]
    assert differ == [], f"the run's clone differs from repo/ in {differ}"


def test_an_imported_repositorys_tracked_but_ignored_test_module_reaches_the_clone(tmp_path, capsys):
    """The same through import-git, with an ordinary repository: tests/test_calc.py is tracked
    (force-added) although its .gitignore names it. import-git writes it into repo/ and validates
    (✓, 0 own tests left out), but every run's clone and scored base lack it: its own tests never
    run, so the agent can break what they check with no regression counted."""
    src = tmp_path / "calc"
    make_repo(src, [("start", {"LICENSE": "MIT\n", "calc.py": "def one():\n    return 1\n"})])
    (src / "tests").mkdir()
    (src / "tests" / "test_calc.py").write_text(
        "import calc\n\n\ndef test_one():\n    assert calc.one() == 1\n"
    )
    (src / "tests" / "test_misc.py").write_text("def test_ok():\n    assert True\n")
    (src / ".gitignore").write_text("tests/test_calc.py\n")
    subprocess.run(["git", "-C", str(src), "add", "-f", "-A", "."], check=True)
    subprocess.run(["git", "-C", str(src), "add", "-f", "tests/test_calc.py"], check=True)
    env = {**os.environ, "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@b", "GIT_COMMITTER_NAME": "a"}
    env["GIT_COMMITTER_EMAIL"] = "a@b"
    subprocess.run(["git", "-C", str(src), "commit", "-qm", "tests"], check=True, env=env)
    fix = {"calc.py": "def one():\n    return 1\n\n\ndef two():\n    return 2\n"}
    fix["tests/test_two.py"] = "from calc import two\n\n\ndef test_two():\n    assert two() == 2\n"
    for rel, text in fix.items():
        (src / rel).write_text(text)
    subprocess.run(["git", "-C", str(src), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(src), "commit", "-qm", "Add two"], check=True, env=env)
    out = tmp_path / "out"
    status = main(["tasks", "import-git", str(src), "--commit", "HEAD", "--id", "gi", "--out", str(out)])
    capsys.readouterr()
    assert status == 0 and (out / "gi" / "repo" / "tests" / "test_calc.py").is_file()
    ws = create_workspace(load_task(out / "gi"), tmp_path / "clone")
    assert (ws.root / "tests" / "test_calc.py").is_file(), "an own test module of repo/ is not in the clone"


# --------------------------------------------------------------------------- a repository's commondir


def _victim_repo(root: Path) -> Path:
    """Another repository on the host, holding a secret in its history."""
    repo = root / "victim" / "secret-project"
    make_repo(
        repo,
        [
            (
                "start",
                {
                    "LICENSE": "MIT\n",
                    "calc.py": 'TOKEN = "victim-secret-39d"\n\n\ndef double(x):\n    return 0\n',
                    "tests/test_calc.py": "import calc\n\n\ndef test_token():\n    assert calc.TOKEN\n",
                },
            ),
            (
                "Fix double",
                {
                    "calc.py": 'TOKEN = "victim-secret-39d"\n\n\ndef double(x):\n    return x + x\n',
                    "tests/test_double.py": "from calc import double\n\n\ndef test_double():\n    assert double(2) == 4\n",
                },
            ),
        ],
    )
    return repo


def test_a_repositorys_commondir_cannot_make_the_import_read_another_host_repository(tmp_path, capsys):
    """The view refuses a repository whose objects/ or refs/ is a link or that borrows objects
    (alternates) -- git would read another store on the host -- but it follows `.git/commondir`
    (a linked worktree's pointer to its main git folder) wherever it points: a downloaded repository
    whose .git holds only HEAD, an empty objects/ and `commondir` = another repository's git folder
    on the host is imported from THAT repository's refs, objects and history. Seen: `import-git
    EVIL --commit HEAD` built a task whose repo/ and solution/ hold the victim project's files."""
    victim = _victim_repo(tmp_path)
    evil = tmp_path / "evil"
    (evil / ".git" / "objects").mkdir(parents=True)
    (evil / ".git" / "refs").mkdir()
    (evil / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (evil / ".git" / "commondir").write_text(f"{victim / '.git'}\n")
    out = tmp_path / "out"
    main(["tasks", "import-git", str(evil), "--commit", "HEAD", "--id", "evil", "--out", str(out)])
    capsys.readouterr()
    leaked = [
        p.relative_to(out).as_posix()
        for p in out.rglob("*")
        if p.is_file() and b"victim-secret" in p.read_bytes()
    ]
    assert leaked == [], f"another host repository's files were imported: {leaked}"


def test_a_huge_commondir_is_refused_by_its_size_before_it_is_read(tmp_path):
    """HEAD and the other .git files are read with a cap, but `.git/commondir` is read whole and
    decoded (then joined to a path): a sparse 512 MB commondir took `import-git` to 2.6 GB peak
    (VmHWM of a child) before it ended in a ValueError traceback (embedded null byte)."""
    evil = tmp_path / "evil"
    (evil / ".git" / "objects").mkdir(parents=True)
    (evil / ".git" / "refs").mkdir()
    (evil / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    with open(evil / ".git" / "commondir", "wb") as f:
        f.truncate(512 * 1024 * 1024)
    argv = ["tasks", "import-git", str(evil), "--commit", "HEAD", "--id", "e", "--out", str(tmp_path / "out")]
    peak_mb, out = _peak_mb(tmp_path, argv)
    assert peak_mb < 300, f"import-git took {peak_mb} MB reading .git/commondir"


def _edited_suite(tmp_path: Path, edit) -> tuple:
    """The attacker's manifest of :func:`_suite`, edited by ``edit(manifest_dict)``."""
    _, repos, out = _suite(tmp_path, "evil", [])
    manifest = json.loads((tmp_path / "evil.yaml").read_text())
    edit(manifest)
    (tmp_path / "evil.yaml").write_text(json.dumps(manifest))
    return load_suite(str(tmp_path / "evil.yaml"), check_tasks=False), repos, out


def test_a_manifest_exclude_test_that_looks_like_an_option_is_one_failed_task(tmp_path, capsys):
    """A manifest's `exclude_tests: [{test: --force, reason: r}]` becomes `--exclude-test --force r`
    on import-git's command line; argparse refuses it with sys.exit(2) in build-suite's own process
    (`test: '--'` too): the build stops there, no summary, later tasks not built."""
    suite, repos, out = _edited_suite(
        tmp_path, lambda m: m["imports"][0].update(exclude_tests=[{"test": "--force", "reason": "r"}])
    )
    results = suite_build.build_suite(suite, repos, _run_import, out=out)
    capsys.readouterr()
    assert [r.status for r in results] == ["failed"]


def test_a_manifest_url_without_an_owner_is_one_clear_error(tmp_path, capsys):
    """A project `url: calc` (no slash) is accepted by the manifest's model, then
    SuiteProject.owner (`url.rsplit('/', 2)[-2]`) raises IndexError in find_clone: a traceback out
    of build-suite instead of one error naming the project's URL."""
    with pytest.raises(KitError):  # refused when the manifest is loaded (https://HOST/OWNER/NAME)
        suite, repos, out = _edited_suite(tmp_path, lambda m: m["projects"]["calc"].update(url="calc"))
        suite_build.build_suite(suite, repos, _run_import, out=out)


def test_a_huge_origin_url_in_the_repositorys_config_is_refused_by_its_size(tmp_path):
    """The repository's .git/config is never obeyed, but its `remote.origin.url` is read (for
    `source.repo_url`) through `git config --get` whose whole output the kit holds and decodes: a
    200 MB url took the kit's process to 600+ MB (VmHWM) -- in a full `import-git` (638 MB) the import
    ran all its probes and was refused only at the end, its task.yaml over 4 MB. Here the read alone,
    in a child process."""
    repo = _victim_repo(tmp_path)
    with open(repo / ".git" / "config", "a") as f:
        f.write('[remote "origin"]\n\turl = https://example.com/' + "a" * (200 * 2**20) + "\n")
    script = (
        "import sys\nfrom kit.errors import KitError\nfrom kit.importers.git.gitread import Repo\n"
        "try:\n    Repo(sys.argv[1]).remote_url()\nexcept (KitError, MemoryError):\n    pass\n"
        "print([int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:')][0] // 1024)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(repo)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    peak_mb = int(proc.stdout.split()[-1])
    assert peak_mb < 300, f"reading the origin url took {peak_mb} MB"
