"""A tier -> model what-if with its cache re-simulated, checked against a real rerun, and the cache
busts of both -- all against the fake Anthropic server (fake-server figures, not a provider's).

    PYTHONPATH=. .venv/bin/python tests/benchmarks/cache_whatif.py [--turns 14] [--repeats 2]

Runs vibe with its coder on the strong tier (experiment option ``tiers: {vibe: strong}``) through the
runner, litellm's real Anthropic code and tests/support/fake_providers.py's FakeAnthropic, whose
scripted coder reads the task's files and prints a long text every third turn. The strong tier is
Claude Opus 4.5 (4,096-token minimum) in one experiment and Sonnet 4.5 (1,024) in the other; the
tiers' context window is small (6,000 tokens) so the agent loop trims old outputs (a cache bust).
Prints the what-if "strong -> Sonnet 4.5" on the Opus runs (as recorded vs re-simulated) beside the
real Sonnet rerun, the 1-hour-cache what-if, and the bust tables. The fake counts 4 characters per
token and caches like Anthropic (prefix up to a breakpoint, per-model minimum, 20-block lookback,
no expiry).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout: tests.support

import pandas as pd  # noqa: E402
import yaml  # noqa: E402

from kit import analysis  # noqa: E402
from kit.analysis import report  # noqa: E402
from kit.config import Experiment, Limits, load_price_sheet  # noqa: E402
from kit.model.actions import FINISH, render  # noqa: E402
from kit.run.runner import run_experiment  # noqa: E402
from tests.support.fake_providers import FakeAnthropic, PolicyResponder  # noqa: E402

MODELS = {m: f"anthropic/claude-{m}" for m in ("haiku-4-5", "sonnet-4-5", "opus-4-5")}
FILES = ["textkit.py", "README.md", "tests/test_textkit.py"]
BIG = "python -c \"print('lorem ipsum dolor ' * 300)\""


def coder(turns: int):
    def policy(req):
        step = sum(m["role"] == "assistant" for m in req.messages)
        if step >= turns - 1:
            return render("native", FINISH, {"summary": "Read everything."}, "Done.")
        if step % 3 == 1:
            return render("native", "run", {"command": BIG}, "Print a long text.")
        return render("native", "read_file", {"path": FILES[step % 3]}, "Read.")

    return policy


def experiment(folder: Path, server: FakeAnthropic, strong: str, turns: int, repeats: int) -> Path:
    (folder / "profiles").mkdir(parents=True)
    (folder / "prices").mkdir()
    sheet = load_price_sheet("anthropic").model_dump(mode="json")
    (folder / "prices" / "anthropic.yaml").write_text(yaml.safe_dump(sheet))
    tier = {"api_base": server.url, "api_key_env": "FAKE_ANTHROPIC_KEY", "context_window": 6000}
    name = f"fake-{strong}"
    profile = {
        "name": name,
        "price_sheet": "anthropic",
        "tiers": {
            "cheap": {"model": MODELS["haiku-4-5"], **tier},
            "medium": {"model": MODELS["sonnet-4-5"], **tier},
            "strong": {"model": MODELS[strong], **tier},
        },
    }
    path = folder / "profiles" / f"{name}.yaml"
    path.write_text(yaml.safe_dump(profile))
    exp = Experiment(
        name=f"strong-on-{strong}",
        tasks=["micro-slugify"],
        strategies=["vibe"],
        profile=str(path),
        repeats=repeats,
        limits=Limits(max_steps=turns + 2),
        tiers={"vibe": "strong"},
    )
    return run_experiment(exp, results_dir=folder / "results", progress=False)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=14)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    os.environ["FAKE_ANTHROPIC_KEY"] = "fake"
    pd.set_option("display.width", 200)
    with tempfile.TemporaryDirectory() as tmp, FakeAnthropic(PolicyResponder(coder(args.turns))) as server:
        opus = analysis.load(experiment(Path(tmp) / "opus", server, "opus-4-5", args.turns, args.repeats))
        sonnet = analysis.load(
            experiment(Path(tmp) / "sonnet", server, "sonnet-4-5", args.turns, args.repeats)
        )
        assert all(s.status == 200 for s in server.seen), "the fake refused a request"
    print(f"fake-server figures: {len(opus.calls)} calls on Opus 4.5, {len(sonnet.calls)} on Sonnet 4.5\n")
    whatif = analysis.whatif_model(opus, {"strong": MODELS["sonnet-4-5"]})
    print(f"What-if on the Opus runs -- {whatif.note}")
    view = whatif.view("strategy")
    view["real rerun on Sonnet"] = sonnet.calls.groupby("strategy")["cost_usd"].sum()
    print(view.round(4).to_string(), "\n")
    ttl = analysis.whatif_cache_ttl(opus, {"coder": "1h"})
    print(f"What-if on the Opus runs -- {ttl.note}")
    print(ttl.view("strategy").round(4).to_string(), "\n")
    for name, records in (("Opus 4.5", opus), ("Sonnet 4.5", sonnet)):
        print(f"--- strong = {name}")
        print("\n".join(report.cache_lines(records)), "\n")


if __name__ == "__main__":
    main()
