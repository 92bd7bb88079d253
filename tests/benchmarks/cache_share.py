"""Cache-read share of a 20-turn tool-using vibe run against the fake Anthropic server.

    PYTHONPATH=. .venv/bin/python tests/benchmarks/cache_share.py [--turns 20]

Runs the vibe coder (its real system prompt, tools and the micro-slugify task prompt) through the
gateway and litellm's real Anthropic code against tests/support/fake_providers.py's FakeAnthropic, whose
scripted model reads the task's files turn after turn and then says it is done. Prints, per model,
the prompt tokens and the share served from the cache (cache_read / all prompt tokens), with the
kit's breakpoints on and off. The fake counts tokens as 4 characters each and caches like Anthropic
(prefix up to a breakpoint, from the model's minimum size, 20-block lookback): the shares are the
shape of the real thing, not a provider measurement.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout: tests.support (the fake servers)

from kit.agent.loop import Agent, AgentConfig  # noqa: E402
from kit.agent.toolbox import Toolbox  # noqa: E402
from kit.config import ModelSpec, Profile, load_price_sheet  # noqa: E402
from kit.model.actions import FINISH, render  # noqa: E402
from kit.model.gateway import Gateway  # noqa: E402
from kit.prompts import PromptBook  # noqa: E402
from kit.records.recorder import RunRecorder  # noqa: E402
from kit.tasks.task import load_task  # noqa: E402
from kit.tasks.workspace import create_workspace  # noqa: E402
from kit.usage import Usage  # noqa: E402
from tests.support.fake_providers import FakeAnthropic, PolicyResponder  # noqa: E402

FILES = ["textkit.py", "README.md", "tests/test_textkit.py"]


def reader(turns: int):
    def policy(req):
        step = sum(m["role"] == "assistant" for m in req.messages)
        if step < turns - 1:
            path = FILES[step % len(FILES)]
            return render("native", "read_file", {"path": path}, f"Read {path}.")
        return render("native", FINISH, {"summary": "Read everything."}, "Done.")

    return policy


def one_run(model: str, turns: int, cache: bool, folder: Path) -> tuple[Usage, int]:
    task = load_task("micro-slugify")
    with FakeAnthropic(PolicyResponder(reader(turns))) as server:
        spec = ModelSpec(model=model, api_base=server.url, extra={"api_key": "fake"}, cache_breakpoints=cache)
        profile = Profile(
            name="fake", price_sheet="anthropic", tiers=dict.fromkeys(("cheap", "medium", "strong"), spec)
        )
        recorder = RunRecorder(folder / "run", "bench")
        gateway = Gateway(profile, load_price_sheet("anthropic"), recorder)
        ws = create_workspace(task, folder / "repo")
        toolbox = Toolbox(ws.root, {"read", "write", "exec"}, recorder=recorder, role="coder")
        config = AgentConfig(
            role="coder", tier="cheap", system_prompt=PromptBook("vibe").get("coder"), max_steps=turns
        )
        result = Agent(config, gateway, toolbox, recorder).run(task.prompt)
        recorder.close()
        assert all(s.status == 200 for s in server.seen), "the fake refused a request"
        return result.usage, result.steps


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=20)
    args = parser.parse_args()
    print(
        f"{'model':<30} {'breakpoints':<11} {'turns':>5} {'prompt tok':>10} {'read':>8} {'write':>8} {'read share':>10} {'cost $':>9}"
    )
    for model in ("anthropic/claude-sonnet-4-5", "anthropic/claude-haiku-4-5", "anthropic/claude-opus-4-5"):
        for cache in (True, False):
            with tempfile.TemporaryDirectory() as tmp:
                u, steps = one_run(model, args.turns, cache, Path(tmp))
            print(
                f"{model:<30} {'on' if cache else 'off':<11} {steps:>5} {u.input_total:>10} {u.cache_read:>8} "
                f"{u.cache_write:>8} {u.cache_hit_ratio:>10.1%} {u.cost_usd:>9.4f}"
            )


if __name__ == "__main__":
    main()
