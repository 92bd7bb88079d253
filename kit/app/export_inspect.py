"""``python -m kit export inspect RESULTS [--out DIR]``: an experiment's records as Inspect AI eval logs.

One ``.eval`` log per (experiment, strategy, profile) -- per strategy for an experiment run under one
profile -- so ``inspect view --log-dir RESULTS/inspect`` shows the kit's runs in Inspect's viewer:

* the strategy is the task and the solver; ``task_args`` carry strategy and profile; the experiment is
  the ``eval_set_id``; the kit's git commit is the revision; each role's model comes from the run's
  role -> tier map (``model_roles``);
* samples are tasks and epochs are repeats (:mod:`kit.app.inspect_sample` builds each sample);
* ``results`` hold the mean of each score over the scored runs, ``solved`` first, computed here (runs
  ending ``error`` or ``interrupted`` are left out and counted as unscored, as in the kit's report),
  and a standard error only when every run is the same task (no error bar pooled across tasks);
* the viewer is told to trust nothing in the log (``ViewerConfig(trust_content=False)``: agent text shows
  as text) and to lead the sample list with ``solved`` (:func:`viewer_config`);
  the log's status is ``error`` when a run errored or was interrupted, else ``success``;
* ``stats`` hold the usage by model and by role, summed over every line of calls.jsonl.

Reads only records (run.json, calls.jsonl, events.jsonl, transcript.jsonl) and writes only through
inspect_ai's API (``write_eval_log``): its file format is versioned but not frozen. inspect_ai is
imported inside the command (it takes seconds): ``python -m kit`` stays fast without it.
"""

from __future__ import annotations

import argparse
import hashlib
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kit.app.inspect_results import eval_results, viewer_config
from kit.app.inspect_sample import RunFiles, eval_sample, usage_by
from kit.errors import KitError
from kit.records.schema import load_run

INSTALL_HINT = "install it with: pip install -e '.[inspect]'"


@dataclass
class Exported:
    """What an export wrote: one log file per (experiment, strategy, profile), and what it skipped."""

    out: Path
    logs: list[Path] = field(default_factory=list)
    runs: int = 0
    incomplete: list[Path] = field(default_factory=list)


def require_inspect() -> None:
    """Import inspect_ai, or stop with the command that installs it."""
    try:
        import inspect_ai.log  # noqa: F401
    except ImportError as e:
        raise KitError(
            f"`kit export inspect` needs inspect-ai, which is not installed ({e})", INSTALL_HINT
        ) from e


def experiment_dirs(results: Path) -> list[Path]:
    """``results`` itself when it is an experiment folder (has ``runs/``), else every ``*/runs`` under it."""
    if (results / "runs").is_dir():
        return [results]
    return sorted(p.parent for p in results.glob("*/runs") if p.is_dir())


def read_runs(results: Path) -> tuple[list[tuple[Path, RunFiles]], list[Path]]:
    """The finished runs (run folder, records) under ``results``, and the folders without a run.json."""
    if not results.is_dir():
        raise KitError(
            f"{results} is not a folder", "give an experiment's results folder, e.g. results/default"
        )
    exps = experiment_dirs(results)
    if not exps:
        raise KitError(
            f"{results} holds no runs/ folder", "give an experiment's results folder, e.g. results/default"
        )
    done, incomplete = [], []
    for exp in exps:
        for run_dir in sorted(p for p in (exp / "runs").iterdir() if p.is_dir()):
            run = load_run(run_dir)
            if run is None:
                incomplete.append(run_dir)
            else:
                done.append((run_dir, RunFiles.read(run_dir, run)))
    if not done:
        raise KitError(
            f"no finished run (a run folder with run.json) under {results}", "run the experiment first"
        )
    return done, incomplete


def _short_id(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:22]


def _clean(component: str) -> str:
    """A file-name component the viewer parses back (it splits names on ``_``)."""
    for ch in "_/:+ ":
        component = component.replace(ch, "-")
    return component


