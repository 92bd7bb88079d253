"""Prompt lab: run one strategy twice on one task -- its prompt file as is, then one role's prompt
replaced (the text given, or read from a file) -- and put the two runs side by side: the table of
``kit compare`` (:mod:`kit.analysis.compare`), the metrics, the prompt diff and a diff of the transcripts.

Each of the two is its own experiment (its own folder under the lab's results root), so ``kit report``
on that root shows them as two rows, never one. They are named by what changed:
``lab-<strategy>-<role>-baseline`` and ``lab-<strategy>-<role>-<label>`` (the label given, else the
first words of the new prompt); a folder of that name made under other settings (another prompt, task,
profile or limits) is never reused: the next free ``-2``, ``-3`` ... is taken.

The lab reaches the models the way an experiment did when given one (``like``: its folder): the profile
it ran on, the base URL its tiers were sent to (``--api-base``: a fake or local server, a proxy) and its
sandbox (:func:`recorded_setup`); values given explicitly win. A lab run that ends in ``error`` raises
(the run and its error named), and an errored run never holds a lab folder's name: the next lab with the
same settings redoes it in place.

Every lab run has a budget (:data:`LAB_BUDGET`: model calls and dollars per run) unless ``limits`` sets
its own (``max_usd: None`` lifts it). The transcript diff leaves out what differs between any two runs
(timestamps, durations, call ids, temporary paths): what is left is what the prompt changed.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from kit import analysis
from kit.analysis import compare
from kit.config import Experiment, Limits
from kit.errors import ConfigError, KitError
from kit.paths import PROMPTS_DIR, REPO_ROOT
from kit.records.schema import RUN, TRANSCRIPT, load_run, read_jsonl

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


#: Each lab run's budget unless ``limits`` sets its own: a pdca pair on a real model is hundreds of calls.
LAB_BUDGET = {"max_model_calls": 40, "max_usd": 0.5}


@dataclass
class LabResult:
    """The two experiment folders, their metrics side by side and the diff of their transcripts."""

    baseline_dir: Path
    modified_dir: Path
    metrics: pd.DataFrame
    transcript_diff: str
    comparison: pd.DataFrame  # kit compare's table: A = baseline, B = modified
    prompt_diff: str
    prompt_path: Path | None = None  # the file the new prompt was read from, when one was
    budget: dict[str, Any] | None = None  # each run's budget (max_model_calls, max_usd, max_tokens)
    setup: dict[str, Any] | None = None  # how the runs reached their models: profile, api_base, sandbox


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


def resolve_prompt_file(prompt_file: str | Path) -> Path:
    """``prompt_file`` as given when absolute; a relative one from the working folder (the lab's
    notebook folder in JupyterLab) when it is there, else from the repository root."""
    path = Path(prompt_file).expanduser()
    if path.is_absolute() or path.exists():
        return path.resolve()
    return REPO_ROOT / path


def override_text(prompt_override: str | None, prompt_file: str | Path | None = None) -> str:
    """The replacement prompt: the text of ``prompt_file`` when given (:func:`resolve_prompt_file`),
    else ``prompt_override``; kept word for word."""
    if prompt_file is None or str(prompt_file) == "":
        return prompt_override or ""
    path = resolve_prompt_file(prompt_file)
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(
            f"prompt_file {path}: cannot read it ({e.__class__.__name__})",
            "give a readable UTF-8 text file, or prompt_file=None and the text in prompt_override",
        ) from None


def label_of(text: str, words: int = 5) -> str:
    """A folder-name label from the first words of a prompt: ``You are a careful engineer.`` ->
    ``you-are-a-careful-engineer``."""
    found = re.findall(r"[A-Za-z0-9]+", text.lower())[:words]
    return "-".join(found)[:40].strip("-") or "modified"


def lab_budget(limits: Limits | Mapping[str, Any] | None) -> Limits:
    """``limits`` with :data:`LAB_BUDGET` filled in where it names no call or dollar cap."""
    given = limits.model_dump(exclude_unset=True) if isinstance(limits, Limits) else dict(limits or {})
    return Limits.model_validate({**LAB_BUDGET, **given})


def recorded_setup(results_dir: str | Path) -> dict[str, Any]:
    """How the experiment in ``results_dir`` reached its models: ``profile`` (its experiment.yaml),
    ``api_base`` (the one base URL its runs' tiers were sent to, when they share one), ``sandbox`` and
    ``sandbox_image`` (its runs', else its experiment.yaml's). Only what was recorded."""
    import yaml

    folder = analysis.repo_path(results_dir)
    try:
        spec = yaml.safe_load((folder / "experiment.yaml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        spec = None
    spec = spec if isinstance(spec, dict) else {}
    out = {
        k: spec[k]
        for k in ("profile", "sandbox", "sandbox_image")
        if isinstance(spec.get(k), str) and spec[k]
    }
    bases: set[str] = set()
    for run_json in sorted(folder.glob(f"runs/*/{RUN}")):
        record = load_run(run_json.parent)
        if record is None:
            continue
        bases |= {str(t.get("api_base") or "") for t in (record.profile_spec.get("tiers") or {}).values()}
        out.update(
            {k: v for k, v in (("sandbox", record.sandbox), ("sandbox_image", record.sandbox_image)) if v}
        )
    if len(bases) == 1 and "" not in bases:
        out["api_base"] = bases.pop()
    return out


def lab_experiments(
    strategy: str,
    role: str,
    prompt_override: str,
    task: str,
    profile: str = "local",
    limits: Limits | Mapping[str, Any] | None = None,
    label: str | None = None,
    sandbox: Mapping[str, Any] | None = None,
) -> tuple[Experiment, Experiment]:
    """The baseline and the modified experiment (same task, strategy, profile, limits and ``sandbox``:
    ``sandbox`` / ``sandbox_image``), named by what changed: ``lab-<strategy>-<role>-baseline`` and
    ``lab-<strategy>-<role>-<label>``."""
    if not prompt_override.strip():
        raise ConfigError("prompt_override is empty", "give the text that replaces the role's prompt file")
    prompt_file(strategy, role)  # the role must exist
    lim = lab_budget(limits)
    common = dict(
        tasks=[task], strategies=[strategy], profile=profile, repeats=1, limits=lim, **(sandbox or {})
    )
    tag = re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-.") if label else label_of(prompt_override)
    base = Experiment(name=f"lab-{strategy}-{role}-baseline", **common)
    modified = Experiment(
        name=f"lab-{strategy}-{role}-{tag or 'modified'}",
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


#: What differs between any two runs of the same prompt -> what the diff shows instead (in this order).
VOLATILE = (
    (re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"), "<time>"),
    (re.compile(r"\b\d{1,2}:\d{2}:\d{2}(?:\.\d+)?\b"), "<time>"),
    (re.compile(r"\b\d+(?:\.\d+)?\s?(?:ms|s|sec|secs|seconds)\b"), "<duration>"),
    (re.compile(r"\b(?:call|toolu|chatcmpl|msg|req|run)_[A-Za-z0-9_-]{6,}\b"), "<id>"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<id>"),
    (re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,64}\b"), "<hash>"),
    (re.compile(r"\S*/runs/[^/\s]+/repo\b"), "<clone>"),
    (re.compile(r"/tmp/[^\s'\"]+"), "<tmp>"),
)


def stable(line: str) -> str:
    """``line`` with the volatile parts (:data:`VOLATILE`) replaced by placeholders."""
    for pattern, placeholder in VOLATILE:
        line = pattern.sub(placeholder, line)
    return line


def render_transcript(run_dir: Path, volatile: bool = False) -> list[str]:
    """A run's transcript as readable lines: a header per message, its text, its tool calls (name and
    arguments); without ``volatile``, timestamps, durations, ids and temporary paths are placeholders."""
    lines = []
    for entry in sorted(read_jsonl(Path(run_dir) / TRANSCRIPT), key=lambda e: e.get("seq", 0)):
        msg = entry.get("message") or {}
        lines.append(f"## [{entry.get('conversation', '')}] {entry.get('role', '')} / {msg.get('role', '?')}")
        lines += _content_lines(msg.get("content"))
        for call in msg.get("tool_calls") or []:
            fn = call.get("function", call) if isinstance(call, dict) else {}
            lines.append(f"-> {fn.get('name', '?')}({fn.get('arguments', '')})")
    return lines if volatile else [stable(line) for line in lines]


def transcript_diff(baseline_dir: Path, modified_dir: Path) -> str:
    """Unified diff of the first run's transcript of each experiment folder, over its messages and tool
    calls, the volatile parts left out (:func:`stable`)."""
    texts, names = [], []
    for folder in (baseline_dir, modified_dir):
        runs = analysis.load(folder).runs.sort_values(["repeat", "run_id"])
        if runs.empty:
            raise KitError(f"no complete run in {folder}")
        texts.append(render_transcript(Path(runs["run_dir"].iloc[0])))
        names.append(f"{Path(folder).name}/{runs['run_id'].iloc[0]}")
    diff = list(difflib.unified_diff(texts[0], texts[1], fromfile=names[0], tofile=names[1], lineterm=""))
    note = (
        "(timestamps, durations, ids and temporary paths left out: <time>, <duration>, <id>, <hash>, <tmp>)"
    )
    return "\n".join([note, *diff]) if diff else f"(the two transcripts are the same) {note}"


def _only_errors(folder: Path) -> bool:
    """Every run the folder holds ended in ``error`` (or it holds none)."""
    records = [load_run(p.parent) for p in folder.glob(f"runs/*/{RUN}")]
    return all(r is None or r.outcome == "error" for r in records)


def _run(experiment: Experiment, root: Path | None, progress: bool, api_base: str | None = None) -> Path:
    """Run ``experiment`` (errored runs of its folder redone); when its folder holds runs made under
    other settings (another prompt, task, profile or limits), under the next free name ``<name>-2``,
    ``-3`` ... instead -- unless every run there errored: an errored run holds no name, it is redone."""
    from kit.run.results import prepare_results
    from kit.run.resume import SettingsChanged
    from kit.run.runner import run_experiment  # the lab sits above the runner; imported on use

    for n in range(1, 100):
        named = experiment if n == 1 else experiment.model_copy(update={"name": f"{experiment.name}-{n}"})
        common = dict(results_dir=root, progress=progress, retry_errors=True, api_base=api_base)
        try:
            return run_experiment(named, **common)
        except SettingsChanged:
            if not _only_errors(prepare_results(root, named.name)):
                continue
        try:
            return run_experiment(named, redo_changed=True, **common)
        except SettingsChanged:  # errored runs outside the matrix (another task): cannot be redone
            continue
    raise KitError(
        f"99 lab folders named {experiment.name}-N already hold other settings", "clean up results/lab"
    )


def check_no_errors(*folders: Path) -> None:
    """Raise when a lab run ended in ``error``: the run and its error, and what to do."""
    failed = [
        f"{folder.name}/{record.run_id}: {record.error or 'no message recorded'}"
        for folder in folders
        for p in sorted(folder.glob(f"runs/*/{RUN}"))
        if (record := load_run(p.parent)) is not None and record.outcome == "error"
    ]
    if failed:
        raise KitError(
            f"{len(failed)} lab run(s) ended in error: " + "; ".join(failed),
            "fix what the error names (the profile, --api-base, the server) and run the lab again: "
            "errored runs are redone under the same names",
        )


def prompt_lab(
    strategy: str,
    role: str,
    prompt_override: str,
    task: str,
    profile: str | None = None,
    results_dir: str | Path | None = None,
    limits: Limits | Mapping[str, Any] | None = None,
    progress: bool = True,
    prompt_file: str | Path | None = None,
    label: str | None = None,
    like: str | Path | None = None,
    api_base: str | None = None,
    sandbox: str | None = None,
) -> LabResult:
    """Run the baseline and the modified experiment (``results_dir`` is the results root they go
    under; None = the runner's default) and compare them. ``like``: an experiment folder whose profile,
    api base and sandbox the lab uses (:func:`recorded_setup`); ``profile``, ``api_base`` and
    ``sandbox`` given win (profile default: ``local``). With ``prompt_file`` the replacement text is
    that file's (:func:`override_text`); ``label`` names the modified run's folder (default: the new
    prompt's first words); ``limits`` over :data:`LAB_BUDGET`. Raises when a lab run errored."""
    text = override_text(prompt_override, prompt_file)
    setup = recorded_setup(like) if like else {}
    given = {"profile": profile, "api_base": api_base, "sandbox": sandbox}
    setup.update({k: v for k, v in given.items() if v})
    if sandbox:
        setup.pop("sandbox_image", None)  # the recorded image belongs to the recorded sandbox
    boxes = {k: setup[k] for k in ("sandbox", "sandbox_image") if setup.get(k)}
    base, modified = lab_experiments(
        strategy, role, text, task, setup.get("profile") or "local", limits, label, boxes
    )
    root = analysis.repo_path(results_dir) if results_dir is not None else None
    base_dir = _run(base, root, progress, setup.get("api_base"))
    modified_dir = _run(modified, root, progress, setup.get("api_base"))
    check_no_errors(base_dir, modified_dir)
    lim = base.limits
    return LabResult(
        baseline_dir=base_dir,
        modified_dir=modified_dir,
        metrics=side_by_side(base_dir, modified_dir),
        transcript_diff=transcript_diff(base_dir, modified_dir),
        comparison=compare.format_compare(
            compare.compare_table(analysis.load(base_dir), analysis.load(modified_dir))
        ),
        prompt_diff=compare.prompt_diff(base_dir, modified_dir),
        prompt_path=resolve_prompt_file(prompt_file) if prompt_file else None,
        budget={k: getattr(lim, k) for k in ("max_model_calls", "max_usd", "max_tokens")},
        setup=setup,
    )
