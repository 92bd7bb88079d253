"""The one git wrapper: every git command the kit runs on its own behalf (base repositories, clones,
diffs, harness bookkeeping, workflow patches, the kit's own commit) goes through :func:`run_git` or
uses :func:`git_env` and :func:`safety_env`, so none of them reads a user's config, asks for a
password, or runs a command the clone's own config names."""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from kit.errors import TaskError
from kit.sandbox.backends import sandbox_env

_FIXED_DATE = "2024-01-01T00:00:00+0000"


#: overrides the tree's own ``.gitattributes`` in the kit's own repositories (``info/attributes`` comes first):
#: its bytes as committed -- no file left out (``export-ignore`` hid own tests from scoring, attack
#: round 39c), no ``$Format$`` filled in, no line-ending, ident, filter or encoding conversion
PLAIN_ATTRIBUTES = "* -text -eol -ident -filter -working-tree-encoding -export-ignore -export-subst\n"


def git_env() -> dict[str, str]:
    """An environment for the kit's own git calls: no user/system config, fixed identity and dates.
    Built from the sandbox's allow-list, not os.environ: whatever git runs never sees a key."""
    env = sandbox_env()
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_AUTHOR_NAME="orchbench",
        GIT_AUTHOR_EMAIL="orchbench@localhost",
        GIT_COMMITTER_NAME="orchbench",
        GIT_COMMITTER_EMAIL="orchbench@localhost",
        GIT_AUTHOR_DATE=_FIXED_DATE,
        GIT_COMMITTER_DATE=_FIXED_DATE,
        GIT_TERMINAL_PROMPT="0",
        GIT_NO_REPLACE_OBJECTS="1",  # refs/replace/ never substitutes one object for another
        GIT_ALLOW_PROTOCOL="file",  # local clones only: no network, ext:: or ssh transport
    )
    return env


GIT_OPTS = ["-c", "commit.gpgsign=false", "-c", "core.autocrlf=false", "-c", "core.hooksPath=/dev/null"]
#: Repo-config keys that name a command git would run on the kit's side (clean/smudge filters on
#: `git add`, textconv on `git diff` ...). The agent's shell can write .git/config in its clone.
COMMAND_KEYS = r"^(filter|diff|merge)\..*\.(clean|smudge|process|textconv|command|driver)$"
#: Set on every kit-side git call: no fsmonitor, hooks or pager from the repository's config, and no
#: descent into nested repositories (whose own config the overrides below never read).
SAFE_SETTINGS = {
    "core.fsmonitor": "false",
    "core.hooksPath": "/dev/null",
    "core.pager": "cat",
    "diff.ignoreSubmodules": "all",
    "status.submoduleSummary": "false",
    "submodule.recurse": "false",
}


