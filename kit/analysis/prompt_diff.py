"""The diff of the prompts two results folders used (``kit compare``, the prompt lab).

A run that kept its prompt texts (``runs/<id>/prompts/<strategy>/<role>.md``) is diffed from those;
otherwise from the results folder's ``experiment.yaml`` ``prompt_overrides``, where a role without an
override is shown as its ``kit/prompts/`` file as it is *now* (said in the diff's header).
"""

from __future__ import annotations

import difflib
from pathlib import Path

import yaml

from kit.paths import PROMPTS_DIR


def run_prompts(folder: Path) -> dict[str, str] | None:
    """``<strategy>/<role>`` -> text from the runs' kept prompts (``runs/*/prompts/``), or None when
    no run kept them. The first run that has a prompt gives it (one experiment has one setting)."""
    found: dict[str, str] = {}
    for file in sorted(folder.glob("runs/*/prompts/**/*")):
        if file.is_file():
            key = "/".join(file.relative_to(folder).parts[3:]).removesuffix(".md")
            found.setdefault(key, file.read_text(encoding="utf-8", errors="replace"))
    return found or None


def _overrides(folder: Path) -> dict[str, str]:
    try:
        spec = yaml.safe_load((folder / "experiment.yaml").read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return {}
    overrides = spec.get("prompt_overrides") if isinstance(spec, dict) else None
    return {str(k): str(v) for k, v in (overrides or {}).items()}


def _file_text(key: str) -> str:
    path = PROMPTS_DIR / f"{key}.md"
    return path.read_text(encoding="utf-8") if path.is_file() else ""


def _strategy_of(key: str) -> str:
    return key.split("/")[0]


def prompt_diff(a: Path, b: Path, strategies: set[str] | None = None) -> str:
    """Unified diff of the prompts A and B used, one block per prompt that differs; the first line
    says where the texts came from. With ``strategies``, only their prompts (and the agent loop's own
    messages, ``agent/*``, which every strategy uses) are diffed: a strategy one side did not run has
    no prompts there to compare."""
    kept = [run_prompts(a), run_prompts(b)]
    if kept[0] is not None and kept[1] is not None:
        source, texts = "prompts kept by the runs (runs/<id>/prompts/)", kept
    else:
        source = (
            "prompt_overrides of each experiment.yaml; a prompt without an override is its "
            "kit/prompts/ file as it is now (these runs did not keep their prompts)"
        )
        over = [_overrides(a), _overrides(b)]
        keys = set(over[0]) | set(over[1])
        texts = [{k: o.get(k, _file_text(k)) for k in keys} for o in over]
    keys = sorted(set(texts[0]) | set(texts[1]))
    if strategies is not None:
        keys = [k for k in keys if _strategy_of(k) in strategies or _strategy_of(k) == "agent"]
    blocks = []
    for key in keys:
        x, y = texts[0].get(key, ""), texts[1].get(key, "")
        if x != y:
            blocks += difflib.unified_diff(
                x.splitlines(), y.splitlines(), fromfile=f"A {key}", tofile=f"B {key}", lineterm=""
            )
    body = "\n".join(blocks) if blocks else "(the prompts are the same)"
    if strategies is not None and not strategies:  # nothing both ran: "the same" would claim a comparison
        body = "(no strategy both sides ran: no prompts to compare)"
    scope = (
        f"; strategies both ran: {', '.join(sorted(strategies)) or 'none'}" if strategies is not None else ""
    )
    return f"Prompt diff (from {source}{scope})\n{body}"
