"""harness -- an initializer writes a feature list; fresh-context coder sessions take one failing
feature each (STRATEGIES.md §5, the long-running-agent harness).

The loop, as the kit runs it:

1. ``initializer`` (tier cheap; read + write + exec), conversation ``initializer``: turns the task
   prompt into ``feature_list.json`` (``[{id, category, description, steps, passes: false}]``, most
   important first), ``init.sh`` (sets up and runs the tests), the progress file
   ``harness-progress.md`` and a first git commit. The kit validates the list with :class:`Feature`;
   if it is missing or invalid the initializer is told why, in the same conversation, up to
   ``initializer_retries`` more times; after that the run ends ``capped`` (stop reason
   ``no-valid-feature-list``). If the initializer did not commit, the kit records that and commits.
2. ``coder`` sessions (tier cheap; read + write + exec), each a NEW conversation ``coder#<k>``: the
   system prompt tells the coder to orient (progress file, feature list, git log), run init.sh,
   re-verify one passing feature (regression => set it back to false and fix it first), implement the
   first failing feature, verify it, flip only its ``passes``, commit and append to the progress
   file. The kit sends the starting message (session number, features passing, the task).
3. After each session the kit *settles* the feature list, commits what the coder left uncommitted,
   re-runs the task's test command (a ``gate`` event "tests"; it does not decide anything), and
   stops when every feature passes (``all-pass``), at ``max_sessions`` (``capped``), or when the
   run budget is used up (``budget``).

Only ``passes`` flags may change after the initializer. The kit enforces it twice:
(a) a Toolbox guard refuses write_file / edit_file / delete_file on feature_list.json unless the new
content differs from the accepted list only in ``passes`` (a "denied" event); (b) the coder can also
rewrite the file through ``run``, so after every session the kit compares it field by field with the
accepted version and reverts every other change, keeping the ``passes`` flags matched by id (a
``gate`` event "feature_list", ok=False). Both count in ``feature_list_rejections``.

Choices where the specification is silent:

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

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    TypeAdapter,
    ValidationError,
)

from kit.sandbox.commands import run_command
from kit.strategies import StrategyResult
from kit.strategies.context import RunContext
from kit.tasks.git import git_env, git_safety_args

PERMISSIONS = {"read", "write", "exec"}
FEATURE_LIST = "feature_list.json"
INIT_SH = "init.sh"
PROGRESS = "harness-progress.md"
GIT_OPTS = ["-c", "commit.gpgsign=false", "-c", "core.hooksPath=/dev/null"]


class Feature(BaseModel):
    """One entry of feature_list.json."""

    model_config = ConfigDict(extra="forbid")
    id: StrictStr | StrictInt = Field(description="Stable id, e.g. 'F1'.")
    category: StrictStr = Field(description="e.g. functional, edge-case, docs.")
    description: StrictStr = Field(description="What the feature does, in one sentence.")
    steps: list[StrictStr] = Field(description="How to check it, step by step.")
    passes: StrictBool = Field(description="False until a coder has implemented and verified it.")


FEATURES = TypeAdapter(list[Feature])


def run(ctx: RunContext) -> StrategyResult:
    params = {
        "max_sessions": int(ctx.option("max_sessions", 12)),
        "max_steps_per_session": int(ctx.option("max_steps_per_session", ctx.step_cap())),
        "initializer_max_steps": int(ctx.option("initializer_max_steps", ctx.step_cap())),
        "initializer_retries": int(ctx.option("initializer_retries", 1)),
        "verify_tests": bool(ctx.option("verify_tests", True)),
        "initializer_tier": ctx.tier("initializer", "cheap"),
        "coder_tier": ctx.tier("coder", "cheap"),
    }
    root = ctx.workspace.root
    names = {"feature_list": FEATURE_LIST, "init_sh": INIT_SH, "progress": PROGRESS}
    stats = _Stats()

    # -- 1. the initializer ------------------------------------------------------------------
    ctx.phase("initialize")
    head_before = _git(root, "rev-parse", "HEAD").strip()
    initializer = ctx.agent(
        "initializer",
        tier="cheap",
        permissions=PERMISSIONS,
        system_prompt=ctx.prompts.get("initializer", test_command=ctx.task.test_command, **names),
        max_steps=params["initializer_max_steps"],
        conversation="initializer",
    )
    init = {"attempts": 0, "outcome": "", "valid": False, "error": "", "kit_wrote": []}
    message = ctx.task.prompt
    features: list[dict[str, Any]] | None = None
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
            "initializer_retry", problems="\n".join(f"- {p}" for p in problems), **names
        )
    init["valid"] = features is not None
    if features is None:
        init["error"] = error
        counters = _counters(stats, params, init, features=[], history=[0])
        counters["stop_reason"] = "budget" if result.outcome == "budget" else "no-valid-feature-list"
        return StrategyResult(
            outcome="budget" if result.outcome == "budget" else "capped",
            claimed_done=False,
            counters=counters,
            summary=f"the initializer produced no valid {FEATURE_LIST} after {init['attempts']} "
            f"attempt(s): {error}",
        )
    for name, text in ((INIT_SH, f"#!/bin/sh\n{ctx.task.test_command}\n"), (PROGRESS, "# Progress\n")):
        if not (root / name).is_file():
            (root / name).write_text(text, encoding="utf-8")
            init["kit_wrote"].append(name)
            ctx.recorder.event("note", "initializer", "kit-wrote", f"{name} was missing; the kit wrote it")
    agent_commits, kit_committed = _settle_commits(ctx, root, head_before, "initializer", 0)
    init["committed_by_agent"] = agent_commits > 0
    stats.commits += agent_commits
    stats.kit_commits += kit_committed

    # -- 2. fresh-context coder sessions -------------------------------------------------------
    keeper = FeatureListKeeper(root, features, ctx)
    passing_history = [keeper.passing]
    history: list[dict[str, Any]] = []
    stop_reason = "session-cap"
    for k in range(1, params["max_sessions"] + 1):
        if keeper.all_pass:
            break
        ctx.phase("session", f"coder#{k}")
        head_before = _git(root, "rev-parse", "HEAD").strip()
        guard_before = keeper.guard_refusals
        coder = ctx.agent(
            "coder",
            tier="cheap",
            permissions=PERMISSIONS,
            system_prompt=ctx.prompts.get("coder", **names),
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
            **names,
        )
        result = coder.run(start)
        stats.add(result)
        stats.sessions = k
        settled = keeper.settle(k)
        agent_commits, kit_committed = _settle_commits(ctx, root, head_before, "coder", k)
        stats.commits += agent_commits
        stats.kit_commits += kit_committed
        tests_ok = _verify(ctx, root, k) if params["verify_tests"] else None
        passing_history.append(keeper.passing)
        history.append(
            {
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
        )
        if result.outcome == "budget":
            stop_reason = "budget"
            break
    if keeper.all_pass:
        stop_reason = "all-pass"

    counters = _counters(stats, params, init, features=keeper.accepted, history=passing_history)
    counters.update(
        stop_reason=stop_reason,
        feature_list_rejections=keeper.guard_refusals + keeper.reverts,
        feature_list_guard_refusals=keeper.guard_refusals,
        feature_list_reverts=keeper.reverts,
        regressions_found=keeper.regressions,
        session_history=history,
    )
    outcome = "all-pass" if keeper.all_pass else ("budget" if stop_reason == "budget" else "capped")
    return StrategyResult(
        outcome=outcome,
        claimed_done=keeper.all_pass,
        counters=counters,
        summary=f"{keeper.passing}/{len(keeper.accepted)} features pass after {stats.sessions} coder "
        f"session(s); stop: {stop_reason}",
    )


# --------------------------------------------------------------------------- the feature list


def parse_features(text: str) -> tuple[list[dict[str, Any]] | None, str]:
    """(the list as plain dicts, '') when ``text`` is a valid feature list, else (None, why)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        return None, f"{FEATURE_LIST} is not valid JSON: {e}"
    if not isinstance(data, list) or not data:
        return None, f"{FEATURE_LIST} must be a non-empty JSON list of feature objects"
    try:
        features = FEATURES.validate_python(data)
    except ValidationError as e:
        return None, f"{FEATURE_LIST} does not match the feature schema: {_short_error(e)}"
    ids = [f.id for f in features]
    duplicates = sorted({str(i) for i in ids if ids.count(i) > 1})
    if duplicates:
        return None, f"{FEATURE_LIST}: duplicate ids {', '.join(duplicates)}"
    return data, ""


