"""harness -- an initializer writes a feature list; fresh-context coder sessions take one failing
feature each (the long-running-agent harness; docs/strategies.md, ``## harness``).

The loop, as the kit runs it:

1. ``initializer`` (tier cheap; read + write + exec), conversation ``initializer``: turns the task
   prompt into ``feature_list.json`` (``[{id, category, description, steps, passes: false}]``, most
   important first), ``init.sh`` (sets up and runs the tests), the progress file
   ``harness-progress.md`` and a first git commit. The kit validates the list with :class:`Feature`;
   if it is missing or invalid the initializer is told why, in the same conversation, up to
   ``initializer_retries`` more times; after that the run ends ``incomplete`` (stop reason
   ``no-valid-feature-list``: no cap was reached). If the initializer did not commit, the kit records that and commits.
   Both roles get ONE system prompt (``system.md``) and one tool set (read + write + exec); they differ
   only in their first user message (``initializer.md`` with the task, ``session.md``), as in the source.
2. ``coder`` sessions (tier cheap; read + write + exec), each a NEW conversation ``coder#<k>``: the
   first message (``session.md``) tells the coder to orient (progress file, feature list, git log), run init.sh,
   re-verify one passing feature (regression => set it back to false and fix it first), implement the
   first failing feature, verify it, flip only its ``passes``, commit and append to the progress
   file. The kit sends the starting message (session number, features passing, the task).
3. After each session the kit *settles* the feature list, commits what the coder left uncommitted,
   re-runs the task's test command (a ``gate`` event "tests"; it does not decide anything), and
   stops when every feature passes (outcome ``done``, stop reason ``all-pass``), at ``max_sessions``
   (``capped``, ``session-cap``), or when the run budget is used up (``budget``, ``budget``).

Only ``passes`` flags may change after the initializer. The kit enforces it twice:
(a) a Toolbox guard refuses write_file / edit_file / delete_file on feature_list.json unless the new
content differs from the accepted list only in ``passes`` (a "denied" event); (b) the coder can also
rewrite the file through ``run``, so after every session the kit compares it field by field with the
accepted version and reverts every other change, keeping the ``passes`` flags matched by id (a
``gate`` event "feature_list", ok=False). Both count in ``feature_list_rejections``.

Choices where the source harness is silent (also in docs/strategies.md, ``## Where the kit chooses``):

* Both roles run on the cheap tier (``ctx.tier`` lets a profile move them).
* The non-``passes`` fields are frozen at the initializer's accepted list; the guard compares with
  that, not with whatever a shell command left on disk in the middle of a session.
* Flipping several ``passes`` flags in one session is allowed (they are ``passes`` changes); each
  session's flips are recorded in ``session_history``.
* A regression is a ``passes`` flag that went from true back to false between two settled lists;
  ``regressions_found`` counts them.
* Work left uncommitted at the end of a session (and a revert of the feature list) is committed by
  the kit, so the next fresh session sees a clean tree and an honest ``git log``; ``commits`` counts
  the agents' commits, ``kit_commits`` the kit's.
* If after its retries the initializer left no init.sh or no progress file (but a valid list), the
  kit writes a minimal one (init.sh runs the task's test command) and lists it in
  ``initializer.kit_wrote``, so the coder prompt stays true.
* The kit's check runs the task's test command rather than init.sh, which the agents may change.
* A used-up run budget ends the loop early: outcome ``budget`` (as in vibe, linear and workflow), stop
  reason ``budget``.
* Step caps: ``max_steps_per_session`` and ``initializer_max_steps`` default to ``ctx.step_cap()`` (the
  experiment's cap, tightened by the task's own).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kit.agent.loop import AgentResult
from kit.paths import STRATEGY_FILES
from kit.strategies import StrategyResult
from kit.strategies.context import RunContext
from kit.strategies.harness.features import (
    FEATURE_LIST,
    FEATURES,
    Feature,
    FeatureListKeeper,
    illegal_changes,
    keep_passes,
    load_initial_list,
    parse_features,
    write_missing,
)
from kit.strategies.harness.gitops import head, settle_commits, verify
from kit.strategies.harness.stats import Stats, counters

__all__ = [
    "FEATURES",
    "FEATURE_LIST",
    "INIT_SH",
    "PROGRESS",
    "Feature",
    "FeatureListKeeper",
    "illegal_changes",
    "keep_passes",
    "load_initial_list",
    "parse_features",
    "run",
]

PERMISSIONS = {"read", "write", "exec"}
#: harness's own files in the clone, declared in kit.paths.STRATEGY_FILES (scoring sets them back to the base's)
NAMES = STRATEGY_FILES["harness"]
INIT_SH = NAMES["init_sh"]  # "init.sh"
PROGRESS = NAMES["progress"]  # "harness-progress.md"


def run(ctx: RunContext) -> StrategyResult:
    """Initialize, then fresh coder sessions until every feature passes, the session cap, or the budget."""
    params = _params(ctx)
    stats = Stats()
    init = initialize(ctx, params, stats)
    if init.features is None:
        return _no_feature_list(stats, params, init)
    keeper = FeatureListKeeper(ctx.workspace.root, init.features, ctx)
    passing_history = [keeper.passing]
    history: list[dict[str, Any]] = []
    stop_reason = "session-cap"
    for k in range(1, params["max_sessions"] + 1):
        if keeper.all_pass:
            break
        session = coder_session(ctx, params, keeper, stats, k)
        passing_history.append(keeper.passing)
        history.append(session)
        if session["outcome"] == "budget":
            stop_reason = "budget"
            break
    if keeper.all_pass:
        stop_reason = "all-pass"
    return _finished(stats, params, init, keeper, passing_history, history, stop_reason)


def _params(ctx: RunContext) -> dict[str, Any]:
    """harness's options with their defaults; recorded under ``counters["params"]``."""
    return {
        "max_sessions": int(ctx.option("max_sessions", 12)),
        "max_steps_per_session": int(ctx.option("max_steps_per_session", ctx.step_cap())),
        "initializer_max_steps": int(ctx.option("initializer_max_steps", ctx.step_cap())),
        "initializer_retries": int(ctx.option("initializer_retries", 1)),
        "verify_tests": bool(ctx.option("verify_tests", True)),
        "initializer_tier": ctx.tier("initializer", "cheap"),
        "coder_tier": ctx.tier("coder", "cheap"),
    }


