"""Analysis at scale: synthesise N call records as real run folders, then time the kit against the floor.

    python tests/benchmarks/analysis_scale.py                      # 10k and 100k calls
    python tests/benchmarks/analysis_scale.py --sizes 1000000      # 1 M calls (10k runs, ~0.6 GB on disk)

Per size it prints, in seconds (median of --repeat):
  first load (scan)    analysis.load with no .analysis/ cache: every run.json, one Parquet dataset scan of
                       the runs' calls and events, the tables written to <experiment>/.analysis/
  kit: load            analysis.load again (the cache is current: a stat per log file, 3 Parquet reads)
  kit: role x tier     analysis.role_tier_table
  kit: re-price        analysis.whatif_price_sheet under another sheet (vectorised)
  kit: total           the three together (the goal: < 2 s at 1 M calls)
  floor: JSONL         a plain pyarrow read of the same calls.jsonl files (pyarrow.json, one per file)
  floor: Parquet       a plain pyarrow dataset scan of the same calls.parquet files (one per run)
  floor: 1 Parquet file  a plain pyarrow read of the experiment's cached calls table (.analysis/)
  rebuild              analysis.load after deleting every Parquet file (all rebuilt from the JSONL)

The records are written fast: one Arrow table of all calls, sliced per run into calls.parquet, and the
JSONL lines formatted from the same columns; run.json from a RunRecord template. Parquet files are
written after the JSONL, so load finds them fresh.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.json as pj
import pyarrow.parquet as pq

from kit import analysis
from kit.analysis import cache as acache
from kit.records import parquet as rparquet
from kit.records.schema import CALLS, EVENTS, RUN, CallRecord, EventRecord, RunRecord, Score

TIERS = ("cheap", "medium", "strong")
ROLES = {
    "vibe": ["coder"],
    "pdca": ["orchestrator", "executor", "auditor"],
    "workflow": ["planner", "worker"],
}
PRICES = {
    "bx-cheap": {"input": 0.25, "output": 1.25, "cache_read": 0.025, "cache_write": 0.3125},
    "bx-medium": {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75},
    "bx-strong": {"input": 5.0, "output": 25.0, "cache_read": 0.5, "cache_write": 6.25},
}
SHEET = {"name": "bench-prices", "illustrative": True, "source": "benchmark", "prices": PRICES}
OTHER = {
    "name": "bench-other",
    "illustrative": True,
    "source": "benchmark",
    "prices": {k: {f: v * 1.5 for f, v in p.items()} for k, p in PRICES.items()},
}
PROFILE = {
    "name": "bench",
    "price_sheet": "bench-prices",
    "tiers": {t: {"model": f"bench/{t}", "price": f"bx-{t}"} for t in TIERS},
    "roles": {},
}


def _call_table(
    run_ids: list[str], strategies: list[str], per_run: int, rng: np.random.Generator
) -> pa.Table:
    n = len(run_ids) * per_run
    run_of = np.repeat(np.arange(len(run_ids)), per_run)
    role = np.empty(n, dtype=object)
    tier = np.empty(n, dtype=object)
    for i, s in enumerate(strategies):
        names = ROLES[s]
        sl = slice(i * per_run, (i + 1) * per_run)
        role[sl] = [names[j % len(names)] for j in range(per_run)]
        tier[sl] = [TIERS[(j + i) % 3] for j in range(per_run)]
    tokens = {k: rng.integers(0, hi, n) for k, hi in (("input_uncached", 3000), ("cache_read", 20000), ("cache_write", 2000), ("output", 800))}  # fmt: skip
    price = {k: np.array([PRICES[f"bx-{t}"][f] for t in tier]) for k, f in (("input_uncached", "input"), ("cache_read", "cache_read"), ("cache_write", "cache_write"), ("output", "output"))}  # fmt: skip
    cost = sum(tokens[k] * price[k] for k in tokens) / 1_000_000
    seq = np.tile(np.arange(1, per_run + 1), len(run_ids))
    stamps = np.datetime64("2025-01-01T00:00:00", "ms") + (run_of * 3600 + seq * 5).astype("timedelta64[s]")
    cols = {
        "run_id": np.array(run_ids, dtype=object)[run_of],
        "seq": seq,
        "role": role,
        "tier": tier,
        "model": np.array([f"bench/{t}" for t in tier], dtype=object),
        "attempt": np.ones(n, dtype=np.int64),
        "ok": rng.random(n) > 0.01,
        "error": [None] * n,
        **tokens,
        "reasoning": np.zeros(n, dtype=np.int64),
        "cost_usd": cost,
        "litellm_cost_usd": cost,
        "cost_mismatch": np.zeros(n, dtype=bool),
        "latency_s": rng.random(n) * 3,
        "started_at": [str(s) + "Z" for s in stamps],
        "raw_usage": [None] * n,
        "action_mode": ["tools"] * n,
        "conversation": role,
    }
    schema = rparquet.arrow_schema(CallRecord)
    for name, f in CallRecord.model_fields.items():  # fields added later: their default
        cols.setdefault(name, [f.default if isinstance(f.default, str | int | float | bool) else None] * n)
    return pa.table({f.name: pa.array(cols[f.name], f.type) for f in schema}, schema=schema)


def _jsonl_lines(table: pa.Table) -> list[str]:
    cols = table.to_pydict()
    names = list(cols)
    return [json.dumps(dict(zip(names, row, strict=True))) for row in zip(*cols.values(), strict=True)]


def synthesise(root: Path, n_calls: int, per_run: int = 100, events_per_run: int = 20, seed: int = 0) -> Path:
    """Write experiment ``scale`` with ``n_calls`` calls in ``n_calls / per_run`` runs under ``root``."""
    rng = np.random.default_rng(seed)
    exp = root / "scale"
    n_runs = max(1, n_calls // per_run)
    strategies = [list(ROLES)[i % len(ROLES)] for i in range(n_runs)]
    run_ids = [f"task{i % 50:02d}__{s}__bench__r{i // 150 + 1}_{i}" for i, s in enumerate(strategies)]
    calls = _call_table(run_ids, strategies, per_run, rng)
    call_lines = _jsonl_lines(calls)
    ev_schema = rparquet.arrow_schema(EventRecord)
    template = RunRecord(
        run_id="x",
        experiment="scale",
        task="t",
        strategy="s",
        profile="bench",
        repeat=1,
        price_sheet=SHEET,
        profile_spec=PROFILE,
        started_at="2025-01-01T00:00:00.000Z",
        outcome="done",
        claimed_done=True,
        score=Score(
            requirements_total=6, requirements_failed=1, defects={"critical": 0, "major": 1, "minor": 0}
        ),
        counters={"steps": 12},
        calls=per_run,
    ).model_dump(mode="json")
    for i, (run_id, strategy) in enumerate(zip(run_ids, strategies, strict=True)):
        d = exp / "runs" / run_id
        d.mkdir(parents=True)
        part = calls.slice(i * per_run, per_run)
        (d / CALLS).write_text("\n".join(call_lines[i * per_run : (i + 1) * per_run]) + "\n")
        events = [
            EventRecord(
                run_id=run_id,
                seq=j + 1,
                kind="tool",
                role=ROLES[strategy][0],
                name="read_file",
                duration_s=0.01,
            ).model_dump()
            for j in range(events_per_run)
        ]
        (d / EVENTS).write_text("".join(json.dumps(e) + "\n" for e in events))
        pq.write_table(part, d / rparquet.CALLS_PARQUET)
        pq.write_table(pa.Table.from_pylist(events, schema=ev_schema), d / rparquet.EVENTS_PARQUET)
        run = dict(
            template, run_id=run_id, task=run_id.split("__")[0], strategy=strategy, repeat=i // 150 + 1
        )
        run["started_at"] = f"2025-01-01T{(i % 24):02d}:00:00.000Z"
        (d / RUN).write_text(json.dumps(run))
    return exp


def _timed(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def measure(exp: Path, repeat: int, rebuild_too: bool = True) -> dict[str, float]:
    figures: dict[str, float] = {}
    figures["first load (scan)"], _ = _timed(lambda: analysis.load(exp), 1)  # builds .analysis/
    figures["kit: load"], records = _timed(lambda: analysis.load(exp), repeat)
    figures["kit: role x tier"], _ = _timed(lambda: analysis.role_tier_table(records), repeat)
    figures["kit: re-price"], w = _timed(lambda: analysis.whatif_price_sheet(records, OTHER), repeat)
    figures["kit: total"] = figures["kit: load"] + figures["kit: role x tier"] + figures["kit: re-price"]
    ratio = w.table.loc["total", "cost_after"] / w.table.loc["total", "cost_before"]
    assert abs(ratio - 1.5) < 1e-9, ratio  # every price x 1.5: the re-pricing is checked, not just timed
    jsonl = sorted((exp / "runs").glob(f"*/{CALLS}"))
    parquet = sorted((exp / "runs").glob(f"*/{rparquet.CALLS_PARQUET}"))
    figures["floor: JSONL"], t = _timed(lambda: pa.concat_tables([pj.read_json(p) for p in jsonl]), repeat)
    assert t.num_rows == len(records.calls)
    figures["floor: Parquet"], t = _timed(lambda: ds.dataset([str(p) for p in parquet]).to_table(), repeat)
    assert t.num_rows == len(records.calls)
    cache = exp / acache.CACHE_DIR / "calls.parquet"
    figures["floor: 1 Parquet file"], t = _timed(lambda: pq.read_table(cache), repeat)
    assert t.num_rows == len(records.calls)

    def rebuild():
        for p in [*(exp / "runs").glob("*/*.parquet"), *(exp / acache.CACHE_DIR).glob("*")]:
            p.unlink()
        return analysis.load(exp)

    if rebuild_too:
        figures["rebuild"], again = _timed(rebuild, 1)
        assert len(again.calls) == len(records.calls)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000], help="calls per size")
    parser.add_argument("--calls-per-run", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3, help="median of this many timings")
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: a temp folder)")
    parser.add_argument("--no-rebuild", action="store_true", help="skip the rebuild-from-JSONL timing")
    args = parser.parse_args()
    rows = []
    for n in args.sizes:
        root = Path(tempfile.mkdtemp(prefix=f"scale{n}_", dir=args.dir))
        try:
            t0 = time.perf_counter()
            exp = synthesise(root, n, args.calls_per_run)
            print(
                f"{n:>9,} calls in {n // args.calls_per_run:,} runs written in {time.perf_counter() - t0:.1f} s",
                flush=True,
            )
            rows.append((n, measure(exp, args.repeat, not args.no_rebuild)))
        finally:
            shutil.rmtree(root, ignore_errors=True)
    names = list(rows[0][1])
    print(f"\n{'seconds (median of ' + str(args.repeat) + ')':<24}" + "".join(f"{n:>12,}" for n, _ in rows))
    for name in names:
        print(f"{name:<24}" + "".join(f"{f[name]:>12.3f}" if name in f else f"{'-':>12}" for _, f in rows))


if __name__ == "__main__":
    main()
