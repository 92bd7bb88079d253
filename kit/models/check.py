"""`python -m kit models check`: call each tier twice with a shared ~1.5k-token prefix and show
what came back -- latency, prompt / cached / output tokens, cost -- so a profile can be trusted
before an experiment spends money on it."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from kit.config import TIERS, load_profile
from kit.gateway import Gateway
from kit.records import RunRecorder

# ~1.5k tokens of stable text: the shared prefix whose second use should hit the prompt cache.
PREFIX = "You review Python code for a team that values small, tested functions.\n" + "\n".join(
    f"Guideline {i}: prefer clear names, handle the empty case, and cover edge case {i} with a test."
    for i in range(1, 61)
)


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


def check_profile(profile_name: str, records_dir: Path | None = None) -> list[CheckRow]:
    profile, sheet = load_profile(profile_name)
    folder = Path(records_dir or tempfile.mkdtemp(prefix="orchbench-check-"))
    recorder = RunRecorder(folder, f"models-check-{profile.name}")
    gateway = Gateway(profile, sheet, recorder)
    rows = []
    for tier in TIERS:
        for call in (1, 2):
            messages = [
                {"role": "system", "content": PREFIX},
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
    recorder.close()
    return rows


def format_rows(rows: list[CheckRow], illustrative: bool) -> str:
    head = f"{'tier':<7} {'model':<32} {'call':>4} {'latency':>8} {'prompt':>7} {'cached':>7} {'c.write':>7} {'output':>6} {'cost $':>10}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r.tier:<7} {r.model[:32]:<32} {r.call:>4} {r.latency_s:>7.2f}s {r.prompt:>7} {r.cached:>7} "
            f"{r.cache_write:>7} {r.output:>6} {r.cost_usd:>10.6f}"
        )
    if illustrative:
        lines.append("(illustrative prices: this profile's price sheet is made up for show)")
    return "\n".join(lines)
