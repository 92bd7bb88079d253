"""The strategies' own working files in a run's clone: the one place each strategy declares them.

A strategy keeps its bookkeeping in the clone beside the agent's code -- linear's plan file, harness's
feature list, init script and progress notes, pdca's status folder. None of it is the agent's code,
and a hidden test must not be able to tell which strategy ran by looking for it
(``assert not os.path.exists('feature_list.json')`` failed every harness run and no other). So
scoring holds, at every path declared here, what the base commit holds there (nothing, for a path
the base lacks): :func:`kit.scoring.clean_copy.as_at_base` on the scored copy, and the lines changed
(:mod:`kit.scoring.diffstats`) do not count them.

The rule is by **every** strategy's paths, whatever strategy ran: a vibe run that writes ``PLAN.md``
has it set back too. Then the tree the hidden tests and the own tests see is the same, path for path,
whichever strategy ran -- a test that needs ``PLAN.md`` (or its absence) treats every strategy alike;
by the strategy that ran, a test asking for ``PLAN.md`` would fail linear's runs only.

A path is relative to the clone's root, ``/``-separated; a folder's path covers everything under it.
:data:`STRATEGY_FILES` names each one (the strategies read their own names from it);
:data:`PATH_OPTIONS` names the ones an experiment's ``strategy_options`` may move (linear's
``plan_file``): :func:`owned_paths` of the experiment's options then holds the moved path as well.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: strategy -> (name -> path in the clone) of the files and folders it keeps there for itself.
STRATEGY_FILES: dict[str, dict[str, str]] = {
    "vibe": {},
    "linear": {"plan_file": "PLAN.md"},
    "pdca": {"status": ".pdca/status"},
    "workflow": {},
    "harness": {
        "feature_list": "feature_list.json",
        "init_sh": "init.sh",
        "progress": "harness-progress.md",
    },
}

#: strategy -> the names of :data:`STRATEGY_FILES` that are options of the same name
#: (``strategy_options.<strategy>.<name>``) an experiment may set to another path.
PATH_OPTIONS: dict[str, tuple[str, ...]] = {"linear": ("plan_file",)}


def owned_paths(options: Mapping[str, Mapping[str, Any]] | None = None) -> tuple[str, ...]:
    """Every strategy's own paths (sorted), with the paths ``options`` (an experiment's
    ``strategy_options``) give the :data:`PATH_OPTIONS`, beside their defaults (which stay: the
    defaults are what every task is validated with, and any run may have written them)."""
    paths = {path for files in STRATEGY_FILES.values() for path in files.values()}
    for strategy, names in PATH_OPTIONS.items():
        chosen = (options or {}).get(strategy) or {}
        paths.update(str(chosen[name]) for name in names if isinstance(chosen.get(name), str))
    return tuple(sorted(normal(p) for p in paths))


def normal(path: str) -> str:
    """``path`` as the kit compares it: ``/``-separated, no ``./`` parts, no trailing ``/``."""
    return "/".join(part for part in path.replace("\\", "/").split("/") if part not in ("", "."))


def is_owned(rel: str, paths: tuple[str, ...]) -> bool:
    """Is ``rel`` (relative to the clone's root) one of ``paths`` or under one?"""
    rel = normal(rel)
    return any(rel == p or rel.startswith(p + "/") for p in paths)
