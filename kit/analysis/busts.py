"""Cache busts, found and priced; the cache-read share per role; and, in words, why a tier's cache
figure is 0 % or missing.

A **bust** is a call that wrote again (or left uncached) a prompt prefix the previous call of its
conversation had left in the cache. The previous call left cached what it read plus what it wrote
(explicit caching, Anthropic); with automatic caching (no breakpoints recorded, no writes: OpenAI and
the scripted model) its whole prompt, once it reached the model's minimum or was itself read from the
cache (:func:`kit.analysis.cachesim.left_cached`). A shortfall of up to ``TOLERANCE`` (128) tokens
is not a bust (automatic caches round to 128-token steps). Its **cost** is the lost tokens at the price they were billed (write or plain input)
minus what a cache read of them would have cost. Its **cause**, where the records tell it, first match:

1. ``context trimmed`` -- the agent loop shortened old outputs of that conversation in between (its
   ``note`` event ``context_trimmed``);
2. ``gap of N min > cache lifetime`` -- the conversation was idle longer than the entry lived (5 min,
   or 1 h with ``cache_ttl: 1h``);
3. ``system prompt or tool list changed`` -- the prefix hash at the system breakpoint differs;
4. ``below the minimum`` -- the prompt is smaller than the model's minimum cacheable size;
5. ``prefix changed`` -- an earlier message changed, or the previous prefix fell out of the 20-block
   lookback (breakpoint records only);
6. ``not in the records`` -- none of the above shows (e.g. the provider evicted the entry early).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kit.analysis.cachesim import TOLERANCE, as_list, left_cached
from kit.analysis.load import Records
from kit.analysis.tables import cache_economics
from kit.caching_rules import DEFAULT_TTL, TTL_SECONDS, min_cacheable_tokens

BUST_COLUMNS = [
    "run_key", "strategy", "role", "tier", "model", "conversation", "seq", "t_s",
    "expected_read", "cache_read", "lost_tokens", "rewritten", "uncached", "extra_usd", "cause",
]  # fmt: skip


def _conversations(calls: pd.DataFrame) -> pd.Series:
    conv = calls["conversation"].astype(object).where(calls["conversation"].notna(), calls["role"])
    return calls["run_key"].astype(str) + "/" + conv.astype(str)


def _prompt(row: pd.Series) -> int:
    return int(row["input_uncached"] + row["cache_read"] + row["cache_write"])


def _trimmed(events: pd.DataFrame, row: pd.Series, since: float) -> bool:
    if events.empty or "name" not in events:
        return False
    e = events[(events["run_key"] == row["run_key"]) & (events["name"] == "context_trimmed")]
    conv = e["conversation"] if "conversation" in e else pd.Series(None, index=e.index, dtype=object)
    mine = (conv == row["conversation"]) | (conv.isna() & (e["role"] == row["role"]))
    return bool(((e["t_s"] > since) & (e["t_s"] <= row["t_s"]) & mine).any())


def _ttl(row: pd.Series) -> str:
    ttl = row.get("cache_ttl")
    return str(ttl) if isinstance(ttl, str) and ttl in TTL_SECONDS else DEFAULT_TTL


def _cause(prev: pd.Series, row: pd.Series, events: pd.DataFrame) -> str:
    if _trimmed(events, row, float(prev["t_s"])):
        return "context trimmed"
    ttl = _ttl(prev)
    idle = float(row["t_s"]) - float(prev["t_s"]) - float(prev["latency_s"] or 0.0)
    if idle > TTL_SECONDS.get(ttl, TTL_SECONDS[DEFAULT_TTL]):
        return f"gap of {idle / 60:.1f} min > cache lifetime ({ttl})"
    before, now = as_list(prev.get("cache_prefix_hashes")), as_list(row.get("cache_prefix_hashes"))
    if before and now and before[0] != now[0]:
        return "system prompt or tool list changed"
    if _prompt(row) < min_cacheable_tokens(str(row["model"])):
        return "below the minimum"
    lookback = as_list(row.get("cache_lookback"))
    if before and lookback and before[-1] not in {h for _, h in lookback}:
        return "prefix changed"
    return "not in the records"


def _extra_usd(row: pd.Series, rewritten: int, uncached: int) -> float:
    write = row["price_cache_write_1h"] if _ttl(row) == "1h" else row["price_cache_write"]
    read = row["price_cache_read"]
    return float(rewritten * (write - read) + uncached * (row["price_input"] - read)) / 1_000_000


def cache_busts(records: Records) -> pd.DataFrame:
    """One row per bust (see the module docstring): where, how many tokens it lost, what it cost
    beyond a cache hit (``extra_usd``), and why."""
    calls = records.calls
    if calls.empty:
        return pd.DataFrame(columns=BUST_COLUMNS)
    c = calls[(calls["input_uncached"] + calls["cache_read"] + calls["cache_write"]) > 0].copy()
    c["_conv"] = _conversations(c)
    c = c.sort_values(["_conv", "seq"], kind="stable")
    prompt = c["input_uncached"] + c["cache_read"] + c["cache_write"]
    g = c.groupby("_conv", sort=False)
    same = g["model"].shift().eq(c["model"])  # a previous call in the conversation, on the same model
    expected = np.minimum(left_cached(c).groupby(c["_conv"]).shift().fillna(0), prompt).astype("int64")
    lost = expected - c["cache_read"]
    busted = np.flatnonzero((same & (expected > 0) & (lost > TOLERANCE)).to_numpy())
    rows = []
    for i in busted:  # busts are few: the per-row work (cause, price) only for them
        prev, row = c.iloc[i - 1], c.iloc[i]
        rewritten = min(int(lost.iloc[i]), int(row["cache_write"]))
        uncached = int(lost.iloc[i]) - rewritten
        rows.append(
            {
                **{k: row[k] for k in ("run_key", "strategy", "role", "tier", "model", "seq", "t_s")},
                "conversation": row["conversation"] if pd.notna(row["conversation"]) else row["role"],
                "expected_read": int(expected.iloc[i]),
                "cache_read": int(row["cache_read"]),
                "lost_tokens": int(lost.iloc[i]),
                "rewritten": rewritten,
                "uncached": uncached,
                "extra_usd": _extra_usd(row, rewritten, uncached),
                "cause": _cause(prev, row, records.events),
            }
        )
    return pd.DataFrame(rows, columns=BUST_COLUMNS)


def bust_table(records: Records, busts: pd.DataFrame | None = None) -> pd.DataFrame:
    """Busts and their dollars per strategy x role x tier, with the causes counted."""
    busts = cache_busts(records) if busts is None else busts
    index = ["strategy", "role", "tier"]
    if busts.empty:
        empty = pd.MultiIndex.from_arrays([[], [], []], names=index)
        return pd.DataFrame(columns=["busts", "lost_tokens", "extra_usd", "causes"], index=empty)
    g = busts.groupby(index)
    table = g.agg(busts=("seq", "size"), lost_tokens=("lost_tokens", "sum"), extra_usd=("extra_usd", "sum"))
    table["causes"] = g["cause"].agg(
        lambda s: ", ".join(f"{n}x {c}" for c, n in s.map(_short).value_counts().items())
    )
    return table


def _short(cause: str) -> str:
    return "gap > lifetime" if cause.startswith("gap of") else cause


def cache_read_share(records: Records) -> pd.DataFrame:
    """Per strategy x role: prompt tokens, the share read from the cache, and calls per conversation;
    ``kind`` is ``main`` for the role with the longest conversations in its strategy (the primary
    session), ``sub-agent`` for the others."""
    calls = records.calls
    cols = ["kind", "calls", "calls_per_conversation", "prompt_tokens", "cache_read", "read_share"]
    if calls.empty:
        return pd.DataFrame(
            columns=cols, index=pd.MultiIndex.from_arrays([[], []], names=["strategy", "role"])
        )
    c = calls.assign(
        _conv=_conversations(calls),
        _prompt=calls["input_uncached"] + calls["cache_read"] + calls["cache_write"],
    )
    g = c.groupby(["strategy", "role"])
    table = pd.DataFrame(
        {
            "calls": g.size(),
            "calls_per_conversation": g.size() / g["_conv"].nunique(),
            "prompt_tokens": g["_prompt"].sum(),
            "cache_read": g["cache_read"].sum(),
        }
    )
    table["read_share"] = table["cache_read"] / table["prompt_tokens"].where(table["prompt_tokens"] > 0)
    longest = table.groupby(level="strategy")["calls_per_conversation"].transform("max")
    table["kind"] = np.where(table["calls_per_conversation"] == longest, "main", "sub-agent")
    return table[cols]


def _name(model: str) -> str:
    """``anthropic/claude-haiku-4-5`` -> ``Haiku 4.5``; other models as they are."""
    tail = model.rsplit("/", 1)[-1]
    if tail.startswith("claude-"):
        parts = tail.removeprefix("claude-").split("-")
        family = next((p for p in parts if p.isalpha()), parts[0])
        digits = [p for p in parts if p.isdigit()][:2]
        return f"{family.capitalize()} {'.'.join(digits)}".strip()
    return model


def _model_note(tier: str, model: str, c: pd.DataFrame, busts: pd.DataFrame) -> str | None:
    """Why ``model`` on ``tier`` has a 0 % hit ratio (None when it read from the cache)."""
    if c["cache_read"].sum() > 0:
        return None
    name, prompt = _name(model), c["input_uncached"] + c["cache_read"] + c["cache_write"]
    where = f"{tier} ({name}, {len(c)} calls): 0 % read from the cache"
    if model.startswith("embedded/"):
        return f"{where} -- the embedded model's server reports no cache reads"
    if c["usage_estimated"].fillna(False).astype(bool).all():
        return f"{where} -- the provider sent no usage; tokens are estimates"
    minimum = min_cacheable_tokens(model)
    if c["cache_write"].sum() == 0 and prompt.max() < minimum:
        return (
            f"{where} -- no {name} prompt reached its {minimum:,}-token minimum; median prompt "
            f"{prompt.median():,.0f} tokens (largest {prompt.max():,.0f})"
        )
    if c["cache_write"].sum() == 0:
        placed = "cache_lookback" in c and c["cache_lookback"].map(lambda v: bool(as_list(v))).any()
        why = "the provider reported no cache writes" if placed else "no cache breakpoints were placed"
        return f"{where} -- {why} (prompts up to {prompt.max():,.0f} tokens, minimum {minimum:,})"
    convs = c.groupby(_conversations(c)).size()
    lost = int((busts["model"] == model).sum()) if not busts.empty else 0
    return (
        f"{where} -- it wrote {int(c['cache_write'].sum()):,} tokens that no later call read: "
        f"{int((convs == 1).sum())} of {len(convs)} conversations had a single call; {lost} cache bust(s)"
    )


def cache_notes(
    records: Records, economics: pd.DataFrame | None = None, busts: pd.DataFrame | None = None
) -> list[str]:
    """Every 0 % or missing cache figure of :func:`~kit.analysis.tables.cache_economics`, in words:
    which tier, which model, and what in the records explains it."""
    calls = records.calls
    if calls.empty:
        return [f"{records.root}: no calls, so no cache figures"]
    table = cache_economics(records) if economics is None else economics
    busts = cache_busts(records) if busts is None else busts
    notes = []
    for tier in table.index:
        c = calls[calls["tier"] == tier]
        for model, part in c.groupby("model"):
            note = _model_note(tier, str(model), part, busts)
            if note:
                notes.append(note)
        row = table.loc[tier]
        if row["hit_ratio"] > 0 and row["warm_turns"] == 0:
            notes.append(
                f"{tier}: no warm turn -- no repeated turn read everything the previous call left cached"
            )
        if row["cold_turns"] == 0:
            notes.append(
                f"{tier}: no cold turn -- no call wrote its prompt to the cache while reading nothing"
                + (" (automatic caching reports no writes)" if c["cache_write"].sum() == 0 else "")
            )
    return notes
