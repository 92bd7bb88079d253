"""A synthetic experiment folder written with kit.records.recorder.RunRecorder, with numbers a test can sum by hand.

Experiment ``fixture``: strategies vibe and pdca, two repeats each, on task ``micro-slugify``, under an
illustrative price sheet whose keys are the profile's ``price`` entries. Every call's cost is computed with
:func:`kit.usage.price`, exactly as the gateway does.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

from kit.records.recorder import RunRecorder
from kit.records.schema import CallRecord, RunRecord, Score
from kit.usage import ModelPrice, Usage, price

PRICES = {
    "fx-cheap": ModelPrice(input=1.0, output=2.0, cache_read=0.1, cache_write=1.25),
    "fx-medium": ModelPrice(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75),
    "fx-strong": ModelPrice(input=5.0, output=25.0, cache_read=0.5, cache_write=6.25),
}
PRICE_SHEET = {
    "name": "fixture-prices",
    "illustrative": True,
    "source": "made up for tests",
    "prices": {k: v.model_dump() for k, v in PRICES.items()},
}
PROFILE_SPEC = {
    "name": "scripted",
    "price_sheet": "fixture-prices",
    "tiers": {t: {"model": f"scripted/{t}", "price": f"fx-{t}"} for t in ("cheap", "medium", "strong")},
    "roles": {},
}
TIER_KEY = {t: f"fx-{t}" for t in ("cheap", "medium", "strong")}

# (role, tier, conversation, input_uncached, cache_read, cache_write, output, latency_s) per call.
# ``{r}`` in a number is replaced by the repeat index (0 or 1) times 100, so repeats differ.
CALLS: dict[str, list[tuple[str, str, str, int, int, int, int, float]]] = {
    "vibe": [
        ("coder", "medium", "coder", 1000, 0, 2000, 100, 2.0),
        ("coder", "medium", "coder", 200, 2000, 300, 150, 1.5),
        ("coder", "medium", "coder", 100, 2300, 0, 50, 1.0),
    ],
    "pdca": [
        ("orchestrator", "strong", "orchestrator", 500, 0, 1000, 80, 3.0),
        ("executor", "cheap", "executor", 3000, 0, 0, 400, 1.0),
        ("executor", "cheap", "executor", 1000, 2500, 500, 300, 1.2),
        ("auditor", "medium", "auditor", 800, 0, 0, 60, 2.5),
    ],
}
EXTRA_UNCACHED_PER_REPEAT = 100  # repeat r adds r * 100 uncached tokens to every call
# defects (critical, major, minor) per strategy and repeat; claimed_done is True for every run
DEFECTS = {"vibe": [(1, 0, 2), (0, 1, 1)], "pdca": [(0, 0, 1), (0, 0, 0)]}
WALL_S = {"vibe": [60.0, 80.0], "pdca": [300.0, 340.0]}
START = datetime(2025, 1, 1, tzinfo=UTC)


def iso(t: datetime) -> str:
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def call_usage(strategy: str, repeat: int) -> list[tuple[str, str, Usage]]:
    """The (role, tier, usage with cost) of every call of one run, as the fixture writes them."""
    out = []
    for role, tier, _conv, unc, read, write, output, _lat in CALLS[strategy]:
        u = Usage(
            input_uncached=unc + repeat * EXTRA_UNCACHED_PER_REPEAT,
            cache_read=read,
            cache_write=write,
            output=output,
        )
        out.append((role, tier, u.model_copy(update={"cost_usd": price(u, PRICES[TIER_KEY[tier]])})))
    return out


def write_experiment(
    results: Path,
    name: str = "fixture",
    strategies: tuple[str, ...] = ("vibe", "pdca"),
    repeats: int = 2,
    incomplete: bool = True,
) -> Path:
    """Write the experiment folder ``results/name`` and return it."""
    exp = Path(results) / name
    (exp / "runs").mkdir(parents=True, exist_ok=True)
    (exp / "price_sheet.yaml").write_text(yaml.safe_dump(PRICE_SHEET), encoding="utf-8")
    for s_idx, strategy in enumerate(strategies):
        for repeat in range(repeats):
            run_id = f"micro-slugify__{strategy}__r{repeat}"
            started = START + timedelta(hours=s_idx, minutes=10 * repeat)
            rec = RunRecorder(exp / "runs" / run_id, run_id)
            t = started
            for spec, (_, _, usage) in zip(CALLS[strategy], call_usage(strategy, repeat), strict=True):
                role, tier, conv, latency = spec[0], spec[1], spec[2], spec[7]
                t += timedelta(seconds=5)
                rec.call(
                    CallRecord(
                        run_id=run_id,
                        role=role,
                        tier=tier,
                        model=f"scripted/{tier}",
                        conversation=conv,
                        started_at=iso(t),
                        latency_s=latency,
                        **usage.model_dump(exclude={"reasoning"}),
                    )
                )
                rec.transcript(conv, role, {"role": "assistant", "content": f"{role} says hi"})
                rec.event("tool", role=role, name="read_file", duration_s=0.5)
            crit, major, minor = DEFECTS[strategy][repeat]
            score = Score(
                requirements_total=6,
                requirements_by_severity={"critical": 2, "major": 2, "minor": 2},
                requirements_failed=crit + major + minor,
                defects={"critical": crit, "major": major, "minor": minor},
                tests_added=2 * repeat + (3 if strategy == "pdca" else 0),
                files_touched=1 + repeat,
                claimed_done_but_failed=crit + major + minor > 0,
            )
            rec.write_diff("--- a/x\n+++ b/x\n")
            rec.finalize(
                RunRecord(
                    run_id=run_id,
                    experiment=name,
                    task="micro-slugify",
                    strategy=strategy,
                    profile="scripted",
                    repeat=repeat,
                    price_sheet=PRICE_SHEET,
                    profile_spec=PROFILE_SPEC,
                    started_at=iso(started),
                    wall_s=WALL_S[strategy][repeat],
                    model_s=rec.model_s,
                    tool_s=rec.tool_s,
                    outcome="done",
                    claimed_done=True,
                    score=score,
                    counters={"cycles": repeat + 1, "history": [1, 2]},
                    totals=rec.totals,
                    calls=rec.calls,
                )
            )
    if incomplete:
        rec = RunRecorder(exp / "runs" / "micro-slugify__vibe__r9", "micro-slugify__vibe__r9")
        rec.call(CallRecord(run_id="x", role="coder", tier="medium", model="scripted/medium", output=10**6))
        rec.close()
    return exp
