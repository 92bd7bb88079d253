"""`python -m kit models check`: call each tier twice with a shared prefix and show what came
back -- latency, prompt / cached / output tokens, cost -- and whether the second call read the
prompt cache, so a profile can be trusted before an experiment spends money on it.

The shared prefix is sized for the profile: at least 1.25x the largest minimum cacheable prompt
of its tiers' models (:func:`kit.caching_rules.min_cacheable_tokens`; 4,096 tokens for Claude
Haiku 4.5 and Opus 4.5), counted with litellm's token counter. The calls are recorded like a
run's, in a folder the command prints (a fresh temp folder unless ``records_dir`` is given).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from kit.caching_rules import min_cacheable_tokens
from kit.config import TIERS, Profile, load_profile
from kit.model.gateway import Gateway
from kit.records.recorder import RunRecorder
from kit.records.schema import CALLS

MARGIN = 1.25  # token counters differ between providers; stay clear of the minimum
HEAD = "You review Python code for a team that values small, tested functions.\n"


def guideline(i: int) -> str:
    return f"Guideline {i}: prefer clear names, handle the empty case, and cover edge case {i} with a test."


# A fixed ~1.5k-token prefix (the live embedded-model test uses it; llama.cpp caches any size).
PREFIX = HEAD + "\n".join(guideline(i) for i in range(1, 61))


def shared_prefix(gateway: Gateway) -> str:
    """Stable text long enough for every tier's minimum cacheable prompt (with a margin)."""
    need = max(min_cacheable_tokens(gateway.spec(t).model) for t in TIERS) * MARGIN
    lines, n = [HEAD], 0
    while True:
        text = "\n".join(lines)
        counts = [gateway.count_tokens(t, [{"role": "system", "content": text}]) for t in TIERS]
        if min(counts) >= need:
            return text
        n += 1
        lines += [guideline(i) for i in range(n * 40 - 39, n * 40 + 1)]


@dataclass
class CheckRow:
    tier: str
    model: str
    call: int
    latency_s: float
    prompt: int
    cached: int
    cache_write: int
    output: int
    cost_usd: float


@dataclass
class CheckResult:
    rows: list[CheckRow]
    records: Path  # the calls.jsonl the check wrote
    prefix_tokens: dict[str, int]  # tier -> the shared prefix's size, by litellm's counter

    def cache_read(self, tier: str) -> bool:
        second = [r for r in self.rows if r.tier == tier and r.call == 2]
        return bool(second) and second[0].cached > 0


def with_api_base(profile: Profile, api_base: str) -> Profile:
    """The profile with every tier pointed at ``api_base`` (a proxy, a fake server, a local gateway)."""
    tiers = {t: s.model_copy(update={"api_base": api_base}) for t, s in profile.tiers.items()}
    return profile.model_copy(update={"tiers": tiers})


def check_profile(
    profile_name: str, records_dir: Path | None = None, api_base: str | None = None
) -> CheckResult:
    profile, sheet = load_profile(profile_name)
    if api_base:
        profile = with_api_base(profile, api_base)
    folder = Path(records_dir or tempfile.mkdtemp(prefix="orchbench-check-"))
    recorder = RunRecorder(folder, f"models-check-{profile.name}")
    gateway = Gateway(profile, sheet, recorder)
    gateway.preflight()
    prefix = shared_prefix(gateway)
    sizes = {t: gateway.count_tokens(t, [{"role": "system", "content": prefix}]) for t in TIERS}
    rows = []
    try:
        for tier in TIERS:
            for call in (1, 2):
                messages = [
                    {"role": "system", "content": prefix},
                    {"role": "user", "content": f"In one sentence: why test edge cases? (call {call})"},
                ]
                reply = gateway.call(role="check", tier=tier, messages=messages, max_tokens=32)
                u = reply.usage
                rows.append(
                    CheckRow(
                        tier,
                        gateway.spec(tier).model,
                        call,
                        reply.latency_s,
                        u.input_total,
                        u.cache_read,
                        u.cache_write,
                        u.output,
                        u.cost_usd,
                    )
                )
    finally:
        recorder.close()
    return CheckResult(rows, folder / CALLS, sizes)


def format_result(result: CheckResult, illustrative: bool) -> str:
    head = f"{'tier':<7} {'model':<32} {'call':>4} {'latency':>8} {'prompt':>7} {'cached':>7} {'c.write':>7} {'output':>6} {'cost $':>10}"
    lines = [head, "-" * len(head)]
    for r in result.rows:
        lines.append(
            f"{r.tier:<7} {r.model[:32]:<32} {r.call:>4} {r.latency_s:>7.2f}s {r.prompt:>7} {r.cached:>7} "
            f"{r.cache_write:>7} {r.output:>6} {r.cost_usd:>10.6f}"
        )
    lines.append("")
    for tier in TIERS:
        model = next((r.model for r in result.rows if r.tier == tier), "")
        second = next((r for r in result.rows if r.tier == tier and r.call == 2), None)
        if second is None:
            continue
        size = result.prefix_tokens.get(tier, 0)
        if result.cache_read(tier):
            lines.append(f"{tier}: the second call read {second.cached} tokens from the cache")
        else:
            lines.append(
                f"{tier}: the second call did NOT read the cache (shared prefix ~{size} tokens; "
                f"{model} caches from {min_cacheable_tokens(model)})"
            )
    if illustrative:
        lines.append("(illustrative prices: this profile's price sheet is made up for show)")
    lines.append(f"records: {result.records}")
    return "\n".join(lines)
