"""Reading a user's repository: commits, the files a change touches, and trees written out as plain
files -- every git process on a view of the kit's own (:mod:`.gitview`): nothing of the
repository's config is read, so no hook, filter, diff driver, pager, fsmonitor, signature check,
transport or lazy fetch of its choosing runs, and an object it lacks is one clear error.

Every path the repository gives (tree entries, ``git diff`` paths) is checked by
:func:`kit.untrusted.confine.path_problem` as it is read, and a repository carrying one that is absolute,
holds ``..`` or a control character is refused, naming it.

Sizes are checked before anything is read (``cat-file --batch-check``, which reads only the objects'
headers): a tree of more than :data:`MAX_TREE_FILES` files is refused by its count, read from a
streamed ``ls-tree`` that is stopped at the cap, before any git command walks or diffs the whole tree
(a tree bomb -- one subtree repeated, billions of paths from a few KB of objects -- costs no more);
a commit is read from its object (``cat-file``: ``git show`` would walk its tree), and one over
:data:`MAX_COMMIT_BYTES` is refused before its message is read; a file over :data:`MAX_FILE_BYTES`
(named) or a tree over :data:`MAX_TREE_BYTES` is refused before a byte of it is written, and a
symlink kept as a copy counts what it writes (its target's size, not its link text) against the same
cap before it is copied, so links to one big file cannot multiply it; blobs are streamed to their
files, so the kit never holds one whole; a disk that runs full while a tree or the task is written is
one clear error (the import stops, its scratch removed).

Trees are written from ``git ls-tree`` + ``git cat-file --batch`` (raw blobs: no ``.gitattributes``
filter, ``export-ignore`` or ``export-subst`` applies, as ``git archive`` would), as regular files
only: a symlink is kept (as a copy) only when it points at a file inside the tree, a submodule is
left out; each is noted.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path, PurePosixPath

from kit.errors import TaskError
from kit.importers.git.gitview import GitView, config_value, records
from kit.secrets import public_url
from kit.untrusted.confine import confined, path_problem

#: A base tree larger than this is refused: a task's repo is copied for every run.
MAX_TREE_BYTES = 256 * 1024 * 1024
#: A file larger than this is refused (before it is read).
MAX_FILE_BYTES = 64 * 1024 * 1024
#: A tree of more files than this is refused (before it is written).
MAX_TREE_FILES = 50_000
#: A commit object (its message) larger than this is refused; so is a range of more commits.
MAX_COMMIT_BYTES = 1024 * 1024
MAX_RANGE_COMMITS = 5_000
#: The commit objects of a range together (their messages): each is capped, so is their sum.
MAX_RANGE_BYTES = 16 * 1024 * 1024
LICENCE_RE = re.compile(r"^(licen[cs]e|copying|copyright|unlicense)(\.[a-z]+)?$", re.I)
#: The hint of an error reading a partial or shallow clone (it lacks objects) ...
_HINT = (
    "the kit reads the repository as it is and never fetches: a partial or shallow clone lacks "
    "objects (git fetch --unshallow, or clone it again without --filter), then import again"
)
#: ... and of any other repository (a damaged or hand-made object).
_FSCK_HINT = (
    "git could not read the repository's objects: `git fsck` in it shows which are missing or "
    "malformed; pick a commit whose trees git reads, or repair the clone"
)


@dataclass
class Change:
    """One file the change touches: ``status`` A (added), M (modified), D (deleted), T (type)."""

    status: str
    path: str


@dataclass
class Commit:
    sha: str
    parents: list[str]
    date: str  # committer date, ISO 8601
    message: str

    @property
    def subject(self) -> str:
        return self.message.strip().splitlines()[0] if self.message.strip() else ""


@dataclass
class Export:
    """A tree written out: what was left out and why."""

    notes: list[str] = field(default_factory=list)
    files: int = 0
    bytes: int = 0
    paths: set[str] = field(default_factory=set)  # the files written (repo-relative)


class Repo:
    """A local git repository, read through a view of the kit's own (:class:`.gitview.GitView`)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser().resolve()
        if not self.path.is_dir():
            raise TaskError(f"{path}: no such folder", "give the path of a local git repository")
        self.view = GitView(self.path)
        self.git_dir = self.view.source
        if self.view.run("rev-parse", "--git-dir", check=False).returncode != 0:
            raise TaskError(f"{path} is not a git repository (git cannot read {self.git_dir})")

    def run(self, *args: str, check: bool = True, text: bool = True, input: bytes | None = None):  # noqa: ANN201
        """``git ARGS`` on the view (a CompletedProcess); TaskError naming the repository when it fails."""
        try:
            return self.view.run(*args, check=check, text=text, input=input)
        except TaskError as e:
            raise TaskError(f"reading {self.path}: {e}", self.hint()) from None

    def hint(self) -> str:
        """What to do when git cannot read an object: fetch it (a shallow or partial clone), else fsck."""
        partial = config_value(self.view, "extensions.partialclone") or config_value(
            self.view, "remote.origin.promisor"
        )
        return _HINT if partial or (self.view.common / "shallow").exists() else _FSCK_HINT

    def out(self, *args: str) -> str:
        return self.run(*args).stdout

    # ------------------------------------------------------------------ commits

    def resolve(self, ref: str) -> str:
        """The full SHA of the commit ``ref`` names (a SHA, a tag, a branch ...)."""
        if not ref or ref.startswith("-") or any(c in ref for c in "\0\n"):
            raise TaskError(f"{ref!r} is not a commit name", "give a SHA, a tag or a branch")
        proc = self.run(
            "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}", check=False
        )
        if proc.returncode != 0 or not proc.stdout.strip():
            raise TaskError(
                f"unknown commit {ref!r} in {self.path}", "check the SHA or tag (git log --oneline)"
            )
        return proc.stdout.strip()

    def commit(self, sha: str) -> Commit:
        """The commit ``sha`` (its size checked first: a message over :data:`MAX_COMMIT_BYTES` is refused)."""
        info = self.view.sizes([sha]).get(sha)
        if info is None:
            raise TaskError(f"{self.path} lacks the commit {sha}", self.hint())
        if info[1] > MAX_COMMIT_BYTES:
            raise TaskError(f"the commit {sha[:12]} is {info[1] // 1024} KB: over the importer's limit")
        # the object itself (cat-file): ``git show``/``log`` would diff the commit's whole tree, even with -s
        raw = self.run("cat-file", "commit", sha, text=False).stdout
        return _parse_commit(sha, raw)

    def range_commits(self, base: str, head: str) -> list[Commit]:
        """The commits from ``base`` (excluded) to ``head``, oldest first (at most :data:`MAX_RANGE_COMMITS`)."""
        shas = self.out("rev-list", f"--max-count={MAX_RANGE_COMMITS + 1}", f"{base}..{head}", "--").split()
        if len(shas) > MAX_RANGE_COMMITS:
            raise TaskError(
                f"{base[:12]}..{head[:12]} holds more than {MAX_RANGE_COMMITS} commits",
                "give a shorter range",
            )
        sizes = self.view.sizes(shas)
        total = sum(info[1] for info in sizes.values() if info)
        if total > MAX_RANGE_BYTES:  # checked before any message is read
            raise TaskError(
                f"{base[:12]}..{head[:12]}: its {len(shas)} commit objects hold {total // 2**20} MB: over the "
                f"importer's limit of {MAX_RANGE_BYTES // 2**20} MB",
                "give a shorter range",
            )
        return [self.commit(s) for s in reversed(shas)]

    def is_ancestor(self, base: str, head: str) -> bool:
        return self.run("merge-base", "--is-ancestor", base, head, check=False).returncode == 0

    def has_commit(self, sha: str) -> bool:
        return self.run("cat-file", "-e", f"{sha}^{{commit}}", check=False).returncode == 0

    def remote_url(self) -> str | None:
        """The ``origin`` remote's URL with any credentials cut; None when there is none or it is a
        local path (a clone of a clone says nothing public)."""
        url = config_value(self.view, "remote.origin.url") or ""
        if not url or url.lower().startswith(("/", ".", "~", "file:")) or re.match(r"^[A-Za-z]:[\\/]", url):
            return None
        return public_url(url)  # userinfo and credential-like query parameters cut, any scheme's case

    # ------------------------------------------------------------------ trees

    def _paths(self, *args: str, what: str, per: int, check: bool = True) -> Iterator[tuple[bytes, str]]:
        """(meta, path) pairs of a ``-z`` listing, each path checked (:func:`path_problem`: refused,
        named; ``check`` False: only counted), at most :data:`MAX_TREE_FILES` of them (more: refused
        before anything is written, git stopped)."""
        seen = 0
        try:
            with self.view.stream(*args) as stream:
                items = records(stream)
                for first in items:
                    if per == 0:  # paths alone (--name-only)
                        meta, path = b"", first
                    else:
                        meta, path = first.split(b"\t", 1) if per == 1 else (first, next(items, b""))
                    seen += 1
                    if seen > MAX_TREE_FILES:
                        raise TaskError(
                            f"{what} holds more than {MAX_TREE_FILES} files: too many for a task",
                            "pick another commit or range (the kit copies a task's tree for every run)",
                        )
                    yield meta, _checked(path, what) if check else ""
        except TaskError as e:
            if "failed in" not in str(e):
                raise
            raise TaskError(f"reading {self.path}: {e}", self.hint()) from None

    def changes(self, base: str, head: str) -> list[Change]:
        """The files that differ between two commits (renames as a delete and an add; submodules left out)."""
        for commit in (base, head):  # counted (streamed, stopped at the cap) before git diffs the trees
            self.count_files(commit)
        args = ("diff", "--raw", "-z", "--no-renames", "--no-ext-diff", "--no-textconv", base, head, "--")
        out = []
        for meta, path in self._paths(*args, what=f"the change {base[:12]}..{head[:12]}", per=2):
            fields = meta.decode("ascii", "replace").lstrip(":").split()
            if len(fields) < 5 or "160000" in fields[:2]:
                continue
            out.append(Change(fields[4][0], path))
        return out

    def count_files(self, commit: str) -> int:
        """The number of files of ``commit``'s tree, read from a streamed ``ls-tree -r``: at
        :data:`MAX_TREE_FILES` + 1 it is refused and git is stopped, so a tree bomb (one subtree
        repeated: billions of paths from a few KB of objects) costs no more than that many lines."""
        args = ("ls-tree", "-r", "-z", "--full-tree", "--name-only", commit)
        return sum(1 for _ in self._paths(*args, what=f"the tree of {commit[:12]}", per=0, check=False))

    def tree(self, commit: str) -> list[tuple[str, str, str]]:
        """(mode, object SHA, path) of every entry of ``commit``'s tree (files, links, submodules)."""
        args = ("ls-tree", "-r", "-z", "--full-tree", commit)
        out = []
        for meta, path in self._paths(*args, what=f"the tree of {commit[:12]}", per=1):
            mode, _kind, sha = meta.decode("ascii", "replace").split()
            out.append((mode, sha, path))
        return out

    def export(self, commit: str, dest: Path) -> Export:
        """Write the tree of ``commit`` to ``dest`` (created) as plain files; see the module docstring.
        Every size is checked before a file is written; blobs are streamed to their files."""
        entries = self.tree(commit)
        result = Export()
        result.notes += [f"{p}: a submodule, left out" for m, _, p in entries if m == "160000"]
        files = []
        for mode, sha, path in entries:
            if mode in ("100644", "100755", "120000"):
                if ".git" in PurePosixPath(path).parts:
                    result.notes.append(f"{path}: inside a .git folder, left out")
                else:
                    files.append((mode, sha, path))
        _no_file_over_a_folder(commit, [p for _, _, p in files])
        sizes = self._sizes(commit, files)
        dest.mkdir(parents=True, exist_ok=True)
        targets: dict[str, list[tuple[str, str]]] = {}
        for mode, sha, path in files:
            targets.setdefault(sha, []).append((mode, path))
        links: list[tuple[str, str]] = []

        def write(sha: str, chunks: Iterator[bytes]) -> None:
            regular = [(m, p) for m, p in targets[sha] if m != "120000"]
            if len(regular) < len(targets[sha]):  # a link's target (small: checked)
                data = b"".join(chunks)
                links.extend((p, data.decode("utf-8", "replace")) for m, p in targets[sha] if m == "120000")
                chunks = iter([data])
            first = None
            for mode, path in regular:
                target = confined(dest, path, f"the tree of {commit[:12]}: path")
                target.parent.mkdir(parents=True, exist_ok=True)
                if first is None:
                    with open(target, "wb") as f:
                        for chunk in chunks:
                            f.write(chunk)
                    first = target
                else:
                    shutil.copyfile(first, target)
                os.chmod(target, 0o755 if mode == "100755" else 0o644)
                result.files += 1
                result.bytes += sizes[sha]
                result.paths.add(path)

        with writing(dest):
            self.view.blobs(sorted(targets), write)
            for rel, link in sorted(links):  # after every file exists: a link is kept as a copy of its target
                self._link(dest, rel, link, result, commit)
        return result

    def _sizes(self, commit: str, files: list[tuple[str, str, str]]) -> dict[str, int]:
        """The size of each blob of ``files`` (refused, naming the file: a blob the repository lacks,
        a file over :data:`MAX_FILE_BYTES`, a tree over :data:`MAX_TREE_BYTES`); nothing is read."""
        found = self.view.sizes(sorted({s for _, s, _ in files}))
        total = 0
        for mode, sha, path in files:
            info = found.get(sha)
            if info is None:
                raise TaskError(
                    f"{self.path} lacks the object {sha} ({path} in the tree of {commit[:12]})", self.hint()
                )
            cap = 4096 if mode == "120000" else MAX_FILE_BYTES
            if info[1] > cap:
                raise TaskError(
                    f"{path!r} in the tree of {commit[:12]} is {info[1]:,} bytes: over the importer's "
                    f"limit of {cap:,} bytes {'a link' if cap == 4096 else 'a file'}",
                    "pick a commit whose tree holds no such file (a task's tree is copied for every run)",
                )
            total += info[1]
        if total > MAX_TREE_BYTES:
            raise TaskError(
                f"the tree of {commit[:12]} holds {total:,} bytes: too large for a task "
                f"(at most {MAX_TREE_BYTES:,} bytes, {MAX_TREE_BYTES // 2**20} MB)"
            )
        return {sha: info[1] for sha, info in found.items() if info is not None}

    @staticmethod
    def _link(dest: Path, rel: str, link: str, result: Export, commit: str) -> None:
        """The symlink ``rel`` -> ``link`` written as a copy of its target when that is a file of the
        tree already written (:func:`confined`: no ``..`` out, no absolute path); else left out, noted.
        The copy counts against :data:`MAX_TREE_BYTES` with what is written already (its target's
        size, not the link text's): links to one big file cannot multiply it past the cap."""
        try:
            where = os.path.normpath(os.path.join(os.path.dirname(rel), link))
            source = confined(dest, where, "a link's target")
            target = confined(dest, rel, "a link")
        except TaskError:
            result.notes.append(f"{rel}: a symlink to {link!r} (not a file of the tree), left out")
            return
        if not source.is_file() or target.exists():
            result.notes.append(f"{rel}: a symlink to {link!r} (not a file of the tree), left out")
            return
        size = source.stat().st_size
        if result.bytes + size > MAX_TREE_BYTES:
            raise TaskError(
                f"the tree of {commit[:12]} holds over {MAX_TREE_BYTES // 2**20} MB once its symlinks are "
                f"written as copies of their targets ({rel} -> {link!r}, {size:,} bytes): too large for a task",
                "pick a commit whose tree is smaller (a task's tree is copied for every run)",
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        result.files += 1
        result.bytes += size
        result.paths.add(rel)

    def licence(self, commit: str) -> str | None:
        """The licence file at the top of ``commit``'s tree (LICENSE, COPYING ...), or None."""
        names = sorted(p for m, _, p in self.tree(commit) if "/" not in p and LICENCE_RE.match(p))
        return names[0] if names else None


def _no_file_over_a_folder(commit: str, paths: list[str]) -> None:
    """A tree that lists a file and a folder of one name (git stores it; fsck calls it
    duplicateEntries) cannot be written: one TaskError naming the path and the commit."""
    names = set(paths)
    for path in paths:
        clash = next((str(p) for p in PurePosixPath(path).parents if str(p) in names), None)
        if clash:
            raise TaskError(
                f"the tree of {commit[:12]} lists {clash!r} as a file and as a folder ({path!r}): refused",
                "a repository whose trees fail `git fsck` (duplicateEntries) is not imported",
            )


@contextlib.contextmanager
def writing(where: Path | str) -> Iterator[None]:
    """Writing files under ``where``: a full disk (or quota) is one clear error naming the folder --
    not a raw ``OSError`` or ``shutil.Error`` list of every file ``copytree`` could not copy."""
    try:
        yield
    except shutil.Error as e:
        errors = e.args[0] if e.args and isinstance(e.args[0], list) else []
        full = [x for x in errors if "No space left" in str(x) or "quota" in str(x).lower()]
        if full or not errors:
            raise _disk_full(where) from None
        first = errors[0][-1] if isinstance(errors[0], tuple) else errors[0]
        raise TaskError(f"copying into {where} failed for {len(errors)} files, the first: {first}") from None
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise _disk_full(where) from None
        raise


def _disk_full(where: Path | str) -> TaskError:
    return TaskError(
        f"the disk ran full while writing {where}: the import stopped (nothing of it is kept)",
        "free space on that disk, or set TMPDIR (the importer's scratch) and --out to a disk with room",
    )


def _parse_commit(sha: str, raw: bytes) -> Commit:
    """A commit object's parents, committer date (ISO 8601, as ``%cI``) and message, from its raw text."""
    head, _, body = raw.partition(b"\n\n")
    parents, date, encoding = [], "", "utf-8"
    for line in head.decode("utf-8", "replace").split("\n"):
        key, _, value = line.partition(" ")
        if key == "parent":
            parents.append(value.strip())
        elif key == "committer":
            m = re.search(r" (\d+) ([+-])(\d\d)(\d\d)$", value)
            if m:
                offset = timedelta(hours=int(m.group(3)), minutes=int(m.group(4)))
                zone = timezone(-offset if m.group(2) == "-" else offset)
                date = datetime.fromtimestamp(int(m.group(1)), zone).isoformat()
        elif key == "encoding":
            encoding = value.strip()
    try:
        message = body.decode(encoding, "replace")
    except (LookupError, ValueError):  # an encoding Python does not know, or one that raises anyway (idna)
        message = body.decode("utf-8", "replace")
    return Commit(sha, parents, date, message.rstrip("\n"))


def _checked(raw: bytes, what: str) -> str:
    """A path git printed, refused (TaskError naming it) unless UTF-8 and plain (:func:`path_problem`)."""
    try:
        path = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise TaskError(f"{what}: the path {raw!r} is not UTF-8: refused") from None
    problem = path_problem(path)
    if problem:
        raise TaskError(
            f"{what}: the path {path!r} is {problem}: refused",
            "a repository whose trees name such a path is not imported (git fsck shows it)",
        )
    return path
