"""A user's repository is read through a git folder of the kit's own, never through its own config.

A repository's ``.git/config`` can make git run a command: a promisor remote (``extensions.partialClone``,
or only ``remote.<name>.promisor = true``) makes git fetch an object it lacks -- running the
remote's ``uploadpack``, ``core.sshCommand``, an ``ext::`` transport or a remote helper --; and
``core.fsmonitor``, hooks, filters, textconv and external diff drivers, ``core.pager``, credential
helpers, aliases and includes all name commands. Pinning keys one by one on the command line cannot
close that class (``extensions.*`` cannot be overridden at all). So the kit never lets git read the
repository's config: every git process on a user's repository (``import-git``, ``build-suite``)
runs on a **view** -- a bare git folder the kit writes itself in a temporary folder: a config of
its own (the object format and nothing else: no remote, no promisor, no hook, no filter), the
repository's ``HEAD``, refs and ``shallow`` list copied as plain files (links and special files
skipped, ``refs/replace/`` left out), and its object store borrowed read-only through
``objects/info/alternates``. git runs with no system or user config, ``GIT_NO_REPLACE_OBJECTS``,
``GIT_ALLOW_PROTOCOL`` empty (no transport at all) and ``protocol.allow=never``, so an object the
repository lacks is never fetched: it is one clear error naming it, and the import stops. A
repository that borrows objects from another store (its own ``objects/info/alternates``) or whose
``refs/`` or ``objects/`` is a link is refused: git would follow either out of the repository.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from kit.errors import TaskError
from kit.tasks.git import git, git_env, git_stream
from kit.untrusted.terminal import visible

#: At most this many loose ref files are copied into a view (packed-refs holds the rest).
MAX_REF_FILES = 100_000
#: A repository config file larger than this is refused (a clone's is well under 10 KB).
MAX_CONFIG_BYTES = 1024 * 1024
#: A refs/ folder nesting deeper than this is refused (a branch name has a few parts).
MAX_REF_DEPTH = 64
#: A packed-refs file larger than this is refused.
MAX_PACKED_REFS_BYTES = 64 * 1024 * 1024
_HEAD_RE = re.compile(r"(ref: refs/[A-Za-z0-9._/+-]+|[0-9a-f]{40}|[0-9a-f]{64})\n?")
#: On every call: no transport (no fetch), no signature check, paths printed as they are, commits
#: parsed from their objects (not from a commit-graph file the repository supplies).
VIEW_OPTS = (
    *("-c", "protocol.allow=never", "-c", "log.showSignature=false", "-c", "core.quotePath=false"),
    *("-c", "core.commitGraph=false"),
)


def find_git_dir(path: Path) -> Path:
    """The git folder of a work tree (``.git`` folder or ``gitdir:`` file) or of a bare repository."""
    dotgit = path / ".git"
    if dotgit.is_dir() and not dotgit.is_symlink():
        return dotgit
    if dotgit.is_file():
        text = _start(dotgit, 4096).strip()  # (a repository's file: its first 4 KB, never read whole)
        if text.startswith("gitdir:") and "\0" not in text:
            target = Path(text[len("gitdir:") :].strip())
            target = (path / target).resolve()  # (resolved first: '..' and links decide nothing)
            if target.parent.name in ("worktrees", "modules") and _points_back(target, path):
                return target  # git's own layouts only, as resolved, and the git folder names this tree
            raise TaskError(  # (a downloaded tree's .git file could name any repository on the host)
                f"{path}/.git names {visible(str(target)[:200])}, which is no worktree's or submodule's git "
                "folder of this work tree: refused (the kit reads no other repository)",
                "give the path of a clone, or of a worktree or submodule git made",
            )
    if (path / "HEAD").is_file() and (path / "objects").is_dir():
        return path  # a bare repository
    raise TaskError(
        f"{path} is not a git repository",
        "give the path of a clone (a folder holding .git) or of a bare repository",
    )


def _points_back(target: Path, path: Path) -> bool:
    """Whether the git folder ``target`` a ``.git`` file names belongs to the work tree ``path``, as
    git records it: a linked worktree's git folder names the worktree's ``.git`` file in its
    ``gitdir`` file, a submodule's names its work tree in ``core.worktree``. A path's shape alone (a
    parent named ``worktrees`` or ``modules``) admits any repository so placed on the host -- a clone
    called ``modules``, another repository's own worktree."""
    if target.is_symlink() or not target.is_dir():
        return False
    if target.parent.name == "worktrees":
        back = target / "gitdir"
        if back.is_symlink() or not back.is_file():
            return False
        text = _start(back, 4096).strip()
        return "\0" not in text and (target / text).resolve() == (path / ".git").resolve()
    worktree = _config_value(target, "core.worktree", Path(tempfile.gettempdir()))  # (git runs outside it)
    return worktree is not None and "\0" not in worktree and (target / worktree).resolve() == path.resolve()