def _epochs(group: list[RunFiles], where: str) -> dict[int, int]:
    """Repeat -> epoch (1, 2 ...); stops when two runs share a (task, repeat)."""
    seen = Counter((f.run.task, f.run.repeat) for f in group)
    twice = sorted(k for k, n in seen.items() if n > 1)
    if twice:
        raise KitError(
            f"{where}: more than one run for (task, repeat) {twice}: Inspect needs unique (sample, epoch)",
            "export one experiment folder at a time",
        )
    return {rep: i + 1 for i, rep in enumerate(sorted({f.run.repeat for f in group}))}


def _spec_metadata(group: list[RunFiles], incomplete: list[str]) -> dict[str, Any]:
    first = group[0].run
    models = sorted({c.model for f in group for c in f.calls})
    note = ""
    if any(m.startswith("simulated/") for m in models):
        note = "simulated records (kit.analysis.simulate): planted effects to test the analysis, never a benchmark"
    elif models and all(m.startswith("scripted/") for m in models):
        note = "scripted model: pipeline validation only, never a benchmark result"
    elif any(m.startswith("embedded/") for m in models):
        note = "embedded model (SmolLM2-135M): real but tiny; its numbers are not a benchmark of strategies"
    return {
        "experiment": first.experiment,
        "profile": first.profile,
        "role_tiers": first.role_tiers,
        "budget": first.budget,
        "options": first.options,
        "price_sheet": first.price_sheet.get("name", ""),
        "illustrative_prices": bool(first.price_sheet.get("illustrative", False)),
        "kit_commits": sorted({f.run.kit_commit for f in group}),
        "outcomes": dict(Counter(f.run.outcome for f in group)),
        "incomplete_runs": incomplete,
        "models": models,
        **({"note": note} if note else {}),
    }


def eval_log(group: list[RunFiles], incomplete: list[str]) -> Any:
    """The Inspect ``EvalLog`` of one (experiment, strategy, profile)'s runs."""
    from inspect_ai.log import (
        EvalConfig,
        EvalDataset,
        EvalError,
        EvalLog,
        EvalPlan,
        EvalPlanStep,
        EvalRevision,
        EvalSpec,
        EvalStats,
    )
    from inspect_ai.model import ModelConfig

    first = group[0].run
    key = f"{first.experiment}/{first.strategy}/{first.profile}"
    epoch_of = _epochs(group, key)
    samples = [eval_sample(f, epoch_of[f.run.repeat], _short_id(f"{key}/{f.run.run_id}")) for f in group]
    samples.sort(key=lambda s: (s.epoch, str(s.id)))
    tiers = first.profile_spec.get("tiers") or {}
    roles = {role: (tiers.get(tier) or {}).get("model", tier) for role, tier in first.role_tiers.items()}
    calls = [c for f in group for c in f.calls]
    by_calls = Counter(c.model for c in calls).most_common(1)
    commit = Counter(f.run.kit_commit for f in group).most_common(1)[0][0]
    created = min((f.run.started_at for f in group if f.run.started_at), default="1970-01-01T00:00:00Z")
    spec = EvalSpec(
        eval_set_id=first.experiment,
        run_id=_short_id(first.experiment),
        created=created,
        task=first.strategy,
        task_id=_short_id(key),
        task_args={"strategy": first.strategy, "profile": first.profile},
        solver=first.strategy,
        solver_args=first.options,
        dataset=EvalDataset(
            name=first.experiment,
            samples=len({s.id for s in samples}),
            sample_ids=sorted({str(s.id) for s in samples}),
        ),
        model=by_calls[0][0] if by_calls else next(iter(roles.values()), "none"),
        model_roles={role: ModelConfig(model=model) for role, model in roles.items()},
        config=EvalConfig(epochs=len(epoch_of)),
        revision=EvalRevision(
            type="git", origin="", commit=commit.removesuffix("+dirty"), dirty=commit.endswith("+dirty")
        )
        if commit
        else None,
        tags=["orchbench", first.profile],
        metadata=_spec_metadata(group, incomplete),
        viewer=viewer_config(),
    )
    errored = [s for s in samples if s.error is not None]
    return EvalLog(
        status="error" if errored else "success",
        eval=spec,
        plan=EvalPlan(name=first.strategy, steps=[EvalPlanStep(solver=first.strategy, params=first.options)]),
        results=eval_results(samples),
        stats=EvalStats(
            started_at=created,
            completed_at=max((f.run.finished_at for f in group if f.run.finished_at), default=""),
            model_usage=usage_by(calls, "model"),
            role_usage=usage_by(calls, "role"),
        ),
        error=EvalError(
            message=f"{len(errored)} of {len(samples)} runs ended in error or were interrupted: "
            + "; ".join(f"{s.metadata['run_id']}: {s.error.message}" for s in errored),
            traceback="",
            traceback_ansi="",
        )
        if errored
        else None,
        samples=samples,
    )


