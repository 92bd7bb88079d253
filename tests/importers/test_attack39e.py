"""Attack round 39e on the round-39d fixes, by a helper who had not read them: each test reproduces a
case that got through, marked ``xfail(strict=True)`` so that the fix flips it (and the marker must
then go). Nothing here reaches outside ``tmp_path`` (the "victim" repository is built there too)."""

from __future__ import annotations

import os

import pytest

from kit.app.cli import main
from kit.errors import TaskError
from kit.importers import suite_build
from kit.importers.git.gitview import GitView
from kit.scoring.diffstats import diff_stats
from kit.tasks.suite_manifest import SuiteProject
from kit.tasks.task import load_task
from kit.tasks.workspace import create_workspace, diff
from tests.importers.test_attack39d import _hand_made_task, _victim_repo

# --------------------------------------------------------------------------- (1) commondir's twin


def test_a_git_file_cannot_point_the_import_at_another_host_repository(tmp_path):
    """Round 39d made `.git/commondir` count only when the git folder is a worktree of that
    repository, but a `.git` FILE (`gitdir: PATH`, as git writes for worktrees and submodules) is
    followed wherever it points: a downloaded "repository" whose `.git` is the one line
    `gitdir: ../victim/secret-project/.git` (relative: it needs no knowledge of the host's layout
    beyond a neighbour) is read from THAT repository -- its refs, history and files, which import-git
    then copies into repo/ and solution/ exactly as in the 39d commondir case."""
    victim = _victim_repo(tmp_path)
    evil = tmp_path / "evil"
    evil.mkdir()
    (evil / ".git").write_text("gitdir: ../victim/secret-project/.git\n")
    try:
        view = GitView(evil)
    except TaskError:
        return  # refused: what the fix should do
    try:
        shown = view.run("show", "main:calc.py", check=False).stdout
    finally:
        view.close()
    assert "victim-secret" not in shown, f"the view of {evil} reads {victim}: {shown[:60]!r}"


# --------------------------------------------------------------------------- (3) setup's links


def test_a_setup_made_absolute_link_to_its_own_file_is_one_clear_error(tmp_path, capsys):
    """Round 39d refuses a link setup makes that resolves out of the base -- checked in the base's
    temporary build folder, which is then renamed. `ln -s "$PWD/calc.py" alias.py` (any tool that
    writes absolute links inside its folder does this) resolves inside the build folder, so it passes;
    the committed link then names a folder that no longer exists, and scoring's extraction of the base
    refuses it: `kit tasks validate` dies with a traceback (RuntimeError: cannot read the base commit
    ...: 'alias.py' is a link to an absolute path), as every run of the task would at scoring."""
    task = _hand_made_task(tmp_path, "setup: ['ln -s \"$PWD/calc.py\" alias.py']\n")
    status = main(["tasks", "validate", str(task)])
    out = capsys.readouterr().out
    assert status != 0 and "alias.py" in out


def test_a_setup_made_link_through_the_build_folders_name_is_one_clear_error(tmp_path, capsys):
    """The relative form of the same: setup sees its folder's host path (`$PWD`:
    `<results>/.cache/bases/<id>-<digest>.tmp-<pid>-<thread>`), so `ln -s "../$(basename "$PWD")/calc.py"
    alias.py` leaves the folder and comes back in by its temporary name: inside at the check, a link
    out of the base and of every clone once the folder is renamed (scoring: RuntimeError, 'alias.py'
    would link to ... which is outside the destination)."""
    setup = """setup: ['ln -s "../$(basename "$PWD")/calc.py" alias.py']\n"""
    task = _hand_made_task(tmp_path, setup)
    status = main(["tasks", "validate", str(task)])
    out = capsys.readouterr().out
    assert status != 0 and "alias.py" in out


def test_an_absolute_link_in_repo_to_its_own_file_is_one_clear_error(tmp_path, capsys):
    """A link in repo/ is refused when it leads outside repo/, but one written with repo/'s own
    absolute host path (`repo/alias.py -> /.../t/repo/calc.py`) leads inside, so task_path_problems
    finds nothing; it is committed as is (every clone holds a link to the task folder on the host),
    and scoring's extraction of the base refuses it: `kit tasks validate` dies with a traceback
    (RuntimeError: cannot read the base commit ...: 'alias.py' is a link to an absolute path)."""
    task = _hand_made_task(tmp_path)
    (task / "repo" / "alias.py").symlink_to(task / "repo" / "calc.py")
    status = main(["tasks", "validate", str(task)])
    out = capsys.readouterr().out
    assert status != 0 and "alias.py" in out


