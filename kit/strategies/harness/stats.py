"""What harness counts, and the ``counters`` it records in run.json (docs/strategies.md,
``## harness``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Stats:
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


def counters(
    stats: Stats, params: dict, init: dict, *, features: list[dict[str, Any]], history: list[int]
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
