"""Prompt lab: run one strategy twice on one task -- its prompt file as is, then one role's prompt
replaced (the text given, or read from a file) -- and put the two runs side by side: the table of
``kit compare`` (:mod:`kit.analysis.compare`), the metrics, the prompt diff and a diff of the transcripts.

Each of the two is its own experiment (its own folder under the lab's results root), so ``kit report``
on that root shows them as two rows, never one.

Experiment names carry a short hash of everything that defines the run (task, profile, limits, prompt
text), so the runner's resume never reuses a run made with another prompt.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from kit import analysis
from kit.analysis import compare
from kit.config import Experiment, Limits
from kit.errors import ConfigError, KitError
from kit.paths import PROMPTS_DIR
from kit.records.schema import TRANSCRIPT, read_jsonl

METRICS = (
    "outcome",
    "claimed_done",
    "defects_total",
    "defects_critical",
    "defects_major",
    "defects_minor",
    "claimed_done_but_failed",
    "tests_added",
    "files_touched",
    "lines_added",
    "lines_removed",
    "wall_s",
    "model_s",
    "tool_s",
    "calls",
    "input_uncached",
    "cache_read",
    "cache_write",
    "output",
    "cost_usd",
)


@dataclass
class LabResult:
    """The two experiment folders, their metrics side by side and the diff of their transcripts."""

    baseline_dir: Path
    modified_dir: Path
    metrics: pd.DataFrame
    transcript_diff: str
    comparison: pd.DataFrame  # kit compare's table: A = baseline, B = modified
    prompt_diff: str


def prompt_file(strategy: str, role: str) -> Path:
    """``kit/prompts/<strategy>/<role>.md``; a ConfigError lists what exists when it does not."""
    path = PROMPTS_DIR / strategy / f"{role}.md"
    if path.is_file():
        return path
    folder = PROMPTS_DIR / strategy
    if not folder.is_dir():
        known = sorted(p.name for p in PROMPTS_DIR.iterdir() if p.is_dir()) if PROMPTS_DIR.is_dir() else []
        raise ConfigError(f"no prompts for strategy {strategy!r}", f"pick one of: {', '.join(known)}")
    roles = sorted(p.stem for p in folder.glob("*.md"))
    raise ConfigError(f"strategy {strategy!r} has no role {role!r}", f"pick one of: {', '.join(roles)}")


def override_text(prompt_override: str | None, prompt_file: str | Path | None = None) -> str:
    """The replacement prompt: the text of ``prompt_file`` when given (a path, relative to the
    repository root unless absolute), else ``prompt_override``; kept word for word."""
    if prompt_file is None or str(prompt_file) == "":
        return prompt_override or ""
    path = analysis.repo_path(Path(prompt_file).expanduser())
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(
            f"prompt_file {path}: cannot read it ({e.__class__.__name__})",
            "give a readable UTF-8 text file, or prompt_file=None and the text in prompt_override",
        ) from None


def _digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:8]


def lab_experiments(
    strategy: str,
    role: str,
    prompt_override: str,
    task: str,
    profile: str = "local",
    limits: Limits | Mapping[str, Any] | None = None,
) -> tuple[Experiment, Experiment]:
    """The baseline and the modified experiment (same task, strategy, profile and limits)."""
    if not prompt_override.strip():
        raise ConfigError("prompt_override is empty", "give the text that replaces the role's prompt file")
    baseline_text = prompt_file(strategy, role).read_text(encoding="utf-8")
    lim = limits if isinstance(limits, Limits) else Limits.model_validate(dict(limits or {}))
    common = dict(tasks=[task], strategies=[strategy], profile=profile, repeats=1, limits=lim)
    setup = (task, profile, lim.model_dump())
    base = Experiment(name=f"lab-{strategy}-{role}-baseline-{_digest(setup, baseline_text)}", **common)
    modified = Experiment(
        name=f"lab-{strategy}-{role}-modified-{_digest(setup, prompt_override)}",
        prompt_overrides={f"{strategy}/{role}": prompt_override},
        **common,
    )
    return base, modified


def side_by_side(baseline_dir: Path, modified_dir: Path) -> pd.DataFrame:
    """One row per metric, columns baseline / modified / change (means when there are several runs)."""
    cols = {}
    for label, folder in (("baseline", baseline_dir), ("modified", modified_dir)):
        runs = analysis.load(folder).runs
        if runs.empty:
            raise KitError(f"no complete run in {folder}", "look at the runner's output for the error")
        cols[label] = {
            m: (
                ", ".join(sorted(set(map(str, runs[m]))))
                if runs[m].dtype.kind not in "biuf"
                else runs[m].mean()
            )
            for m in METRICS
        }
    table = pd.DataFrame(cols, index=pd.Index(METRICS, name="metric"), dtype=object)
    table["change"] = [
        m - b if isinstance(b, int | float) and isinstance(m, int | float) else ""
        for b, m in zip(table["baseline"], table["modified"], strict=True)
    ]
    return table


def _content_lines(content: Any) -> list[str]:
    if content is None:
        return []
    if isinstance(content, str):
        return content.splitlines()
    if isinstance(content, list):
        lines = []
        for part in content:
            text = part.get("text") if isinstance(part, dict) else None
            lines += text.splitlines() if isinstance(text, str) else [json.dumps(part, default=str)]
        return lines
    return [json.dumps(content, default=str)]


def render_transcript(run_dir: Path) -> list[str]:
    """A run's transcript as readable lines: a header per message, its text, its tool calls."""
    lines = []
    for entry in sorted(read_jsonl(Path(run_dir) / TRANSCRIPT), key=lambda e: e.get("seq", 0)):
        msg = entry.get("message") or {}
        lines.append(f"## [{entry.get('conversation', '')}] {entry.get('role', '')} / {msg.get('role', '?')}")
        lines += _content_lines(msg.get("content"))
        for call in msg.get("tool_calls") or []:
            fn = call.get("function", call) if isinstance(call, dict) else {}
            lines.append(f"-> {fn.get('name', '?')}({fn.get('arguments', '')})")
    return lines