def write_log(log: Any, out: Path) -> Path:
    """Write ``log`` as ``<created>_<strategy>_<id>.eval`` (the viewer's naming), replacing an earlier
    export of the same (experiment, strategy, profile); atomically (a temporary name, then a rename)."""
    from inspect_ai.log import write_eval_log

    out.mkdir(parents=True, exist_ok=True)
    task_id = log.eval.task_id
    path = out / f"{_clean(log.eval.created)}_{_clean(log.eval.task)}_{task_id}.eval"
    tmp = out / f".{path.name}.{os.getpid()}.tmp"
    try:
        write_eval_log(log, str(tmp), format="eval")
        for old in out.glob(f"*_{task_id}.eval"):  # an earlier export of this group, under its own time
            old.unlink()
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def export_inspect(results: str | Path, out: str | Path | None = None) -> Exported:
    """Write one Inspect eval log per (experiment, strategy, profile) of ``results`` into ``out``
    (default ``results/inspect``)."""
    require_inspect()
    results = Path(results)
    done, incomplete = read_runs(results)
    target = Path(out) if out is not None else results / "inspect"
    groups: dict[tuple[str, str, str], list[RunFiles]] = {}
    for _, files in done:
        r = files.run
        groups.setdefault((r.experiment, r.strategy, r.profile), []).append(files)
    for (experiment, strategy, profile), group in groups.items():  # every group checked before any write
        _epochs(group, f"{experiment}/{strategy}/{profile}")
    result = Exported(out=target, runs=len(done), incomplete=incomplete)
    for (experiment, strategy, profile), group in sorted(groups.items()):
        mine = [
            p.name
            for p in incomplete
            if p.parent.parent.name == experiment and _names(p.name, strategy, profile)
        ]
        result.logs.append(write_log(eval_log(group, mine), target))
    return result


def _names(run_id: str, strategy: str, profile: str) -> bool:
    """Whether the run folder name ``<task>__<strategy>__<profile>__r<N>`` (older: without the profile)
    names this strategy and profile."""
    parts = run_id.split("__")
    return len(parts) >= 3 and parts[1] == strategy and (len(parts) < 4 or parts[2] == profile)


def _cmd(args: argparse.Namespace) -> int:
    res = export_inspect(args.results, args.out)
    for path in res.logs:
        print(f"wrote {path}")
    if res.incomplete:
        names = ", ".join(p.name for p in res.incomplete)
        print(f"skipped {len(res.incomplete)} incomplete run folder(s) without run.json: {names}")
    print(f"{res.runs} run(s) in {len(res.logs)} log(s); view them with: inspect view --log-dir {res.out}")
    return 0


def add_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="export an experiment's records for another tool")
    esub = p.add_subparsers(dest="export_command", required=True)
    c = esub.add_parser(
        "inspect",
        help="one Inspect AI eval log per strategy (needs: pip install -e '.[inspect]')",
        description="Write one Inspect AI eval log (.eval) per strategy of an experiment's records (samples are "
        "tasks, epochs are repeats), then view them with: inspect view --log-dir RESULTS/inspect",
    )
    c.add_argument("results", help="results/NAME (an experiment folder, or a results root)")
    c.add_argument(
        "--out", type=Path, default=None, help="folder for the .eval files (default RESULTS/inspect)"
    )
    c.set_defaults(func=_cmd)