# --------------------------------------------------------------------------- 1. initialize


@dataclass
class Initialized:
    """What the initializer left: the accepted feature list (None: no valid one) and its report
    (``counters["initializer"]``)."""

    features: list[dict[str, Any]] | None
    outcome: str  # the last initializer session's outcome
    error: str
    report: dict[str, Any] = field(default_factory=dict)


def initialize(ctx: RunContext, params: dict[str, Any], stats: Stats) -> Initialized:
    """The initializer writes the feature list, init.sh and the progress file, told what is wrong up to
    ``initializer_retries`` more times; the kit fills in a missing init.sh or progress file and commits
    what was left uncommitted."""
    ctx.phase("initialize")
    root = ctx.workspace.root
    head_before = head(ctx)
    initializer = ctx.agent(
        "initializer",
        tier="cheap",
        permissions=PERMISSIONS,
        system_prompt=ctx.prompts.get("system", **NAMES),  # the coder's too: only the first message differs
        max_steps=params["initializer_max_steps"],
        conversation="initializer",
    )
    init: dict[str, Any] = {"attempts": 0, "outcome": "", "valid": False, "error": "", "kit_wrote": []}
    message = ctx.prompts.get(
        "initializer", test_command=ctx.task.test_command, task=ctx.task.prompt, **NAMES
    )
    for attempt in range(1 + params["initializer_retries"]):
        init["attempts"] = attempt + 1
        result = initializer.run(message)
        stats.add(result)
        init["outcome"] = result.outcome
        features, error = load_initial_list(root)
        missing = [name for name in (INIT_SH, PROGRESS) if not (root / name).is_file()]
        ctx.recorder.event(
            "gate",
            "initializer",
            "feature_list",
            f"attempt {attempt + 1}: " + (f"{len(features)} features" if features else error),
            ok=features is not None,
        )
        if (features is not None and not missing) or result.outcome == "budget":
            break
        problems = ([error] if features is None else []) + [f"{name} does not exist" for name in missing]
        message = ctx.prompts.get(
            "initializer_retry", problems="\n".join(f"- {p}" for p in problems), **NAMES
        )
    init["valid"] = features is not None
    if features is None:
        init["error"] = error
        return Initialized(None, result.outcome, error, init)
    _fill_in(ctx, init)
    agent_commits, kit_committed = settle_commits(ctx, root, head_before, "initializer", 0)
    init["committed_by_agent"] = agent_commits > 0
    stats.commits += agent_commits
    stats.kit_commits += kit_committed
    return Initialized(features, result.outcome, error, init)