def test_a_setup_made_link_loop_is_one_clear_error(tmp_path, capsys):
    """Round 39d's check of setup's links resolves each one with `Path.resolve()`, which raises
    RuntimeError('Symlink loop from ...') on Python 3.11: `setup: ['ln -s a b && ln -s b a']` ends
    `kit tasks validate` (and every run's clone) in a traceback instead of one error naming the task.
    (The same loop in repo/ itself is refused cleanly by task_path_problems.)"""
    task = _hand_made_task(tmp_path, "setup: ['ln -s a b && ln -s b a']\n")
    status = main(["tasks", "validate", str(task)])
    out = capsys.readouterr().out
    assert status != 0 and "setup" in out


def test_a_link_in_repo_back_in_through_its_own_name_is_one_clear_error(tmp_path, capsys):
    """The relative form: `repo/alias.py -> ../repo/calc.py` leaves repo/ and comes back in by the
    folder's own name, so in the task folder it leads inside and task_path_problems finds nothing; in
    the base and every clone (folders not named repo) it leads out, and scoring's extraction of the
    base refuses it: `kit tasks validate` dies with a traceback (RuntimeError: cannot read the base
    commit ...: 'alias.py' would link to ..., which is outside the destination)."""
    task = _hand_made_task(tmp_path)
    (task / "repo" / "alias.py").symlink_to("../repo/calc.py")
    status = main(["tasks", "validate", str(task)])
    out = capsys.readouterr().out
    assert status != 0 and "alias.py" in out


# --------------------------------------------------------------------------- (2) attributes, ignores


def _fix(ws) -> None:
    path = ws.root / "calc.py"
    path.write_text(path.read_text().replace("return 0", "return x + x"))


def test_a_binary_attribute_in_repo_does_not_zero_the_lines_changed(tmp_path):
    """The base and clones override repo/'s .gitattributes, but the diff of a snapshot against the
    base (a git folder of the kit's own, without info/attributes) still reads the tree's: with
    `*.py binary` (or `-diff`) in repo/.gitattributes every run of the task records lines_added =
    lines_removed = 0 (`--numstat` says `-  -`), and the diff the strategies show their reviewers,
    journal and restore is a base85 `GIT binary patch` instead of the change."""
    task = _hand_made_task(tmp_path)
    (task / "repo" / ".gitattributes").write_text("*.py binary\n")
    ws = create_workspace(load_task(task), tmp_path / "clone")
    _fix(ws)
    files, added, removed = diff_stats(ws)
    shown = diff(ws)
    assert (files, added, removed) == (1, 1, 1) and "+    return x + x" in shown, (files, added, shown[:200])


def test_an_agent_written_gitattributes_does_not_hide_its_change(tmp_path):
    """The agent's variant: a clone whose agent writes `.gitattributes` = `*.py -diff` records one
    line added (the attributes file) whatever it changed in .py files, and hides the change from the
    diff a reviewer step is shown -- a number the agent influences other than by doing the task."""
    task = _hand_made_task(tmp_path)
    ws = create_workspace(load_task(task), tmp_path / "clone")
    _fix(ws)
    (ws.root / ".gitattributes").write_text("*.py -diff\n")
    files, added, removed = diff_stats(ws)
    assert (files, added, removed) == (2, 2, 1) and "+    return x + x" in diff(ws), (files, added, removed)


def test_a_gitignored_file_named_like_a_pathspec_reaches_the_clone(tmp_path):
    """Round 39d force-adds the files repo/'s .gitignore hides, but hands their names to `git add
    --pathspec-from-file`, where a leading `:` is pathspec magic: an ignored `:!notes.txt` or
    `:(exclude)data.txt` is an exclusion, so the file is silently missing from every clone and the
    scored base (and an ignored `:data` makes the base fail with git's raw 'pathspec did not match')."""
    task = _hand_made_task(tmp_path)
    (task / "repo" / ".gitignore").write_text("*.txt\n")
    for name in (":!notes.txt", ":(exclude)data.txt", "plain.txt"):
        (task / "repo" / name).write_text("x\n")
    ws = create_workspace(load_task(task), tmp_path / "clone")
    missing = [n for n in (":!notes.txt", ":(exclude)data.txt", "plain.txt") if not (ws.root / n).is_file()]
    assert missing == [], f"missing from the clone: {missing}"