def command_keys(git_dir: Path) -> list[str]:
    """The config keys of ``git_dir`` (its includes followed) that name a command, exactly as git
    stores them: NUL-separated, so a name with spaces or ``=`` is one name. Reading runs nothing."""
    proc = subprocess.run(
        ["git", "config", "--file", str(git_dir / "config"), "--includes", "-z", "--name-only"]
        + ["--get-regexp", COMMAND_KEYS],
        env=git_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    return [name for name in proc.stdout.split("\0") if name]


#: At most this many entries under a clone's .git are inspected before a kit-side git call.
MAX_GIT_ENTRIES = 200_000
#: A kit-side git call that takes longer is stopped (a FIFO named .gitattributes would hang it).
GIT_TIMEOUT_S = 120.0


def _refuse(git_dir: Path, what: str) -> TaskError:
    return TaskError(
        f"{git_dir}: {what}: the kit runs no git on this clone",
        "the agent rigged the clone's .git; its work is scored from the files, not from git",
    )


def check_git_dir(git_dir: Path) -> None:
    """Refuse a clone's git folder the kit's own git could be turned against: anything in it that is a
    link or not a regular file or folder (a FIFO would hang git, a link would make it write outside
    the clone: COMMIT_EDITMSG, logs/HEAD, refs/ or objects/ pointing into the cached base), a
    ``commondir``, a ``config.worktree``, and config that includes other files (``include.*``,
    ``includeIf.*``: conditional includes that :func:`command_keys` could not evaluate as git does)."""
    if git_dir.is_symlink() or not git_dir.is_dir():
        raise _refuse(git_dir, "not a folder (a file or a link pointing elsewhere)")
    seen = 0
    for dirpath, dirnames, filenames in os.walk(git_dir):
        for name in (*dirnames, *filenames):
            seen += 1
            if seen > MAX_GIT_ENTRIES:
                raise _refuse(git_dir, f"more than {MAX_GIT_ENTRIES} entries")
            mode = os.lstat(os.path.join(dirpath, name)).st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise _refuse(git_dir, f"{os.path.join(dirpath, name)} is a link or a special file")
    for name in ("commondir", "config.worktree"):
        if (git_dir / name).exists():
            raise _refuse(git_dir, f"it holds a {name} (git would read or write elsewhere)")
    names = _config_names(git_dir / "config", "^(include|includeif)\\.")
    if names:
        raise _refuse(git_dir, f"its config includes other files ({', '.join(names[:3])})")


def check_work_tree(root: Path) -> None:
    """Refuse a work tree holding a nested repository (a ``.git`` below its top): ``git add`` runs a
    git inside it, with that repository's own config -- filters the kit never saw. Links are not
    followed; at most :data:`MAX_GIT_ENTRIES` entries are looked at."""
    seen = 0
    for dirpath, dirnames, filenames in os.walk(root):
        if Path(dirpath) == Path(root):
            dirnames[:] = [d for d in dirnames if d != ".git"]
        elif ".git" in dirnames or ".git" in filenames:
            raise TaskError(
                f"{dirpath} is a nested git repository: the kit runs no git on {root}",
                "the agent made a repository inside the clone; its work is scored from the files, not from git",
            )
        seen += len(dirnames) + len(filenames)
        if seen > MAX_GIT_ENTRIES:
            raise TaskError(f"{root}: more than {MAX_GIT_ENTRIES} entries: the kit runs no git on it")


def _config_names(path: Path, pattern: str) -> list[str]:
    """Config key names in the file ``path`` matching ``pattern``, NUL-separated (read, never run)."""
    if not path.is_file():
        return []
    proc = subprocess.run(
        ["git", "config", "--file", str(path), "-z", "--name-only", "--get-regexp", pattern],
        env=git_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    return [name for name in proc.stdout.split("\0") if name]


def _submodule_names(git_dir: Path, root: Path | None) -> set[str]:
    """Names of the submodules the clone's config or its ``.gitmodules`` declares."""
    keys = _config_names(git_dir / "config", "^submodule\\.")
    gitmodules = root / ".gitmodules" if root is not None else None
    if gitmodules is not None and not gitmodules.is_symlink() and gitmodules.is_file():
        keys += _config_names(gitmodules, "^submodule\\.")
    return {key[len("submodule.") : key.rindex(".")] for key in keys if key.count(".") >= 2}


def safety_env(git_dir: Path, root: Path | None = None) -> dict[str, str]:
    """Overrides that stop a repository's own config from making a kit-side git call run a command:
    :data:`SAFE_SETTINGS`, and every filter / diff / merge driver command it names emptied (a textconv
    becomes ``cat``). They go through ``GIT_CONFIG_COUNT`` / ``GIT_CONFIG_KEY_<n>`` /
    ``GIT_CONFIG_VALUE_<n>``, which take a key whole, so no key the agent names can turn into another
    option (``-c NAME=`` splits at the first ``=``); they beat the repository's config like ``-c``.
    Every submodule the clone declares is set to ``ignore = all`` (a per-submodule setting beats
    ``diff.ignoreSubmodules``), so git never runs inside a nested repository with its own config."""
    pairs = list(SAFE_SETTINGS.items())
    pairs += [(k, "cat" if k.endswith(".textconv") else "") for k in command_keys(git_dir)]
    pairs += [(f"submodule.{name}.ignore", "all") for name in sorted(_submodule_names(git_dir, root))]
    env = {"GIT_CONFIG_COUNT": str(len(pairs))}
    for i, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = key, value
    return env


def git(
    root: Path,
    *args: str,
    env: dict[str, str] | None = None,
    input: str | bytes | None = None,
    text: bool = True,
    timeout: float | None = None,
    check: bool = True,
    own_checkout: bool = False,
) -> subprocess.CompletedProcess:
    """``git ARGS`` in ``root`` with the kit's options. git works on exactly ``root/.git`` (or the
    ``GIT_DIR`` the caller set) with ``root`` as its work tree -- never a repository a ``.git`` file,
    ``core.worktree`` or a parent folder would lead it to -- and under :func:`safety_env` of that git
    folder. A rigged ``.git`` is refused (:func:`check_git_dir`, TaskError); a call is stopped after
    :data:`GIT_TIMEOUT_S` unless ``timeout`` says otherwise.
    ``check``: TaskError with git's message when it fails. ``own_checkout``: ``root`` is the kit's own
    checkout, not a clone: git finds its repository as usual (a worktree's ``.git`` file included)."""
    env = dict(env or git_env())
    if own_checkout:
        proc = subprocess.run(
            ["git", *args], cwd=root, env=env, capture_output=True, text=text, timeout=timeout
        )
        if check and proc.returncode != 0:
            raise TaskError(f"git {' '.join(args)} failed in {root}: {proc.stderr.strip()}")
        return proc
    env.setdefault("GIT_CEILING_DIRECTORIES", str(Path(root).resolve().parent))
    git_dir = Path(env["GIT_DIR"]) if "GIT_DIR" in env else Path(root) / ".git"
    if "GIT_DIR" not in env and (git_dir.is_symlink() or git_dir.exists()):
        check_git_dir(git_dir)
        env["GIT_DIR"] = str(git_dir)
        env.setdefault("GIT_WORK_TREE", str(root))
        env.update(safety_env(git_dir, Path(root)))
    elif git_dir.is_dir() and not git_dir.is_symlink():
        env.update(safety_env(git_dir, Path(root)))
    if env.get("GIT_WORK_TREE"):
        check_work_tree(Path(env["GIT_WORK_TREE"]))
    timeout = GIT_TIMEOUT_S if timeout is None else timeout
    try:
        proc = subprocess.run(
            ["git", *GIT_OPTS, *args],
            cwd=root,
            env=env,
            input=input,
            capture_output=True,
            text=text,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        raise TaskError(
            f"git {' '.join(args)} in {root} took longer than {timeout:g} s and was stopped"
        ) from None
    if check and proc.returncode != 0:
        err = proc.stderr if text else proc.stderr.decode("utf-8", "replace")
        raise TaskError(f"git {' '.join(args)} failed in {root}: {err.strip()}")
    return proc


def run_git(root: Path, *args: str, env: dict[str, str] | None = None, timeout: float | None = None) -> str:
    """The output of ``git ARGS`` in ``root`` (see :func:`git`); TaskError when it fails."""
    return git(root, *args, env=env, timeout=timeout).stdout


@contextlib.contextmanager
def git_stream(
    root: Path, *args: str, env: dict[str, str], stdin: IO[bytes] | None = None, timeout: float | None = None
) -> Iterator[IO[bytes]]:
    """``git ARGS`` in ``root`` whose output is read as it comes (bytes), for output too large to
    hold at once. ``env`` names a git folder of the kit's own (``GIT_DIR``: no repository config of
    anyone else's is read). The process is stopped when the caller leaves early (an exception) or
    after :data:`GIT_TIMEOUT_S`; TaskError when it fails or is stopped by the timeout."""
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            ["git", *GIT_OPTS, *args],
            cwd=root,
            env=env,
            stdin=stdin if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
        )
        timer = threading.Timer(GIT_TIMEOUT_S if timeout is None else timeout, proc.kill)
        timer.start()
        try:
            yield proc.stdout  # type: ignore[misc]
        except BaseException:
            proc.kill()
            raise
        finally:
            proc.stdout.close()  # type: ignore[union-attr]
            proc.wait()
            timer.cancel()
        if proc.returncode != 0:
            err.seek(0)
            rc = proc.returncode  # (the timer kills: SIGKILL; a reader that stopped early: SIGPIPE)
            stopped = (
                " (stopped: it ran past its time limit)" if rc == -9 else f" (signal {-rc})" if rc < 0 else ""
            )
            message = err.read(4000).decode("utf-8", "replace").strip()
            raise TaskError(f"git {' '.join(args)} failed in {root}{stopped}: {message}")
