"""A repository is hostile input (issue 39, items 1-4): its config runs nothing on the host, its
paths reach nothing outside the folders they belong to, what a probe session reports cannot make
the importer lay a host file, and a blob far over the cap is refused before it is read.

Each repository is built here with git, its hostile parts with git's own plumbing (``git mktree``
stores a tree entry named ``..``; a missing object is a loose object removed)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kit.app.cli import main
from kit.errors import TaskError
from kit.importers import suite_build
from kit.importers.git.gitread import Repo
from kit.importers.git.importer import Options, import_git
from tests.support.gitrepos import git, make_repo

BASE = {
    "LICENSE": "MIT License\n",
    "calc.py": "def double(x):\n    return x + x + 1\n",
    "tests/test_calc.py": "import calc\n\n\ndef test_module():\n    assert calc.double\n",
}
FIX = {
    "calc.py": "def double(x):\n    return x + x\n",
    "tests/test_double.py": "from calc import double\n\n\ndef test_double():\n    assert double(2) == 4\n",
}


def _drop_object(repo: Path, sha: str) -> None:
    (repo / ".git" / "objects" / sha[:2] / sha[2:]).unlink()


# --------------------------------------------------------------------------- 1. the repository's git runs nothing


def _promisor(repo: Path, marker: Path, how: str) -> None:
    """Make ``repo`` a partial clone whose promisor remote runs ``touch marker`` when git fetches."""
    if how == "ext-transport":  # extensions.partialClone + an ext:: URL the repository allows itself
        git(repo, "config", "core.repositoryformatversion", "1")
        git(repo, "config", "extensions.partialClone", "origin")
        git(repo, "config", "remote.origin.url", f"ext::sh -c touch% {marker}")
        git(repo, "config", "protocol.allow", "always")
    elif how == "uploadpack":  # remote.<name>.promisor alone, a local remote and its uploadpack command
        git(repo, "config", "remote.origin.url", str(repo))
        git(repo, "config", "remote.origin.promisor", "true")
        git(repo, "config", "remote.origin.uploadpack", f"touch {marker}; git-upload-pack")
    else:  # an ssh remote and core.sshCommand
        git(repo, "config", "remote.origin.url", "ssh://example.invalid/calc")
        git(repo, "config", "remote.origin.promisor", "true")
        git(repo, "config", "core.sshCommand", f"touch {marker}; false")


@pytest.mark.parametrize("how", ["ext-transport", "uploadpack", "ssh-command"])
def test_a_promisor_remote_fetches_nothing_and_a_missing_object_is_one_clear_error(tmp_path, capsys, how):
    """git fetches an object a partial clone lacks from its promisor remote, running the command the
    repository configured: the kit reads through a view of its own, so nothing runs and the import
    stops with one error naming the object."""
    repo, marker = tmp_path / "calc", tmp_path / "ran"
    shas = make_repo(repo, [("start", BASE), ("Fix double", FIX)])
    blob = git(repo, "rev-parse", f"{shas[0]}:calc.py")
    _drop_object(repo, blob)
    _promisor(repo, marker, how)
    r = Repo(repo)
    with pytest.raises(TaskError, match=f"lacks the object {blob} \\(calc.py"):
        r.export(shas[0], tmp_path / "out")
    assert not suite_build.has_commit(repo / ".git", "f" * 40)  # a missing commit: no fetch either
    code = main(["tasks", "import-git", str(repo), "--commit", shas[1], "--out", str(tmp_path / "tasks")])
    out = capsys.readouterr()
    assert code != 0 and f"lacks the object {blob}" in out.out + out.err, out
    assert "Traceback" not in out.out + out.err
    assert not marker.exists(), f"the repository's {how} ran a command on the host"


def test_no_hook_filter_driver_pager_fsmonitor_alias_or_include_of_the_repository_runs(tmp_path):
    repo, marker = tmp_path / "calc", tmp_path / "ran"
    shas = make_repo(repo, [("start", {**BASE, ".gitattributes": "* filter=evil diff=evil\n"}), ("Fix", FIX)])
    touch = f"touch {marker}"
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    for name in (
        "post-checkout",
        "pre-auto-gc",
        "reference-transaction",
        "post-index-change",
        "fsmonitor-watchman",
    ):
        (hooks / name).write_text(f"#!/bin/sh\n{touch}\n")
        (hooks / name).chmod(0o755)
    (tmp_path / "included").write_text(f"[core]\n\tfsmonitor = {touch}\n[diff]\n\texternal = {touch}\n")
    for key, value in {
        "core.fsmonitor": touch,
        "core.hooksPath": str(hooks),
        "core.pager": touch,
        "core.alternateRefsCommand": touch,
        "core.askPass": touch,
        "filter.evil.smudge": touch,
        "filter.evil.clean": touch,
        "filter.evil.process": touch,
        "filter.evil.required": "true",
        "diff.evil.textconv": touch,
        "diff.evil.command": touch,
        "diff.external": touch,
        "credential.helper": f"!{touch}",
        "gpg.program": touch,
        "log.showSignature": "true",
        "alias.show": f"!{touch}",
        "alias.rev-list": f"!{touch}",
        "include.path": str(tmp_path / "included"),
        "uploadpack.packObjectsHook": touch,
    }.items():
        git(repo, "config", key, value)
    r = Repo(repo)
    base, head = r.resolve("HEAD~1"), r.resolve("HEAD")
    r.commit(head), r.range_commits(base, head), r.changes(base, head), r.licence(head)
    r.export(base, tmp_path / "base")
    assert (tmp_path / "base" / ".gitattributes").is_file() and r.is_ancestor(base, head)
    assert suite_build.has_commit(repo / ".git", shas[1])
    assert not marker.exists()


# --------------------------------------------------------------------------- 2. paths stay inside their folders


def _tree(repo: Path, entries: dict[str, str]) -> str:
    """A tree object holding ``entries`` (path -> text), built with ``git mktree``: any path git
    can store, ``..`` segments included."""
    subtrees: dict[str, dict[str, str]] = {}
    lines = []
    for path, text in entries.items():
        head, _, rest = path.partition("/")
        if rest:
            subtrees.setdefault(head, {})[rest] = text
        else:
            sha = subprocess.run(
                ["git", "hash-object", "-w", "--stdin"], cwd=repo, input=text, capture_output=True, text=True
            ).stdout.strip()
            lines.append(f"100644 blob {sha}\t{path}\n")
    lines += [f"040000 tree {_tree(repo, sub)}\t{name}\n" for name, sub in subtrees.items()]
    return subprocess.run(
        ["git", "mktree"], cwd=repo, input="".join(lines), capture_output=True, text=True, check=True
    ).stdout.strip()


def _commit(repo: Path, tree: str, parent: str | None, message: str) -> str:
    return git(repo, "commit-tree", tree, *(["-p", parent] if parent else []), "-m", message)


def test_tree_entries_that_point_outside_are_refused_and_no_host_file_is_deleted(tmp_path, monkeypatch):
    """A file the base holds at ``../../…/victim.txt`` and the change deletes: before, DELETED.txt
    named it and laying the solution removed the host file. Now the repository is refused, the path named."""
    monkeypatch.setenv("ORCHBENCH_RESULTS_DIR", str(tmp_path / "results"))
    victim = tmp_path / "host" / "victim.txt"
    victim.parent.mkdir()
    victim.write_text("the host's own file\n")
    outside = "../" * 40 + str(victim).lstrip("/")
    repo = tmp_path / "calc"
    make_repo(repo, [("start", BASE)])
    base = _commit(repo, _tree(repo, {**BASE, outside: "x\n"}), None, "start")
    head = _commit(repo, _tree(repo, {**BASE, **FIX}), base, "Fix double")
    with pytest.raises(
        TaskError, match=r"the path '\.\./\.\./.*victim\.txt' is a path with .*'\.\.' segment"
    ):
        import_git(Options(repo=repo, commit=head, out=tmp_path / "tasks", timeout_s=60))
    assert victim.read_text() == "the host's own file\n"
    r = Repo(repo)
    with pytest.raises(TaskError, match="victim.txt"):
        r.changes(base, head)  # the diff names it too
    evil = _commit(repo, _tree(repo, {**BASE, "tests/a\x1b]0;owned\x07.txt": "x\n"}), None, "start")
    with pytest.raises(TaskError, match="control character"):
        r.tree(evil)


# --------------------------------------------------------------------------- 3. what a probe session reports is data

FORGER = """
import gc

