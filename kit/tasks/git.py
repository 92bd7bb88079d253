"""The one git wrapper: every git command the kit runs on its own behalf (base repositories, clones,
diffs, harness bookkeeping, workflow patches, the kit's own commit) goes through :func:`run_git` or
uses :func:`git_env` and :func:`git_safety_args`, so none of them reads a user's config, asks for a
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


def git_safety_args(root: Path) -> list[str]:
    """``-c`` options that stop a clone's own config from making the kit's git calls run commands:
    no fsmonitor, no hooks, no pager, every filter / diff / merge driver command it names emptied
    (a textconv becomes ``cat``)
    (command-line ``-c`` beats the repo's config). Reading the config runs nothing."""
    names = subprocess.run(
        ["git", "config", "--name-only", "--get-regexp", COMMAND_KEYS],
        cwd=root,
        env=git_env(),
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.split()
    args = ["-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-c", "core.pager=cat"]
    for name in names:  # an empty textconv would fail the diff; `cat FILE` is the identity
        args += ["-c", f"{name}=cat" if name.endswith(".textconv") else f"{name}="]
    return args


def git(
    root: Path,
    *args: str,
    env: dict[str, str] | None = None,
    input: str | bytes | None = None,
    text: bool = True,
    timeout: float | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess:
    """``git ARGS`` in ``root`` with the kit's options, and the safety options when ``root`` is a
    repository (its own config can then name no command the kit would run). ``check``: TaskError with
    git's message when it fails."""
    argv = ["git", *GIT_OPTS, *(git_safety_args(root) if (root / ".git").exists() else []), *args]
    proc = subprocess.run(
        argv, cwd=root, env=env or git_env(), input=input, capture_output=True, text=text, timeout=timeout
    )
    if check and proc.returncode != 0:
        err = proc.stderr if text else proc.stderr.decode("utf-8", "replace")
        raise TaskError(f"git {' '.join(args)} failed in {root}: {err.strip()}")
    return proc


def run_git(root: Path, *args: str, env: dict[str, str] | None = None, timeout: float | None = None) -> str:
    """The output of ``git ARGS`` in ``root`` (see :func:`git`); TaskError when it fails."""
    return git(root, *args, env=env, timeout=timeout).stdout