def test_a_repo_file_under_a_kit_state_name_reaches_the_clone(tmp_path):
    """The kit's own info/exclude (`.pdca/`, `.orchbench-base-ready`) is not the documented ignore list
    (kit.paths: .git, __pycache__, caches, .pyc/.pyo), and the force-add of ignored files asks only
    about .gitignore (`ls-files -i --exclude-per-directory`): a repo/ file under `.pdca/` or named
    `.orchbench-base-ready` is silently missing from every clone and from the scored base. (Fixed:
    the kit keeps only `.pdca/status/`, refused in repo/; the base's marker lives in its .git.)"""
    task = _hand_made_task(tmp_path)
    (task / "repo" / ".pdca").mkdir()
    (task / "repo" / ".pdca" / "notes.txt").write_text("x\n")
    (task / "repo" / ".orchbench-base-ready").write_text("mine\n")
    ws = create_workspace(load_task(task), tmp_path / "clone")
    missing = [n for n in (".pdca/notes.txt", ".orchbench-base-ready") if not (ws.root / n).is_file()]
    assert missing == [], f"missing from the clone: {missing}"
    assert diff_stats(ws) == (0, 0, 0)  # and in the base and every snapshot: no change recorded


def test_a_repo_file_under_the_pdca_status_folder_is_one_clear_error(tmp_path):
    """The one name the kit keeps for itself in a clone (the pdca strategy's status folder, left out
    of every snapshot) is refused in repo/, named -- never silently dropped from the clone."""
    task = _hand_made_task(tmp_path)
    (task / "repo" / ".pdca" / "status").mkdir(parents=True)
    (task / "repo" / ".pdca" / "status" / "x.md").write_text("x\n")
    with pytest.raises(TaskError, match=r"repo/\.pdca/status is a name the kit reserves"):
        create_workspace(load_task(task), tmp_path / "clone")


# --------------------------------------------------------------------------- (4) a manifest's url


def test_a_manifest_url_with_a_nul_in_its_host_is_one_clear_error(tmp_path, capsys):
    """The url pattern `https://[^/\\s]+/[^/\\s]+/[^/\\s]+` takes any non-space character, a NUL
    included: the project name and owner are confined, the host is not, so build-suite --clone ends
    in a traceback (ValueError: embedded null byte, from subprocess) instead of one error. (It fails
    before git starts: no network is used.)"""
    try:
        project = SuiteProject(url="https://git\x00hub.com/attacker/calc", licence="MIT")
    except ValueError:  # pydantic's ValidationError: refused in the manifest, as it should be
        return
    with pytest.raises(TaskError):
        suite_build.clone(project, tmp_path / "repos")
    capsys.readouterr()


# --------------------------------------------------------------------------- (2) the base cache's key


def test_an_edit_that_keeps_size_and_mtime_gives_a_new_base(tmp_path):
    """The cached base is found by the task id and each repo/ file's path, size and mtime -- not its
    content: a repo/ file changed in place with its size and mtime kept (`cp -p`, `rsync -a`, `tar x`
    of a new version, `touch -r`; or a second task folder with the same id, sizes and mtimes, as an
    archive can carry) gets the old base, so the run's clone and the base scoring compares against
    are not repo/ (seen: the clone holds `return 1` where repo/ says `return 7`)."""
    task = _hand_made_task(tmp_path)
    calc = task / "repo" / "calc.py"
    create_workspace(load_task(task), tmp_path / "first")
    stamp = calc.stat().st_mtime_ns
    calc.write_text(calc.read_text().replace("return 1", "return 7"))  # same size
    os.utime(calc, ns=(stamp, stamp))
    ws = create_workspace(load_task(task), tmp_path / "second")
    assert (ws.root / "calc.py").read_bytes() == calc.read_bytes(), "the clone holds the old repo/"


def test_a_repo_file_name_that_is_not_utf8_is_one_clear_error(tmp_path, capsys):
    """task_path_problems refuses control characters in a task folder's names but not bytes that are
    no UTF-8 (`repo/caf\\xe9.txt`, a Latin-1 name: legal on Linux); the cached base's key encodes each
    name as UTF-8, so `kit tasks validate` dies with a traceback (UnicodeEncodeError: surrogates not
    allowed, in base_repository), as would every run of the task."""
    task = _hand_made_task(tmp_path)
    with open(os.fsencode(task / "repo") + b"/caf\xe9.txt", "wb") as f:
        f.write(b"x\n")
    status = main(["tasks", "validate", str(task)])
    out = capsys.readouterr().out
    assert status != 0 and "caf" in out
