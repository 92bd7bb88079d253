"""The pdca knobs (the experiment's ``strategy_options``) and the roles' default tiers and permissions;
see docs/strategies.md, ``## pdca``."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from kit.paths import STRATEGY_FILES
from kit.strategies.context import RunContext

#: role -> (default tier, permissions); a profile or the experiment's tiers map may reassign tiers.
ROLES: dict[str, tuple[str, frozenset[str]]] = {
    "orchestrator": ("cheap", frozenset()),
    "scout": ("cheap", frozenset({"read"})),
    "analyst": ("medium", frozenset()),
    "executor": ("cheap", frozenset({"read", "write", "exec"})),
    "auditor": ("medium", frozenset()),
    "expert": ("strong", frozenset({"read"})),
}
STATUS_DIR = STRATEGY_FILES["pdca"]["status"]  # ".pdca/status" (kit.paths.STRATEGY_FILES)
RERUN_PERMISSIONS = frozenset({"read", "exec"})  # CHECK's re-runs: never write tools
REMOVED = {"max_revisions": "the source has no revision cap: the expert decides (or the run's caps)"}


@dataclass
class PdcaSettings:
    """pdca's options, each with its default; recorded under ``counters["params"]``."""

    max_attempts: int = 3  # auditor rejections per plan revision before the expert
    max_plan_rejections: int = 3  # PLAN->DO rejections in a row before the expert
    max_do_rejections: int = 2  # DO->CHECK rejections on one revision before the expert
    #: role sessions (orchestrator turns included) in the whole run: room for the source's whole
    #: escalation path, which needs 86 since CHECK's scout (a flawless cycle needs 12)
    max_role_calls: int = 100
    report_retries: int = 2  # a missing/malformed scout, auditor or expert report is asked again
    executor_steps: int = 20
    scout_steps: int = 8
    answer_steps: int = 3  # tool-less roles: steps to produce a valid answer
    status_writer: str = (
        "model"  # model: calls on the executor's tier (role status-writer), as in the source; kit
    )
    brief_safety_net: bool = False  # append the previous output when the orchestrator's brief misses it
    max_output_tokens: dict[str, int] = field(default_factory=dict)  # per role; default: the profile's

    @classmethod
    def from_ctx(cls, ctx: RunContext) -> PdcaSettings:
        """The run's options over the defaults (step caps from the run's limits); unknown or removed
        options are an error that says what to do."""
        steps = ctx.step_cap()
        defaults = asdict(cls(executor_steps=steps, scout_steps=min(8, steps)))
        removed = sorted(set(ctx.options) & set(REMOVED))
        if removed:
            raise ValueError(f"pdca option {removed[0]} was removed: {REMOVED[removed[0]]}; delete it")
        unknown = set(ctx.options) - set(defaults)
        if unknown:
            raise ValueError(f"unknown pdca options {sorted(unknown)}; valid: {', '.join(defaults)}")
        return cls(**{k: ctx.option(k, v) for k, v in defaults.items()})

    def steps(self, role: str) -> int:
        """The step cap of one session of ``role``."""
        caps = {"executor": self.executor_steps, "scout": self.scout_steps, "expert": self.scout_steps}
        return caps.get(role, 1 if role == "orchestrator" else self.answer_steps)