def load_initial_list(root: Path) -> tuple[list[dict[str, Any]] | None, str]:
    path = root / FEATURE_LIST
    if not path.is_file():
        return None, f"{FEATURE_LIST} does not exist"
    features, error = parse_features(path.read_text(encoding="utf-8", errors="replace"))
    if features is not None and any(f["passes"] for f in features):
        return None, f'{FEATURE_LIST}: every feature must start with "passes": false'
    return features, error


def illegal_changes(accepted: list[dict[str, Any]], new: Any) -> list[str]:
    """Every difference between ``new`` and ``accepted`` other than a boolean ``passes`` flag."""
    if not isinstance(new, list):
        return ["the file is not a JSON list"]
    problems = []
    if len(new) != len(accepted):
        problems.append(f"{len(accepted)} features expected, found {len(new)}")
    for i, (old, cur) in enumerate(zip(accepted, new, strict=False), 1):
        if not isinstance(cur, dict):
            problems.append(f"entry {i} is not an object")
            continue
        for key in sorted(set(old) | set(cur), key=str):
            if key == "passes":
                if not isinstance(cur.get(key), bool):
                    problems.append(f"feature {old['id']}: passes must be true or false")
            elif old.get(key, _MISSING) != cur.get(key, _MISSING):
                problems.append(f"feature {old['id']}: {key} changed")
    return problems


