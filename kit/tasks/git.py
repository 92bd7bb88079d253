"""The one git wrapper: every git command the kit runs on its own behalf (base repositories, clones,
diffs, harness bookkeeping, workflow patches, the kit's own commit) goes through :func:`run_git` or
uses :func:`git_env` and :func:`safety_env`, so none of them reads a user's config, asks for a
password, or runs a command the clone's own config names."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from kit.errors import TaskError
from kit.sandbox.backends import sandbox_env

_FIXED_DATE = "2024-01-01T00:00:00+0000"


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


def safety_env(git_dir: Path) -> dict[str, str]:
    """Overrides that stop a repository's own config from making a kit-side git call run a command:
    :data:`SAFE_SETTINGS`, and every filter / diff / merge driver command it names emptied (a textconv
    becomes ``cat``). They go through ``GIT_CONFIG_COUNT`` / ``GIT_CONFIG_KEY_<n>`` /
    ``GIT_CONFIG_VALUE_<n>``, which take a key whole, so no key the agent names can turn into another
    option (``-c NAME=`` splits at the first ``=``); they beat the repository's config like ``-c``."""
    pairs = list(SAFE_SETTINGS.items())
    pairs += [(k, "cat" if k.endswith(".textconv") else "") for k in command_keys(git_dir)]
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
    folder. A ``.git`` that is a file or a link, or holds a ``commondir`` (refs kept elsewhere), is
    refused (TaskError).
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
        if git_dir.is_symlink() or not git_dir.is_dir() or os.path.lexists(git_dir / "commondir"):
            raise TaskError(
                f"{git_dir} is not a folder of its own (a file, a link, or a commondir pointing elsewhere): "
                "the kit runs no git on it",
                "the agent replaced the clone's .git; its work is scored from the files, not from git",
            )
        env["GIT_DIR"] = str(git_dir)
        env.setdefault("GIT_WORK_TREE", str(root))
    if git_dir.is_dir() and not git_dir.is_symlink():
        env.update(safety_env(git_dir))
    proc = subprocess.run(
        ["git", *GIT_OPTS, *args],
        cwd=root,
        env=env,
        input=input,
        capture_output=True,
        text=text,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        err = proc.stderr if text else proc.stderr.decode("utf-8", "replace")
        raise TaskError(f"git {' '.join(args)} failed in {root}: {err.strip()}")
    return proc


def run_git(root: Path, *args: str, env: dict[str, str] | None = None, timeout: float | None = None) -> str:
    """The output of ``git ARGS`` in ``root`` (see :func:`git`); TaskError when it fails."""
    return git(root, *args, env=env, timeout=timeout).stdout