from calc import double

FORGED = {forged!r}


def test_double():
    assert double(2) == 4
    for obj in gc.get_objects():  # the session's own sender, reached from the heap: a line in sequence
        if callable(obj) and getattr(obj, "__qualname__", "") == "_sender.<locals>.send":
            obj(kind="read", path=FORGED, by="test")
"""


@pytest.mark.slow
def test_a_probe_session_cannot_make_the_importer_lay_a_host_file(tmp_path, monkeypatch):
    """A hidden test calls the session's own sender to report it read ``../../…/secret.txt`` (a host
    file): before, the importer copied it into the task as test data (through the ``..``: outside ``--out``).
    Now only files of the head tree are laid, and a path that is not a plain one refuses the import."""
    monkeypatch.setenv("ORCHBENCH_RESULTS_DIR", str(tmp_path / "results"))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr("tempfile.tempdir", None)
    secret = tmp_path / "host" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("HOST-SECRET-0xC0FFEE\n")
    head_depth = len(scratch.parts) + 1  # <scratch>/orchbench-import-*/head
    forged = "../" * head_depth + str(secret).lstrip("/")
    repo = tmp_path / "calc"
    fix = {**FIX, "tests/test_double.py": textwrap.dedent(FORGER.format(forged=forged))}
    shas = make_repo(repo, [("start", BASE), ("Fix double", fix)])
    out = tmp_path / "tasks"
    try:
        import_git(Options(repo=repo, commit=shas[1], out=out, timeout_s=60, sandbox="bwrap"))
        error = ""
    except TaskError as e:
        error = str(e)
    # where the old importer wrote it: acceptance/<forged> (<out>/.<id>-*/<id>/acceptance), the ..s climbing
    landing = Path(*(*out.parts, "holder", "id", "acceptance")[: len(out.parts) + 3 - head_depth])
    landing /= str(secret).lstrip("/")
    files = [p for p in tmp_path.rglob("*") if p.is_file() and p != secret and "results" not in p.parts]
    laid = [p for p in [*files, landing] if p.is_file() and b"HOST-SECRET" in p.read_bytes()]
    if landing.is_file():
        landing.unlink()  # (the old importer's copy outside --out, left by a run on the old code)
    assert not laid, f"the host file was laid: {laid}"
    assert error.startswith("a probe session reported reading the path '../"), error


# --------------------------------------------------------------------------- 4. bounded memory


@pytest.mark.slow
def test_a_tree_of_too_many_files_is_refused_by_count_before_anything_is_written(tmp_path):
    repo = tmp_path / "calc"
    make_repo(repo, [("start", BASE)])
    blob = git(repo, "hash-object", "-w", "calc.py")
    count = 50_001  # one more than the cap (gitread.MAX_TREE_FILES)
    listing = "".join(f"100644 blob {blob}\tf{i:06d}.py\n" for i in range(count))
    tree = subprocess.run(["git", "mktree"], cwd=repo, input=listing, capture_output=True, text=True).stdout
    commit = _commit(repo, tree.strip(), None, "many files")
    with pytest.raises(TaskError, match="holds more than 50000 files"):
        Repo(repo).export(commit, tmp_path / "out")
    assert not (tmp_path / "out").exists()


MEASURE = """
import resource, sys
from pathlib import Path
from kit.errors import TaskError
from kit.importers.git.importer import Options, import_git
try:
    import_git(Options(repo=Path(sys.argv[1]), commit=sys.argv[2], out=Path(sys.argv[3]), timeout_s=60))
    print("IMPORTED")