def keep_passes(accepted: list[dict[str, Any]], new: Any) -> list[dict[str, Any]]:
    """``accepted`` with the boolean ``passes`` flags that ``new`` gives its ids (first one wins)."""
    flags: dict[str, bool] = {}
    for cur in new if isinstance(new, list) else []:
        if isinstance(cur, dict) and "id" in cur and isinstance(cur.get("passes"), bool):
            flags.setdefault(_key(cur["id"]), cur["passes"])
    return [{**f, "passes": flags.get(_key(f["id"]), f["passes"])} for f in accepted]


_MISSING = object()


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


@dataclass
class FeatureListKeeper:
    """Holds the accepted feature list; guards the file tools and settles the file after a session."""

    root: Path
    accepted: list[dict[str, Any]]
    ctx: RunContext
    guard_refusals: int = 0
    reverts: int = 0
    regressions: int = 0

    @property
    def passing(self) -> int:
        return sum(bool(f["passes"]) for f in self.accepted)

    @property
    def all_pass(self) -> bool:
        return all(f["passes"] for f in self.accepted)

    def guard(self, name: str, args: dict) -> str | None:
        """Toolbox guard: a refusal message for a write that changes more than ``passes`` flags."""
        path = self.root / FEATURE_LIST
        if (self.root / str(args.get("path", ""))).resolve() != path.resolve():
            return None
        if name == "delete_file":
            problems = ["the file may not be deleted"]
        else:
            if name == "write_file":
                text = args["content"]
            else:  # edit_file: the text the edit would produce
                current = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
                if current.count(args["old"]) != 1:
                    return None  # the edit fails by itself, with the tool's own message
                text = current.replace(args["old"], args["new"], 1)
            try:
                new = json.loads(text)
            except json.JSONDecodeError as e:
                new, problems = None, [f"the new content is not valid JSON ({e})"]
            else:
                problems = illegal_changes(self.accepted, new)
        if not problems:
            return None
        self.guard_refusals += 1
        return (
            f'refused: in {FEATURE_LIST} only the "passes" flags may change ({"; ".join(problems[:5])}). '
            "Keep every feature, its order and all other fields exactly as they are."
        )

    def settle(self, session: int) -> dict[str, Any]:
        """After a session: revert any non-``passes`` change, then accept the list; what changed."""
        path = self.root / FEATURE_LIST
        try:
            new: Any = json.loads(path.read_text(encoding="utf-8", errors="replace"))
            problems = illegal_changes(self.accepted, new)
        except FileNotFoundError:
            new, problems = None, ["the file was deleted"]
        except json.JSONDecodeError as e:
            new, problems = None, [f"not valid JSON ({e})"]
        merged = keep_passes(self.accepted, new)
        reverted = bool(problems)
        if reverted:
            path.write_text(json.dumps(merged, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
            self.reverts += 1
            self.ctx.recorder.event(
                "gate",
                "coder",
                "feature_list",
                f"session {session}: reverted non-passes changes: {'; '.join(problems)}"[:300],
                ok=False,
            )
        flipped = [
            f["id"] for f, m in zip(self.accepted, merged, strict=True) if not f["passes"] and m["passes"]
        ]
        regressed = [
            f["id"] for f, m in zip(self.accepted, merged, strict=True) if f["passes"] and not m["passes"]
        ]
        self.regressions += len(regressed)
        if regressed:
            self.ctx.recorder.event(
                "note", "coder", "regression", f"session {session}: set back to failing: {regressed}"
            )
        self.accepted = merged
        return {"flipped": flipped, "regressed": regressed, "reverted": reverted}


# --------------------------------------------------------------------------- git and checks


def _git(root: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", *GIT_OPTS, *git_safety_args(root), *args],
        cwd=root,
        env=git_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {root}: {proc.stderr.strip()}")
    return proc.stdout


def _settle_commits(
    ctx: RunContext, root: Path, head_before: str, role: str, session: int
) -> tuple[int, int]:
    """(commits the agent made since ``head_before``, 1 if the kit committed leftovers else 0)."""
    agent_commits = int(_git(root, "rev-list", "--count", f"{head_before}..HEAD").strip() or 0)
    what = "initializer" if session == 0 else f"coder session {session}"
    ctx.recorder.event(
        "note", role, "agent-commits", f"{what}: {agent_commits} commit(s)", ok=agent_commits > 0
    )
    if not _git(root, "status", "--porcelain").strip():
        return agent_commits, 0
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "--no-verify", "-m", f"harness: kit commit after {what} (uncommitted changes)")
    ctx.recorder.event("note", role, "kit-commit", f"{what} left uncommitted changes; the kit committed them")
    return agent_commits, 1


def _verify(ctx: RunContext, root: Path, session: int) -> bool:
    res = run_command(ctx.task.test_command, root, ctx.limits.command_timeout_s, sandbox=ctx.sandbox)
    ok = not res.timed_out and res.exit_code == 0
    tail = res.output.strip().splitlines()[-1:] or [""]
    ctx.recorder.event(
        "gate", "kit", "tests", f"after session {session}: exit {res.exit_code}: {tail[0]}"[:300], ok=ok
    )
    return ok


# --------------------------------------------------------------------------- counters


@dataclass
class _Stats:
    sessions: int = 0
    steps: int = 0
    tool_calls: int = 0
    format_errors: int = 0
    commits: int = 0
    kit_commits: int = 0

    def add(self, result: Any) -> None:
        self.steps += result.steps
        self.tool_calls += result.tool_calls
        self.format_errors += result.format_errors


def _counters(
    stats: _Stats, params: dict, init: dict, *, features: list[dict[str, Any]], history: list[int]
) -> dict[str, Any]:
    return {
        "sessions": stats.sessions,
        "features_total": len(features),
        "features_passing": sum(bool(f["passes"]) for f in features),
        "features_passing_history": history,
        "feature_list_rejections": 0,
        "feature_list_guard_refusals": 0,
        "feature_list_reverts": 0,
        "regressions_found": 0,
        "commits": stats.commits,
        "kit_commits": stats.kit_commits,
        "steps": stats.steps,
        "tool_calls": stats.tool_calls,
        "format_errors": stats.format_errors,
        "initializer": init,
        "params": params,
    }


def _short_error(err: ValidationError) -> str:
    parts = [f"{'.'.join(str(p) for p in e['loc']) or '(top)'}: {e['msg']}" for e in err.errors()[:3]]
    return "; ".join(parts)
