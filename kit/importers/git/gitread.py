"""Reading a user's repository: commits, the files a change touches, and trees written out as plain
files -- every call through :func:`kit.tasks.git.git`, with the repository treated as untrusted.

The repository's own hooks, filters, diff drivers, pager, fsmonitor and signature checks never run:
:func:`kit.tasks.git.git` empties every command its config names and switches hooks off; trees are
written from ``git ls-tree`` + ``git cat-file --batch`` (raw blobs: no ``.gitattributes`` filter,
``export-ignore`` or ``export-subst`` applies, as ``git archive`` would), diffs run with
``--no-ext-diff --no-textconv``. A tree is written as regular files only: a symlink is kept only when
it points at a file inside the tree, a submodule is left out; each is noted.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from kit.errors import TaskError
from kit.secrets import public_url
from kit.tasks.git import git, git_env

#: Options on every call: no signature check (log.showSignature runs gpg), the user named this
#: repository (safe.directory: it may belong to another user).
_OPTS = ("-c", "log.showSignature=false", "-c", "safe.directory=*", "-c", "core.quotePath=false")
#: A base tree larger than this is refused: a task's repo is copied for every run.
MAX_TREE_BYTES = 256 * 1024 * 1024
LICENCE_RE = re.compile(r"^(licen[cs]e|copying|copyright|unlicense)(\.[a-z]+)?$", re.I)


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


def _git_dir(path: Path) -> Path:
    """The git folder of a work tree (``.git`` folder or ``gitdir:`` file) or of a bare repository."""
    dotgit = path / ".git"
    if dotgit.is_dir() and not dotgit.is_symlink():
        return dotgit
    if dotgit.is_file():
        text = dotgit.read_text(encoding="utf-8", errors="replace").strip()
        if text.startswith("gitdir:"):
            target = Path(text[len("gitdir:") :].strip())
            return target if target.is_absolute() else (path / target).resolve()
    if (path / "HEAD").is_file() and (path / "objects").is_dir():
        return path  # a bare repository
    raise TaskError(
        f"{path} is not a git repository",
        "give the path of a clone (a folder holding .git) or of a bare repository",
    )


class Repo:
    """A local git repository, read through the kit's git wrapper."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser().resolve()
        if not self.path.is_dir():
            raise TaskError(f"{path}: no such folder", "give the path of a local git repository")
        self.git_dir = _git_dir(self.path)
        self.env = git_env()
        self.env["GIT_DIR"] = str(self.git_dir)
        self.env["GIT_CEILING_DIRECTORIES"] = str(self.path.parent)
        if self.run("rev-parse", "--git-dir", check=False).returncode != 0:
            raise TaskError(f"{path} is not a git repository (git cannot read {self.git_dir})")

    def run(self, *args: str, check: bool = True, text: bool = True, input: bytes | None = None):  # noqa: ANN201
        """``git ARGS`` on this repository (a CompletedProcess); TaskError when it fails and ``check``."""
        return git(self.path, *_OPTS, *args, env=self.env, check=check, text=text, input=input)

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
        raw = self.out("show", "-s", "--no-color", "--format=%H%x00%P%x00%cI%x00%B", sha, "--")
        full, parents, date, message = raw.split("\0", 3)
        return Commit(full.strip(), parents.split(), date.strip(), message.rstrip("\n"))

    def range_commits(self, base: str, head: str) -> list[Commit]:
        """The commits from ``base`` (excluded) to ``head``, oldest first."""
        shas = self.out("rev-list", "--reverse", f"{base}..{head}", "--").split()
        return [self.commit(s) for s in shas]

    def is_ancestor(self, base: str, head: str) -> bool:
        return self.run("merge-base", "--is-ancestor", base, head, check=False).returncode == 0

    def remote_url(self) -> str | None:
        """The ``origin`` remote's URL with any credentials cut; None when there is none or it is a
        local path (a clone of a clone says nothing public)."""
        proc = self.run("config", "--get", "remote.origin.url", check=False)
        url = proc.stdout.strip() if proc.returncode == 0 else ""
        if not url or url.lower().startswith(("/", ".", "~", "file:")) or re.match(r"^[A-Za-z]:[\\/]", url):
            return None
        return public_url(url)  # userinfo and credential-like query parameters cut, any scheme's case

    # ------------------------------------------------------------------ trees

    def changes(self, base: str, head: str) -> list[Change]:
        """The files that differ between two commits (renames as a delete and an add; submodules left out)."""
        raw = self.out(
            "diff", "--raw", "-z", "--no-renames", "--no-ext-diff", "--no-textconv", base, head, "--"
        )
        parts = raw.split("\0")
        out = []
        for meta, path in zip(parts[0::2], parts[1::2], strict=False):
            fields = meta.lstrip(":").split()
            if len(fields) < 5 or "160000" in fields[:2]:
                continue
            out.append(Change(fields[4][0], path))
        return out

    def tree(self, commit: str) -> list[tuple[str, str, str]]:
        """(mode, blob SHA, path) of every file of ``commit``."""
        raw = self.out("ls-tree", "-r", "-z", "--full-tree", commit)
        out = []
        for entry in filter(None, raw.split("\0")):
            meta, path = entry.split("\t", 1)
            mode, _kind, sha = meta.split()
            out.append((mode, sha, path))
        return out

    def blobs(self, shas: list[str]) -> dict[str, bytes]:
        """The raw contents of blobs (no filter, no conversion), by SHA."""
        if not shas:
            return {}
        data = self.run(
            "cat-file", "--batch", text=False, input="".join(f"{s}\n" for s in shas).encode()
        ).stdout
        out: dict[str, bytes] = {}
        pos = 0
        for sha in shas:
            header_end = data.index(b"\n", pos)
            name, _kind, size = data[pos:header_end].decode().split()
            start = header_end + 1
            out[sha] = data[start : start + int(size)]
            pos = start + int(size) + 1
            if name != sha:
                raise TaskError(f"git cat-file answered {name} for {sha}")
        return out

    def export(self, commit: str, dest: Path) -> Export:
        """Write the tree of ``commit`` to ``dest`` (created) as plain files; see the module docstring."""
        entries = self.tree(commit)
        result = Export()
        files = [(m, s, p) for m, s, p in entries if m in ("100644", "100755", "120000")]
        result.notes += [f"{p}: a submodule, left out" for m, _, p in entries if m == "160000"]
        contents = self.blobs(sorted({s for _, s, _ in files}))
        total = sum(len(contents[s]) for _, s, _ in files)
        if total > MAX_TREE_BYTES:
            raise TaskError(
                f"the tree of {commit[:12]} holds {total // 2**20} MB: too large for a task "
                f"(at most {MAX_TREE_BYTES // 2**20} MB)"
            )
        dest.mkdir(parents=True, exist_ok=True)
        links = []
        for mode, sha, path in files:
            rel = _safe_rel(path)
            if rel is None:
                result.notes.append(f"{path}: not a plain relative path, left out")
                continue
            if mode == "120000":
                links.append((rel, contents[sha].decode("utf-8", "replace")))
                continue
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(contents[sha])
            os.chmod(target, 0o755 if mode == "100755" else 0o644)
            result.files += 1
            result.bytes += len(contents[sha])
        for rel, link in links:  # after every file exists: a link is kept as a copy of its target
            source = (dest / rel).parent / link
            real = source.resolve() if not os.path.isabs(link) else None
            if real is None or not real.is_relative_to(dest.resolve()) or not real.is_file():
                result.notes.append(f"{rel}: a symlink to {link!r} (not a file of the tree), left out")
                continue
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            (dest / rel).write_bytes(real.read_bytes())
            result.files += 1
        return result

    def licence(self, commit: str) -> str | None:
        """The licence file at the top of ``commit``'s tree (LICENSE, COPYING ...), or None."""
        names = sorted(p for m, _, p in self.tree(commit) if "/" not in p and LICENCE_RE.match(p))
        return names[0] if names else None


def _safe_rel(path: str) -> PurePosixPath | None:
    rel = PurePosixPath(path)
    if rel.is_absolute() or any(part in ("", ".", "..", ".git") for part in rel.parts):
        return None
    return rel
