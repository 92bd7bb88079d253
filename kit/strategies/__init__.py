"""Strategies: one module each, read top to bottom like the loop it implements.

A strategy module exposes ``run(ctx: RunContext) -> StrategyResult``. Short names map to modules in
:data:`STRATEGIES`; an unknown name fails with the list of valid ones.

:data:`DEFAULT_TIERS` is every strategy's source-faithful role -> tier map (docs/strategies.md); an
experiment's ``tiers`` overrides it per role or sets one tier for every role (:func:`role_tiers`).
The effective map is what the run's agents use (``RunContext.tier``) and what run.json records.

Each strategy is a module (``vibe``) or a folder whose ``__init__`` reads top to bottom like its loop
(``linear/``, ``pdca/``, ``workflow/``, ``harness/``); ``context`` holds :class:`RunContext`, what a
strategy gets for one run. docs/strategies.md describes every loop.

May import: the top-level modules, ``kit.records``, ``kit.sandbox``, ``kit.model``, ``kit.agent``,
``kit.tasks``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kit.config import TIERS, Experiment, Profile, Tier
from kit.errors import ConfigError

STRATEGIES: dict[str, str] = {
    "vibe": "kit.strategies.vibe",
    "linear": "kit.strategies.linear",
    "pdca": "kit.strategies.pdca",
    "workflow": "kit.strategies.workflow",
    "harness": "kit.strategies.harness",
}

#: Source-faithful role -> tier map of each strategy (the modules' own defaults; a test keeps them equal).
DEFAULT_TIERS: dict[str, dict[str, Tier]] = {
    "vibe": {"coder": "cheap"},
    "linear": {"coder": "cheap", "reviewer": "cheap"},
    "pdca": {
        "orchestrator": "cheap",
        "scout": "cheap",
        "analyst": "medium",
        "executor": "cheap",
        "auditor": "medium",
        "expert": "strong",
    },
    "workflow": {"implementer": "cheap", "analyzer": "medium", "refuter": "medium", "editor": "cheap"},
    "harness": {"initializer": "cheap", "coder": "cheap"},
}


def role_tiers(
    strategy: str, chosen: Tier | dict[str, Tier] | None, profile: Profile | None = None
) -> dict[str, Tier]:
    """The effective role -> tier map of ``strategy``: its defaults, then the profile's ``roles``, then
    the experiment's choice (one tier for every role, or a per-role map). An unknown role is an error."""
    defaults = DEFAULT_TIERS.get(strategy, {})
    tiers = {role: profile.tier_for(role, tier) if profile else tier for role, tier in defaults.items()}
    if chosen is None:
        return tiers
    if isinstance(chosen, str):
        if chosen not in TIERS:
            raise ConfigError(f"tiers.{strategy}: unknown tier {chosen!r}", f"use one of {', '.join(TIERS)}")
        return dict.fromkeys(tiers, chosen)
    unknown = sorted(set(chosen) - set(defaults))
    if unknown:
        raise ConfigError(
            f"tiers.{strategy}: unknown role(s) {', '.join(unknown)}",
            f"{strategy}'s roles are: {', '.join(defaults) or '(none)'}",
        )
    return {**tiers, **chosen}


def experiment_tiers(
    strategies: list[str], chosen: dict[str, Tier | dict[str, Tier]], profile: Profile | None = None
) -> dict[str, dict[str, Tier]]:
    """Every strategy's effective map; a ``tiers`` entry for a strategy not in the experiment is an error."""
    stray = sorted(set(chosen) - set(strategies))
    if stray:
        raise ConfigError(
            f"tiers: {', '.join(stray)} is not among the experiment's strategies",
            f"remove it, or add it to strategies (now: {', '.join(strategies)})",
        )
    return {name: role_tiers(name, chosen.get(name), profile) for name in strategies}


def check_experiment(experiment: Experiment) -> None:
    """The experiment's strategy settings before any run: unknown strategies, options, prompt names
    and roles fail with a "did you mean" (:mod:`kit.strategies.options`)."""
    from kit.strategies.options import check_experiment as check

    check(experiment, DEFAULT_TIERS)


@dataclass
class StrategyResult:
    """How a strategy's run ended: ``outcome`` is one of :data:`kit.records.schema.OUTCOMES` and
    ``stop_reason`` the strategy's own reason (:data:`kit.records.schema.STOP_REASONS`); the runner
    records both in run.json (a strategy that leaves ``stop_reason`` empty falls back to
    ``counters["stop_reason"]``)."""

    outcome: str
    claimed_done: bool
    counters: dict[str, Any] = field(default_factory=dict)
    summary: str = ""
    stop_reason: str = ""


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