def transcript_diff(baseline_dir: Path, modified_dir: Path) -> str:
    """Unified diff of the first run's transcript of each experiment folder."""
    texts, names = [], []
    for folder in (baseline_dir, modified_dir):
        runs = analysis.load(folder).runs.sort_values(["repeat", "run_id"])
        if runs.empty:
            raise KitError(f"no complete run in {folder}")
        texts.append(render_transcript(Path(runs["run_dir"].iloc[0])))
        names.append(f"{Path(folder).name}/{runs['run_id'].iloc[0]}")
    diff = list(difflib.unified_diff(texts[0], texts[1], fromfile=names[0], tofile=names[1], lineterm=""))
    return "\n".join(diff) if diff else "(the two transcripts are identical)"


def prompt_lab(
    strategy: str,
    role: str,
    prompt_override: str,
    task: str,
    profile: str = "local",
    results_dir: str | Path | None = None,
    limits: Limits | Mapping[str, Any] | None = None,
    progress: bool = True,
    prompt_file: str | Path | None = None,
) -> LabResult:
    """Run the baseline and the modified experiment (``results_dir`` is the results root they go
    under; None = the runner's default) and compare them. With ``prompt_file`` the replacement text
    is that file's (:func:`override_text`)."""
    from kit.run.runner import run_experiment  # the lab sits above the runner; imported on use

    text = override_text(prompt_override, prompt_file)
    base, modified = lab_experiments(strategy, role, text, task, profile, limits)
    root = analysis.repo_path(results_dir) if results_dir is not None else None
    base_dir = run_experiment(base, results_dir=root, progress=progress)
    modified_dir = run_experiment(modified, results_dir=root, progress=progress)
    return LabResult(
        baseline_dir=base_dir,
        modified_dir=modified_dir,
        metrics=side_by_side(base_dir, modified_dir),
        transcript_diff=transcript_diff(base_dir, modified_dir),
        comparison=compare.format_compare(
            compare.compare_table(analysis.load(base_dir), analysis.load(modified_dir))
        ),
        prompt_diff=compare.prompt_diff(base_dir, modified_dir),
    )