class GitView:
    """The view of the repository at ``path`` (a work tree or a git folder): see the module
    docstring. :meth:`close` removes it (it holds no more than the refs)."""

    def __init__(self, path: Path) -> None:
        self.source = find_git_dir(path)
        common = self.source
        if (self.source / "commondir").is_file():  # a linked worktree's git folder
            text = _start(self.source / "commondir", 4096).strip()
            common = (self.source / text).resolve() if "\0" not in text else self.source
            if not self.source.resolve().is_relative_to(common / "worktrees"):  # git's own layout only
                raise TaskError(
                    f"{path}: its git folder's commondir names {visible(text[:200])}, which is not the "
                    "repository its worktree belongs to: refused (the kit reads no other repository)",
                    "give the path of a clone, or of a worktree git made (git worktree add)",
                )
        self.common = common
        objects = (common / "objects").resolve()
        inner = [f"objects/{e.name}" for e in _entries(common / "objects")]
        inner += [f"objects/pack/{e.name}" for e in _entries(common / "objects" / "pack")]
        linked = [n for n in ("objects", "objects/pack", "objects/info", *inner) if (common / n).is_symlink()]
        if linked:  # a store of another repository on the host, read as if it were this one's
            raise TaskError(
                f"{path}: the repository's {linked[0]} is a symbolic link: refused", "give a clone's path"
            )
        if not objects.is_dir() or any(c in str(objects) for c in "\n\r\0"):
            raise TaskError(f"{path}: git holds no objects folder at {objects}", "give a clone's path")
        borrowed = [n for n in ("alternates", "http-alternates") if os.path.lexists(objects / "info" / n)]
        if borrowed:  # git would follow them from the view too: objects of any store on the host
            raise TaskError(
                f"{path}: the repository borrows objects from another store (objects/info/{borrowed[0]}); "
                "the kit reads no store but the repository's own",
                "make the clone self-contained (git repack -a -d, then remove objects/info/alternates), "
                "or clone it again without --shared/--reference",
            )
        self._tmp = tempfile.TemporaryDirectory(prefix="orchbench-gitview-")
        self.git_dir = Path(self._tmp.name) / "view.git"
        for sub in ("objects/info", "objects/pack", "refs/heads", "refs/tags"):
            (self.git_dir / sub).mkdir(parents=True, exist_ok=True)
        (self.git_dir / "objects" / "info" / "alternates").write_text(f"{objects}\n", encoding="utf-8")
        (self.git_dir / "HEAD").write_text(_head(self.source), encoding="utf-8")
        (self.git_dir / "config").write_text(_config(common, self.git_dir.parent), encoding="utf-8")
        _copy_refs(common, self.git_dir)
        self.env = {
            **git_env(),
            "GIT_DIR": str(self.git_dir),
            "GIT_ALLOW_PROTOCOL": "",  # no transport at all
            "GIT_PROTOCOL_FROM_USER": "0",
            "GIT_CEILING_DIRECTORIES": str(self.git_dir.parent),
        }

    def run(self, *args: str, check: bool = True, text: bool = True, input: bytes | None = None):  # noqa: ANN201
        """``git ARGS`` on the view (a CompletedProcess); TaskError when it fails and ``check``."""
        return git(self.git_dir, *VIEW_OPTS, *args, env=self.env, check=check, text=text, input=input)

    @contextlib.contextmanager
    def stream(self, *args: str, lines: list[str] | None = None) -> Iterator[IO[bytes]]:
        """``git ARGS`` on the view, its output read as it comes; ``lines``: its input, one a line."""
        with tempfile.TemporaryFile() as stdin:
            stdin.write("".join(f"{line}\n" for line in lines or []).encode())
            stdin.seek(0)
            with git_stream(self.git_dir, *VIEW_OPTS, *args, env=self.env, stdin=stdin) as out:
                yield out

    def sizes(self, shas: list[str]) -> dict[str, tuple[str, int] | None]:
        """(type, size) of each object, None for one the repository lacks -- read from the objects'
        headers (``cat-file --batch-check``): nothing is inflated, nothing is fetched."""
        out: dict[str, tuple[str, int] | None] = {}
        with self.stream("cat-file", "--batch-check", lines=shas) as stream:
            for sha, line in zip(shas, records(stream, b"\n"), strict=False):
                fields = line.decode("ascii", "replace").split()
                ok = len(fields) == 3 and fields[0] == sha and fields[2].isdigit()
                out[sha] = (fields[1], int(fields[2])) if ok else None
        return out

    def blobs(self, shas: list[str], sink: Callable[[str, Iterator[bytes]], None]) -> None:
        """Each blob of ``shas`` (raw: no filter, no conversion) handed to ``sink(sha, chunks)`` as a
        stream of chunks of at most 1 MB: nothing is held whole. Check their sizes first (:meth:`sizes`)."""
        with self.stream("cat-file", "--batch", lines=shas) as stream:
            for sha in shas:
                header = stream.readline(200).decode("ascii", "replace").split()
                if len(header) != 3 or header[0] != sha or not header[2].isdigit():
                    raise TaskError(f"git cat-file answered {' '.join(header)[:100]!r} for {sha}")
                chunks = _chunks(stream, int(header[2]))
                sink(sha, chunks)
                for _ in chunks:  # what the sink left unread
                    pass
                stream.read(1)  # the newline after each object

    def close(self) -> None:
        self._tmp.cleanup()