except TaskError as e:
    print("REFUSED", str(e).splitlines()[0])
# VmHWM, not RUSAGE_SELF: a child spawned by vfork+exec inherits its parent's peak in ru_maxrss (the
# pytest process, hundreds of MB late in the suite); VmHWM is this process's own address space only
print("SELF_KB", [int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:")][0])
print("CHILDREN_KB", resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)  # git: spawned from this small process
"""


@pytest.mark.slow
def test_a_blob_far_over_the_cap_is_refused_before_it_is_read(tmp_path):
    """320 MB of zeros compress to a few hundred KB; before, the importer read every blob whole (the
    kit at several times the blob's size). Now the size is read from the object's header first."""
    size = 320 * 2**20
    repo = tmp_path / "calc"
    make_repo(repo, [("start", BASE)])
    sparse = tmp_path / "zeros"
    with open(sparse, "wb") as f:
        f.truncate(size)
    blob = git(repo, "hash-object", "-w", str(sparse))  # streamed into a pack by git: small on disk
    sparse.unlink()
    git(repo, "update-index", "--add", "--cacheinfo", f"100644,{blob},data/big.bin")
    git(repo, "commit", "-qm", "add the data")
    for rel, text in FIX.items():
        (repo / rel).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "Fix double")
    head = git(repo, "rev-parse", "HEAD")
    env = {**os.environ, "ORCHBENCH_RESULTS_DIR": str(tmp_path / "results")}
    proc = subprocess.run(
        [sys.executable, "-c", MEASURE, str(repo), head, str(tmp_path / "tasks")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if " " in line)
    assert "REFUSED" in lines, proc.stdout + proc.stderr
    assert "'data/big.bin'" in lines["REFUSED"] and f"{size:,} bytes" in lines["REFUSED"]
    peak = max(int(lines["SELF_KB"]), int(lines["CHILDREN_KB"])) * 1024
    print(f"\npeak memory importing a {size // 2**20} MB blob: {peak / 2**20:.0f} MB (kit and git)")
    assert peak < size / 2, f"{peak / 2**20:.0f} MB"


@pytest.mark.slow
def test_a_tree_of_big_identical_files_under_the_caps_imports_in_little_memory(tmp_path):
    """Re-attack of issue 39: four identical 64 MB files (one blob, under every cap) took the
    importer to 1.09 GB -- the scorer read the base tree as one `git archive` output held whole (and
    joined), and the task's hash read each file whole. Both stream now; the kit's own peak stays small."""
    size, copies = 40 * 2**20, 3
    repo = tmp_path / "calc"
    make_repo(repo, [("start", BASE)])
    sparse = tmp_path / "zeros"
    with open(sparse, "wb") as f:
        f.truncate(size)
    blob = git(repo, "hash-object", "-w", str(sparse))
    sparse.unlink()
    for i in range(copies):
        git(repo, "update-index", "--add", "--cacheinfo", f"100644,{blob},data/copy{i}.bin")
    git(repo, "commit", "-qm", "add the data")
    for rel, text in FIX.items():
        (repo / rel).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "Fix double")
    head = git(repo, "rev-parse", "HEAD")
    env = {**os.environ, "ORCHBENCH_RESULTS_DIR": str(tmp_path / "results")}
    proc = subprocess.run(
        [sys.executable, "-c", MEASURE, str(repo), head, str(tmp_path / "tasks")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    lines = dict(line.split(" ", 1) if " " in line else (line, "") for line in proc.stdout.splitlines())
    assert "IMPORTED" in lines, proc.stdout + proc.stderr
    peak = int(lines["SELF_KB"]) * 1024
    print(f"\nthe kit's peak importing {copies} x {size // 2**20} MB identical files: {peak / 2**20:.0f} MB")
    assert peak < size * copies / 2, f"{peak / 2**20:.0f} MB"


def test_a_repository_that_borrows_objects_from_another_store_is_refused(tmp_path):
    """Red team, issue 39: the view borrowed the repository's objects and git followed the
    repository's own objects/info/alternates -- a head tree could name a blob of any store on the
    host and the import copied it into solution/. Such a repository is refused, nothing is read."""
    victim = tmp_path / "victim"
    make_repo(victim, [("secret", {"victim.txt": "TOP SECRET victim content\n"})])
    secret = git(victim, "rev-parse", "HEAD:victim.txt")
    repo = tmp_path / "calc"
    make_repo(repo, [("start", BASE), ("Fix double", FIX)])
    (repo / ".git" / "objects" / "info" / "alternates").write_text(f"{victim / '.git' / 'objects'}\n")
    git(repo, "update-index", "--add", "--cacheinfo", f"100644,{secret},secret.txt")
    git(repo, "commit", "-qm", "Fix double and take the secret")
    with pytest.raises(TaskError, match="borrows objects from another store"):
        import_git(Options(repo=repo, commit=git(repo, "rev-parse", "HEAD"), out=tmp_path / "tasks"))
    assert not any(
        "TOP SECRET" in p.read_text(errors="replace") for p in tmp_path.glob("tasks/**/*") if p.is_file()
    )


def test_a_python_source_over_the_parse_cap_is_refused_before_it_is_parsed():
    """Red team, issue 39: ast.parse takes ~650 times a module's size (a 4 MB test module of a
    hostile repository took the kit to 2.6 GB): no source over 2 MB is parsed, whoever asks."""
    import tracemalloc

    from kit import pyast

    source = "x = 1\n" * (pyast.MAX_SOURCE_BYTES // 6 + 1)
    tracemalloc.start()  # (not ru_maxrss: late in the suite this process's peak is already far above)
    try:
        with pytest.raises(SyntaxError, match="parses no Python source over"):
            pyast.parse(source)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20 * 2**20, f"{peak / 2**20:.0f} MB: parsed"  # parsing it takes over a GB


def test_a_range_whose_commit_messages_add_up_past_the_cap_is_refused_before_they_are_read(
    tmp_path, monkeypatch
):
    """Red team, issue 39: each commit was capped at 1 MB but a range of 300 such commits took the kit
    to 335 MB (5,000 would be ~5.5 GB). Their sum is capped too, from the objects' headers."""
    from kit.importers.git import gitread

    monkeypatch.setattr(gitread, "MAX_RANGE_BYTES", 64 * 1024)  # (the real cap is 16 MB: 20 x 4 KB here)
    repo = tmp_path / "calc"
    shas = make_repo(repo, [("start", BASE)])
    for i in range(20):
        (repo / "calc.py").write_text(f"def double(x):\n    return x + x + {i}\n")
        git(repo, "commit", "-qam", f"step {i}\n\n" + "x" * 4000)
    read = []
    monkeypatch.setattr(gitread.Repo, "commit", lambda self, sha: read.append(sha))
    with pytest.raises(TaskError, match="commit objects hold .* over the importer's limit"):
        Repo(repo).range_commits(shas[0], git(repo, "rev-parse", "HEAD"))
    assert read == []  # no message was read


def test_a_repository_whose_refs_folder_is_a_link_is_refused(tmp_path):
    """Red team, issue 39: a `.git/refs` that links to a host folder had its small files copied into
    the kit's view as refs."""
    host = tmp_path / "host"
    host.mkdir()
    (host / "secret").write_text("0" * 40 + "\n")
    repo = tmp_path / "calc"
    make_repo(repo, [("start", BASE)])
    git(repo, "pack-refs", "--all")
    import shutil

    shutil.rmtree(repo / ".git" / "refs")
    os.symlink(host, repo / ".git" / "refs")
    with pytest.raises(TaskError, match="refs is a symbolic link"):
        Repo(repo)


def test_a_deleted_name_deleted_txt_cannot_carry_is_refused_and_others_are_written_exactly(tmp_path):
    """DELETED.txt is one path a line, taken exactly: 'b.py ' keeps its space; a deleted '#notes'
    would read as a comment (the file kept), so the import refuses it, named."""
    from kit.importers.git.gitread import Change
    from kit.importers.git.writer import write_solution

    head = tmp_path / "head"
    head.mkdir()
    folder = tmp_path / "task"
    write_solution(folder, head, [Change("D", "b.py "), Change("D", "pkg/#x.py")])
    assert (folder / "solution" / "DELETED.txt").read_text() == "b.py \npkg/#x.py\n"
    with pytest.raises(TaskError, match=r"deletes '#notes', a name DELETED.txt cannot list"):
        write_solution(tmp_path / "task2", head, [Change("D", "#notes")])
    assert not (tmp_path / "task2" / "solution" / "DELETED.txt").exists()


def test_a_test_module_that_is_not_utf8_is_one_clear_error(tmp_path):
    """Issue 39, left open by the first red team: a latin-1 test module ended the import in a
    UnicodeDecodeError traceback (the probe read it as UTF-8). Now: one error naming the module."""
    repo = tmp_path / "calc"
    shas = make_repo(repo, [("start", BASE), ("Fix double", {**FIX, "tests/test_double.py": "x"})])
    latin = "# -*- coding: latin-1 -*-\nfrom calc import double\n\n\ndef test_caf\xe9():\n    assert double(2) == 4\n"
    (repo / "tests" / "test_double.py").write_bytes(latin.encode("latin-1"))
    git(repo, "commit", "-qam", "Fix double, in latin-1")
    with pytest.raises(TaskError, match=r"'tests/test_double.py' is not UTF-8") as e:
        import_git(Options(repo=repo, commit=git(repo, "rev-parse", "HEAD"), out=tmp_path / "tasks"))
    assert "--tests GLOB" in e.value.hint and shas


def test_a_test_nested_a_thousand_levels_deep_is_one_clear_error(tmp_path):
    """Issue 39, left open by the first red team: a test asserting a 1,000-term sum ended the import in a
    RecursionError (scoring copies each test's syntax tree recursively). Now refused by its depth."""
    terms = " + ".join(["double(1)"] * 1000)
    deep = f"from calc import double\n\n\ndef test_many():\n    assert {terms} == 2000\n"
    repo = tmp_path / "calc"
    make_repo(repo, [("start", BASE), ("Fix double", {**FIX, "tests/test_double.py": deep})])
    with pytest.raises(TaskError, match=r"'tests/test_double.py' nests 100\d levels deep \(at most 100"):
        import_git(Options(repo=repo, commit=git(repo, "rev-parse", "HEAD"), out=tmp_path / "tasks"))
    assert not (tmp_path / "tasks").exists() or not any((tmp_path / "tasks").iterdir())
