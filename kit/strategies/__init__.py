"""Strategies: one module each, read top to bottom like the loop it implements.

A strategy module exposes ``run(ctx: RunContext) -> StrategyResult``. Short names map to modules in
:data:`STRATEGIES`; an unknown name fails with the list of valid ones.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kit.errors import ConfigError

STRATEGIES: dict[str, str] = {
    "vibe": "kit.strategies.vibe",
    "linear": "kit.strategies.linear",
    "pdca": "kit.strategies.pdca",
    "workflow": "kit.strategies.workflow",
    "harness": "kit.strategies.harness",
}


@dataclass
class StrategyResult:
    outcome: str
    claimed_done: bool
    counters: dict[str, Any] = field(default_factory=dict)
    summary: str = ""


def available() -> list[str]:
    """Strategy names whose module exists in this checkout."""
    out = []
    for name, module in STRATEGIES.items():
        if importlib.util.find_spec(module) is not None:
            out.append(name)
    return out


def get(name: str) -> Callable[..., StrategyResult]:
    """The ``run`` function of strategy ``name``."""
    if name not in STRATEGIES or importlib.util.find_spec(STRATEGIES[name]) is None:
        raise ConfigError(f"unknown strategy {name!r}", f"pick one of: {', '.join(available())}")
    return importlib.import_module(STRATEGIES[name]).run