def _fill_in(ctx: RunContext, init: dict[str, Any]) -> None:
    """A minimal init.sh (the task's test command) or progress file where the initializer left none."""
    root = ctx.workspace.root
    for name, text in ((INIT_SH, f"#!/bin/sh\n{ctx.task.test_command}\n"), (PROGRESS, "# Progress\n")):
        if not (root / name).is_file():
            unwritten = write_missing(root, name, text)
            if not unwritten:
                init["kit_wrote"].append(name)
            why = unwritten or "the kit wrote it (anything in its place removed)"
            ctx.recorder.event("note", "initializer", "kit-wrote", f"{name} was missing or not a file; {why}")


# --------------------------------------------------------------------------- 2. one coder session


def coder_session(
    ctx: RunContext, params: dict[str, Any], keeper: FeatureListKeeper, stats: Stats, k: int
) -> dict[str, Any]:
    """Coder session ``k`` in a fresh conversation, then the kit's bookkeeping; its
    ``session_history`` entry."""
    ctx.phase("session", f"coder#{k}")
    head_before = head(ctx)
    guard_before = keeper.guard_refusals
    coder = ctx.agent(
        "coder",
        tier="cheap",
        permissions=PERMISSIONS,
        system_prompt=ctx.prompts.get("system", **NAMES),  # the initializer's: only the first message differs
        max_steps=params["max_steps_per_session"],
        conversation=f"coder#{k}",
        guard=keeper.guard,
    )
    start = ctx.prompts.get(
        "session",
        session=k,
        max_sessions=params["max_sessions"],
        passing=keeper.passing,
        total=len(keeper.accepted),
        task=ctx.task.prompt,
        **NAMES,
    )
    result = coder.run(start)
    stats.add(result)
    stats.sessions = k
    return _bookkeeping(ctx, params, keeper, stats, k, result, head_before, guard_before)


# --------------------------------------------------------------------------- 3. bookkeeping


def _bookkeeping(
    ctx: RunContext,
    params: dict[str, Any],
    keeper: FeatureListKeeper,
    stats: Stats,
    k: int,
    result: AgentResult,
    head_before: str,
    guard_before: int,
) -> dict[str, Any]:
    """After a session: settle the feature list, commit leftovers, run the task's tests (a ``gate``
    event that decides nothing)."""
    root = ctx.workspace.root
    settled = keeper.settle(k)
    agent_commits, kit_committed = settle_commits(ctx, root, head_before, "coder", k)
    stats.commits += agent_commits
    stats.kit_commits += kit_committed
    tests_ok = verify(ctx, root, k) if params["verify_tests"] else None
    return {
        "session": k,
        "outcome": result.outcome,
        "steps": result.steps,
        "tool_calls": result.tool_calls,
        "passing": keeper.passing,
        "flipped_to_pass": settled["flipped"],
        "regressed": settled["regressed"],
        "guard_refusals": keeper.guard_refusals - guard_before,
        "reverted": settled["reverted"],
        "agent_commits": agent_commits,
        "kit_commit": bool(kit_committed),
        "tests_ok": tests_ok,
    }


def _no_feature_list(stats: Stats, params: dict[str, Any], init: Initialized) -> StrategyResult:
    c = counters(stats, params, init.report, features=[], history=[0])
    c["stop_reason"] = "budget" if init.outcome == "budget" else "no-valid-feature-list"
    return StrategyResult(
        outcome="budget" if init.outcome == "budget" else "incomplete",  # no cap was reached
        claimed_done=False,
        counters=c,
        summary=f"the initializer produced no valid {FEATURE_LIST} after {init.report['attempts']} "
        f"attempt(s): {init.error}",
        stop_reason=c["stop_reason"],
    )


def _finished(
    stats: Stats,
    params: dict[str, Any],
    init: Initialized,
    keeper: FeatureListKeeper,
    passing_history: list[int],
    history: list[dict[str, Any]],
    stop_reason: str,
) -> StrategyResult:
    c = counters(stats, params, init.report, features=keeper.accepted, history=passing_history)
    c.update(
        stop_reason=stop_reason,
        feature_list_rejections=keeper.guard_refusals + keeper.reverts,
        feature_list_guard_refusals=keeper.guard_refusals,
        feature_list_reverts=keeper.reverts,
        regressions_found=keeper.regressions,
        session_history=history,
    )
    outcome = "done" if keeper.all_pass else ("budget" if stop_reason == "budget" else "capped")
    return StrategyResult(
        outcome=outcome,
        claimed_done=keeper.all_pass,
        counters=c,
        summary=f"{keeper.passing}/{len(keeper.accepted)} features pass after {stats.sessions} coder "
        f"session(s); stop: {stop_reason}",
        stop_reason=stop_reason,
    )