def _chunks(stream: IO[bytes], size: int) -> Iterator[bytes]:
    left = size
    while left:
        chunk = stream.read(min(left, 1 << 20))
        if not chunk:
            raise TaskError("git cat-file stopped in the middle of an object")
        left -= len(chunk)
        yield chunk


def records(stream: IO[bytes], sep: bytes = b"\0", limit: int = 1 << 16) -> Iterator[bytes]:
    """``stream`` split at ``sep`` as it is read; a record over ``limit`` bytes is refused."""
    buf = b""
    while chunk := stream.read1(1 << 16):  # type: ignore[attr-defined]
        buf += chunk
        *done, buf = buf.split(sep)
        yield from done
        if len(buf) > limit:
            raise TaskError(f"git printed a line of over {limit} bytes: refused")
    if buf:
        yield buf


def _entries(folder: Path) -> list[os.DirEntry]:
    """The entries of ``folder`` (none when it is no plain folder; at most 100,000 looked at)."""
    if folder.is_symlink() or not folder.is_dir():
        return []
    with os.scandir(folder) as it:
        return [e for _, e in zip(range(100_000), it, strict=False)]


def _start(path: Path, limit: int) -> str:
    with open(path, "rb") as f:
        return f.read(limit).decode("utf-8", "replace")


def _head(git_dir: Path) -> str:
    head = git_dir / "HEAD"
    text = _start(head, 200) if _plain(head) else ""
    if not _HEAD_RE.fullmatch(text):
        raise TaskError(f"{head}: not a HEAD git writes ({text[:80]!r})", "give the path of a clone")
    return text.rstrip("\n") + "\n"


def config_value(view: GitView, key: str) -> str | None:
    """The value of ``key`` in the repository's own config file (that file alone, no includes, as
    git reads it for the repository's format), or None; reading runs nothing."""
    return _config_value(view.common, key, view.git_dir.parent)


def _config_value(common: Path, key: str, cwd: Path) -> str | None:
    if not _plain(common / "config"):
        return None
    if (common / "config").stat().st_size > MAX_CONFIG_BYTES:  # git prints a value whole: never a huge one
        raise TaskError(
            f"{common / 'config'} is over {MAX_CONFIG_BYTES // 1024} KB: refused", "give a clone's path"
        )
    proc = git(cwd, "config", "--file", str(common / "config"), "--get", key, env=git_env(), check=False)
    return proc.stdout.rstrip("\n") if proc.returncode == 0 else None


def _config(common: Path, cwd: Path) -> str:
    """The view's config: the repository's object format, and nothing else of its config."""
    fmt = (_config_value(common, "extensions.objectformat", cwd) or "").strip().lower()
    if fmt not in ("", "sha1", "sha256"):
        raise TaskError(f"{common}: unknown object format {fmt[:40]!r}")
    version = "1" if fmt == "sha256" else "0"
    ext = f"[extensions]\n\tobjectformat = {fmt}\n" if fmt == "sha256" else ""
    return f"[core]\n\trepositoryformatversion = {version}\n\tbare = true\n{ext}"


def _plain(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()


def _copy_refs(common: Path, view: Path) -> None:
    """``packed-refs``, ``shallow`` and the loose refs of ``common`` into ``view``, as plain files:
    links and special files skipped, ``refs/replace/`` left out, at most :data:`MAX_REF_FILES`."""
    for name in ("packed-refs", "shallow"):
        if _plain(common / name):
            if (common / name).stat().st_size > MAX_PACKED_REFS_BYTES:
                raise TaskError(f"{common / name} is over {MAX_PACKED_REFS_BYTES // 2**20} MB: refused")
            shutil.copyfile(common / name, view / name)
    refs = common / "refs"
    if refs.is_symlink():  # os.walk would follow it: a host folder's small files copied as refs
        raise TaskError(f"{refs} is a symbolic link: refused", "give a clone whose refs/ is a folder")
    seen = 0
    for dirpath, dirnames, filenames in os.walk(refs):  # (os.walk recurses on 3.11: depth capped)
        rel = Path(dirpath).relative_to(refs)
        if len(rel.parts) > MAX_REF_DEPTH:
            raise TaskError(
                f"{refs}: folders nested over {MAX_REF_DEPTH} deep: refused", "give a clone's path"
            )
        dirnames[:] = [d for d in dirnames if not (rel == Path(".") and d == "replace")]
        for name in filenames:
            seen += 1
            if seen > MAX_REF_FILES:
                raise TaskError(f"{refs}: more than {MAX_REF_FILES} ref files: refused")
            src = Path(dirpath, name)
            if _plain(src) and src.stat().st_size <= 4096:
                (view / "refs" / rel).mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, view / "refs" / rel / name)
