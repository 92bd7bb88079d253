"""The task.yaml of an imported task: its id, title, prompt, limits, layout and ``source:``."""

from __future__ import annotations

import re
from pathlib import Path

from kit.errors import TaskError
from kit.importers.git.gitread import Repo
from kit.importers.git.plan import Plan
from kit.importers.git.prompt import build_prompt, changed_names, interface
from kit.importers.git.result import ImportResult, Options
from kit.secrets import public_text, public_url


def project_name(repo: Repo, opts: Options) -> str:
    """The project's name: the repository folder's name (``.git`` cut; a ``.git`` folder given: its
    parent's). Never a URL's part: an origin URL is the repository's to choose and may carry a token."""
    path = Path(repo.path).absolute()
    if path.name == ".git":
        path = path.parent
    return path.name.removesuffix(".git") or path.name or "repo"


def default_id(repo: Repo, opts: Options, base: str, head: str) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", project_name(repo, opts)).strip("-.") or "repo"
    if opts.commit:
        return f"{name}-{head[:10]}"
    a, b = (re.sub(r"[^A-Za-z0-9._-]+", "-", p).strip("-.") for p in (opts.range or "").split("..", 1))
    return re.sub(r"\.\.+", ".", f"{name}-{a}-{b}")


#: the largest prompt file (and commit message turned into a prompt) the importer takes
MAX_PROMPT_BYTES = 64 * 1024


def read_prompt(path: Path | None) -> str | None:
    if path is None:
        return None
    if not Path(path).is_file():
        raise TaskError(f"prompt file not found: {path}", "give a text file holding the task's prompt")
    if Path(path).stat().st_size > MAX_PROMPT_BYTES:
        raise TaskError(f"prompt file {path} is over {MAX_PROMPT_BYTES:,} bytes", "a prompt is a page or two")
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except UnicodeDecodeError as e:
        raise TaskError(f"prompt file {path} is not UTF-8 text ({e.reason} at byte {e.start})") from None
    if not text:
        raise TaskError(f"prompt file {path} is empty")
    return text + "\n"


def task_spec(opts: Options, repo: Repo, plan: Plan, task_id: str, packages: list[str], prompt: str) -> dict:
    base_commit, head_commit = repo.commit(plan.base), repo.commit(plan.head)
    title = (
        f"{project_name(repo, opts)}: {plan.commits[0].subject}"
        if opts.commit
        else f"{project_name(repo, opts)}: {opts.range} ({len(plan.commits)} commits)"
    )
    return {
        "id": task_id,
        "title": title[:120],
        "prompt": prompt,
        "language": "python",
        "test_command": "python -m pytest -q",
        "long": False,
        "project": project_name(repo, opts),
        "limits": {"scoring_timeout_s": float(opts.timeout_s)},
        "tags": ["git-history", "commit" if opts.commit else "range"],
        "acceptance_layout": "repo",
        "packages": packages,
        "own_tests_deselect": sorted(plan.deselect),
        "source": {
            "kind": "git",
            "repo_url": public_url(opts.repo_url) or repo.remote_url(),  # (credentials cut)
            "base": plan.base,
            "head": plan.head,
            "commits": [c.sha for c in plan.commits],
            "base_date": base_commit.date,
            "head_date": head_commit.date,
            "licence": repo.licence(plan.base),
            "command": public_text(opts.command),
        },
    }


def generated_prompt(plan: Plan, trees: dict[str, Path], result: ImportResult) -> str:
    """The commit message(s) and the interface the hidden tests call (see :mod:`.prompt`)."""
    sources = {}
    for change in plan.solution:
        if change.path.endswith(".py") and change.status != "D":
            sources[change.path] = (
                _text(trees["base"] / change.path),
                _text(trees["head"] / change.path) or "",
            )
    tests = [plan.nodes[k] for k in result.hidden]
    return build_prompt(plan.commits, interface(changed_names(sources), tests))


def _text(path: Path) -> str | None:
    return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None
