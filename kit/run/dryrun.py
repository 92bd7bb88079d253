"""``kit run --dry-run``: what a run of the experiment would do, and nothing done -- no folder, no lock,
no copy written. It prints the matrix, the budget of one run, the most the runs to do can spend (from
the price sheet and the budget, :func:`spend_bound`) and what resume would keep, redo or run
(:mod:`kit.run.resume`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kit import strategies
from kit.config import Experiment, PriceSheet, Profile
from kit.paths import results_root
from kit.run.resume import describe, resume_plan
from kit.run.runner import load_settings
from kit.tasks.validate import collection_checked
from kit.usage import PER_MILLION


def _call_cost(profile: Profile, sheet: PriceSheet, tier: str) -> float:
    """The most one call on ``tier`` can cost: a full context window at the dearer of the input and
    cache-write prices, plus the whole output cap."""
    spec = profile.tiers[tier]
    p = sheet.get(spec.price_key)
    return (
        spec.context_window * max(p.input, p.cache_write) + spec.max_output_tokens * p.output
    ) / PER_MILLION


def spend_bound(experiment: Experiment, profile: Profile, sheet: PriceSheet) -> tuple[float | None, str]:
    """The most one run can spend (USD), and how that bound was found; None without any budget.

    Over the tiers the experiment's strategies use: a call costs at most a full context window at the
    dearest input rate plus the output cap (``call``). The budget is checked before each call, so a
    run ends at most one call past it: ``max_usd + call``; ``max_tokens`` at the dearest rate per
    token ``+ call``; ``max_model_calls x call``. The smallest of the bounds that apply. Agents
    running in parallel (workflow) may each have one call in flight when the budget runs out."""
    used = {
        t
        for s in experiment.strategies
        for t in strategies.role_tiers(s, experiment.tiers.get(s), profile).values()
    }
    call = max(_call_cost(profile, sheet, t) for t in used)
    rate = max(
        max(p.input, p.output, p.cache_read, p.cache_write) / PER_MILLION
        for p in (sheet.get(profile.tiers[t].price_key) for t in used)
    )
    lim, bounds = experiment.limits, []
    if lim.max_usd is not None:
        bounds.append((lim.max_usd + call, f"max_usd ${lim.max_usd:g} + one call past it (${call:.4g})"))
    if lim.max_tokens is not None:
        bounds.append(
            (
                lim.max_tokens * rate + call,
                f"max_tokens {lim.max_tokens} at ${rate * PER_MILLION:g}/1M + one call",
            )
        )
    if lim.max_model_calls is not None:
        bounds.append(
            (
                lim.max_model_calls * call,
                f"max_model_calls {lim.max_model_calls} x ${call:.4g} per call at most",
            )
        )
    if not bounds:
        return None, "no bound: the experiment sets no max_usd, max_tokens or max_model_calls"
    return min(bounds)


def _budget_line(experiment: Experiment) -> str:
    lim = experiment.limits
    fields = ["max_model_calls", "max_usd", "max_tokens", "max_steps", "command_timeout_s"]
    shown = ", ".join(f"{f} {getattr(lim, f) if getattr(lim, f) is not None else 'none'}" for f in fields)
    return f"budget per run: {shown} (all roles together; max_steps per agent)"


def dry_run(
    experiment: Experiment | str | Path,
    *,
    results_dir: Path | None = None,
    overrides: dict[str, Any] | None = None,
    api_base: str | None = None,
    retry_errors: bool = False,
    redo_changed: bool = False,
) -> str:
    """What ``kit run`` with the same arguments would do, as text; writes nothing."""
    loaded = load_settings(experiment, overrides, api_base, collect=False)
    experiment, profile, sheet, specs = loaded.experiment, loaded.profile, loaded.sheet, loaded.specs
    out = Path(results_dir or results_root()).expanduser().resolve() / experiment.name
    resume = resume_plan(out, specs, loaded.full, profile, sheet, retry_errors)
    n_tasks = len(specs) // max(1, len(experiment.strategies) * experiment.repeats)
    lines = [
        f"experiment {experiment.name} (dry run: nothing is written)",
        f"matrix: {n_tasks} task(s) x {len(experiment.strategies)} strategies x {experiment.repeats} "
        f"repeat(s) = {len(specs)} runs, profile {profile.name}, sandbox {experiment.sandbox}",
        f"  tasks: {', '.join(dict.fromkeys(s.task.id for s in specs))}",
        f"  strategies: {', '.join(experiment.strategies)}",
        _budget_line(experiment),
    ]
    todo = len(resume.todo) + (len(resume.changed) if redo_changed else 0)
    per_run, how = spend_bound(experiment, profile, sheet)
    prices = f" ({'illustrative ' if sheet.illustrative else ''}price sheet {sheet.name})"
    if per_run is None:
        lines.append(f"most it can spend: unbounded -- {how}; set limits.max_usd to cap it")
    else:
        lines.append(
            f"most it can spend: ${per_run * todo:.2f} for the {todo} run(s) to do, ${per_run:.2f} per run"
            f"{prices}: {how}"
        )
    where = "exists" if out.is_dir() else "new"
    redo = len(resume.changed) if redo_changed else 0
    lines.append(
        f"results: {out} ({where}): keep {len(resume.kept)}, redo {redo} changed, run {len(resume.todo)}"
    )
    unchecked = sorted({s.task.id for s in specs if not collection_checked(s.task)})
    if unchecked:
        lines.append(
            f"hidden tests not yet checked for {', '.join(unchecked)}: kit run collects them (with the "
            "reference solution) before the first run and refuses a task whose tests do not collect"
        )
    if resume.changed or resume.outside:
        lines.append("changed settings:")
        lines += describe(resume)
        if resume.outside or not redo_changed:
            lines.append(
                "kit run would refuse (exit 2): "
                + (
                    "runs outside the matrix changed; use a fresh experiment name"
                    if resume.outside
                    else "add --redo-changed to redo those runs, or use a fresh experiment name"
                )
            )
    return "\n".join(lines)
