"""The kit's own overhead per agent step, with a zero-latency scripted model.

    .venv/bin/python tests/benchmarks/agent_overhead.py [--steps 300]

Runs the vibe coder's loop for N steps against a scripted policy that always asks for a cheap tool
(list_files) and prints, per action mode, the wall time per step split into: tool execution, the
litellm call (scripted provider included), and the kit's own overhead (everything else: the agent
loop, action parsing, context fitting, records). Target: kit overhead < 2 ms per step.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from kit.agent.loop import Agent, AgentConfig  # noqa: E402
from kit.agent.toolbox import Toolbox  # noqa: E402
from kit.config import ModelSpec, PriceSheet, Profile  # noqa: E402
from kit.model import scripted  # noqa: E402
from kit.model.actions import render  # noqa: E402
from kit.model.gateway import Gateway  # noqa: E402
from kit.records.recorder import RunRecorder  # noqa: E402
from kit.tasks.task import load_task  # noqa: E402
from kit.tasks.workspace import create_workspace  # noqa: E402
from kit.usage import ModelPrice  # noqa: E402


def measure(mode: str, steps: int, folder: Path) -> dict[str, float]:
    reply = render(mode, "list_files", {"path": "."}, "Look around.")
    model = scripted.register(lambda req: reply)
    spec = ModelSpec(model=model, price="p", action_mode=mode)
    profile = Profile(name="bench", price_sheet="s", tiers={t: spec for t in ("cheap", "medium", "strong")})
    sheet = PriceSheet(
        name="s", prices={"p": ModelPrice(input=1, output=5, cache_read=0.1, cache_write=1.25)}
    )
    ws = create_workspace(load_task("micro-slugify"), folder / mode / "repo")
    recorder = RunRecorder(folder / mode / "run", f"bench-{mode}")
    gateway = Gateway(profile, sheet, recorder)
    toolbox = Toolbox(ws.root, {"read", "write", "exec"}, recorder=recorder, role="coder")
    agent = Agent(
        AgentConfig(role="coder", tier="cheap", system_prompt="Bench.", max_steps=steps),
        gateway,
        toolbox,
        recorder,
    )
    t0 = time.perf_counter()
    result = agent.run("Explore.")
    wall = time.perf_counter() - t0
    recorder.close()
    assert result.steps == steps, result
    per = 1000 / steps
    return {
        "wall_ms": wall * per,
        "tool_ms": recorder.tool_s * per,
        "litellm_ms": recorder.model_s * per,
        "kit_ms": (wall - recorder.tool_s - recorder.model_s) * per,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="orchbench-overhead-"))
    print(f"{args.steps} steps per mode; ms per step (median-free: totals / steps)")
    print(f"{'mode':<7} {'wall':>8} {'tools':>8} {'litellm':>8} {'kit':>8}")
    for mode in ("native", "json", "text"):
        m = measure(mode, args.steps, folder)
        print(
            f"{mode:<7} {m['wall_ms']:>8.2f} {m['tool_ms']:>8.2f} {m['litellm_ms']:>8.2f} {m['kit_ms']:>8.2f}"
        )
    print("target: kit < 2 ms per step (excluding tool execution; litellm's own call is shown apart)")


if __name__ == "__main__":
    main()
