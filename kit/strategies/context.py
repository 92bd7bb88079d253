"""What a strategy gets for one run: the task, its clone, the gateway, the recorder, the limits,
its options and prompts -- plus small factories for toolboxes and agents."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from kit.agent.budget import Budget
from kit.agent.loop import Agent, AgentConfig
from kit.agent.toolbox import Toolbox
from kit.config import Limits, Profile, Tier
from kit.model.gateway import Gateway
from kit.prompts import PromptBook
from kit.records.recorder import RunRecorder
from kit.sandbox.backends import default_sandbox, sandbox_env
from kit.tasks.packages import command_env
from kit.tasks.task import Task
from kit.tasks.workspace import Workspace

Guard = Callable[[str, dict], "str | None"]


@dataclass
class RunContext:
    task: Task
    workspace: Workspace
    gateway: Gateway
    recorder: RunRecorder
    profile: Profile
    prompts: PromptBook
    limits: Limits = field(default_factory=Limits)
    options: dict[str, Any] = field(default_factory=dict)
    budget: Budget | None = None
    journal_dir: Path | None = None  # survives a torn run (the run folder does not); workflow uses it
    sandbox: str = field(default_factory=default_sandbox)  # where every agent command runs
    tiers: dict[str, Tier] = field(default_factory=dict)  # the experiment's role -> tier map (effective)
    #: what the strategy has counted so far; the runner records it when the strategy raises (a returned
    #: StrategyResult carries its own ``counters``). See docs/records.md, ``## run.json``.
    counters: dict[str, Any] = field(default_factory=dict)

    def option(self, name: str, default: Any) -> Any:
        """A strategy knob from the experiment's ``strategy_options`` (the default otherwise)."""
        return self.options.get(name, default)

    def step_cap(self) -> int:
        """Steps per agent: the experiment's cap, tightened by the task's own limit if it has one."""
        task_cap = self.task.limits.max_steps
        return min(self.limits.max_steps, task_cap) if task_cap else self.limits.max_steps

    def tier(self, role: str, default: Tier) -> Tier:
        """The tier a role runs on: the experiment's role -> tier map (``tiers``, already resolved over
        the strategy's defaults and the profile's ``roles``), else the profile's ``roles``, else
        ``default``. Every strategy picks tiers through here (``agent`` calls it)."""
        return self.tiers.get(role) or self.profile.tier_for(role, default)

    def calls_left(self) -> int | None:
        """Model calls left in the run budget (``limits.max_model_calls``), or None without one."""
        return self.budget.remaining_calls() if self.budget is not None else None

    def toolbox(
        self, role: str, permissions: set[str] | frozenset[str], guard: Guard | None = None
    ) -> Toolbox:
        return Toolbox(
            self.workspace.root,
            permissions,
            recorder=self.recorder,
            role=role,
            timeout_s=self.limits.command_timeout_s,
            guard=guard,
            sandbox=self.sandbox,
            env=command_env(self.task.packages, self.task.repo_dir, self.workspace.root),
        )

    def command_env(self) -> dict[str, str]:
        """The environment of a command the kit runs in the clone for the agent (a test gate): the
        sandbox's, with the task's ``packages`` importing from the clone (:mod:`kit.tasks.packages`)."""
        return sandbox_env(command_env(self.task.packages, self.task.repo_dir, self.workspace.root))

    def agent(
        self,
        role: str,
        *,
        tier: Tier,
        permissions: set[str] | frozenset[str],
        system_prompt: str,
        max_steps: int | None = None,
        result_schema: type[BaseModel] | None = None,
        conversation: str | None = None,
        guard: Guard | None = None,
        max_output_tokens: int | None = None,
    ) -> Agent:
        """A fresh conversation for ``role`` on its tier (profile reassignments applied)."""
        config = AgentConfig(
            role=role,
            tier=self.tier(role, tier),
            system_prompt=system_prompt,
            max_steps=max_steps if max_steps is not None else self.limits.max_steps,
            max_format_errors=self.limits.max_format_errors,
            result_schema=result_schema,
            max_output_tokens=max_output_tokens,
            prompts=PromptBook("agent", self.prompts.overrides),  # the loop's messages, agent/<name>
        )
        return Agent(
            config,
            self.gateway,
            self.toolbox(role, permissions, guard),
            self.recorder,
            conversation=conversation,
            budget=self.budget,
        )

    def phase(self, name: str, detail: str = "") -> None:
        self.recorder.event("phase", "", name, detail)
