"""A scripted PDCA cast for tests: one callable policy that plays every role (dispatching on the
call's role), driven by lists of plans, verdicts, executor reports and expert decisions, in any
action mode. It records each role's briefs so tests can check what a role was told."""

from __future__ import annotations

import copy
import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kit.config import TIERS, Limits, ModelSpec, PriceSheet, Profile
from kit.model import scripted
from kit.model.actions import FINISH, render
from kit.model.policies import solution_files
from kit.records.schema import CALLS, EVENTS, read_jsonl
from kit.strategies import pdca
from kit.strategies.context import RunContext
from kit.strategies.pdca.status import LOG_LINE
from kit.usage import ModelPrice
from tests.support.context import run_context

# the proving command of the scripted plans: quick (CHECK re-runs it) and it fails on a broken textkit
TEST_CMD = "python -c \"import textkit; assert textkit.slugify('Hello, World!') == 'hello-world'\""
CRITERIA = [
    {
        "id": "C1",
        "text": "slugify follows the specification",
        "how_verified": TEST_CMD,
        "negative_case": "a hyphen at either end",
    },
    {
        "id": "C2",
        "text": "word_count is unchanged",
        "how_verified": TEST_CMD,
        "negative_case": "word_count changes",
    },
]


def plan(units: list[dict] | None = None, **changes: Any) -> dict[str, Any]:
    """A complete plan (one unit covering both criteria unless ``units`` is given)."""
    data = {
        "expected_result": "slugify implemented in textkit.py",
        "constraints": ["do not change word_count"],
        "assumptions": ["ASCII only"],
        "acceptance_criteria": copy.deepcopy(CRITERIA),
        "units": units
        if units is not None
        else [{"id": "U1", "expected_result": "slugify written", "criteria": ["C1", "C2"]}],
        "means_and_access": "textkit.py; python -m pytest -q",
        "risks": ["regex edge cases"],
        "stop_conditions": ["tests cannot run"],
    }
    data.update(changes)
    return data


def verdict(met: tuple[str, ...] = ("C1", "C2"), defects: tuple[str, ...] = (), route: str = "DO") -> dict:
    """An auditor verdict: ``met`` criteria with evidence, the others unmet, one defect per key."""
    return {
        "criteria": [
            {
                "id": c["id"],
                "status": "met" if c["id"] in met else "unmet",
                "evidence": f"{TEST_CMD} -> 4 passed",
            }
            for c in CRITERIA
        ],
        "defects": [
            {"key": k, "severity": "major", "route": route, "description": f"problem {k}"} for k in defects
        ],
    }


PASS = verdict()


@dataclass
class Cast:
    plans: list[Any] = field(default_factory=lambda: [plan()])
    verdicts: list[Any] = field(default_factory=lambda: [PASS])
    decisions: list[dict] = field(default_factory=lambda: [{"decision": "stop", "reasons": ["no way"]}])
    reports: list[dict | None] = field(default_factory=list)  # executor report overrides, per session
    first_action: dict[str, tuple[str, dict]] = field(default_factory=dict)  # role -> tool call first
    after_test: dict[int, list[tuple[str, dict]]] = field(default_factory=dict)  # executor session -> actions
    status_replies: list[str] = field(default_factory=list)  # status-writer replies (default: the text asked)
    brief_text: str | None = None  # what the orchestrator writes (default: it copies everything)
    empty_scout_reports: int = 0  # the first N scout reports have no facts
    task_tests: bool = False  # prove with the task's own test command (any task), not TEST_CMD
    check_first: tuple[str, dict] | None = None  # the CHECK session's first action (before its runs)
    check_runs: bool = True  # False: the CHECK session reports without running anything
    check_facts: list[Any] = field(default_factory=list)  # CHECK scout report overrides, per session
    briefs: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    status_updates: list[str] = field(default_factory=list)
    requests: list[scripted.Request] = field(default_factory=list)  # every request, as the model saw it
    handoff: str = ""  # the orchestrator's latest hand-off: which session comes next (a run is sequential)

    def __call__(self, req: scripted.Request) -> Any:
        self.requests.append(req)
        role, mode = req.context["role"], req.context.get("action_mode") or "native"
        if req.last_user.startswith("Event: ") and "\nAppend to " in req.last_user:  # a status update
            asked = req.last_user.split(":\n\n", 1)[1]
            self.status_updates.append(asked)
            return {"content": self.status_replies.pop(0) if self.status_replies else asked}
        # the orchestrator is one conversation: every turn is a hand-off (step 0 of its own)
        step = 0 if role == "orchestrator" else sum(1 for m in req.messages if m["role"] == "assistant")
        first_user = str(next((m["content"] for m in req.messages if m["role"] == "user"), ""))
        if role == "orchestrator":
            self.handoff = req.last_user
        if role == "executor" and "CHECK re-run:" in self.handoff:  # the session CHECK's hand-off briefed
            if step == 0:
                self.briefs["executor-check"].append(req.last_user)
            return self.check_session(first_user, mode, step - (self.check_first is not None))
        check = role == "scout" and "CHECK re-runs' output" in self.handoff  # CHECK's scout
        if step == 0:
            self.briefs[role].append(req.last_user)
            if check:
                self.briefs["scout-check"].append(req.last_user)
        if role in self.first_action and step == 0:
            tool, args = self.first_action[role]
            return render(mode, tool, args, f"{role} tries {tool}")
        step -= role in self.first_action
        return self.check_scout(first_user, mode, step) if check else getattr(self, role)(req, mode, step)

    @staticmethod
    def _next(items: list[Any]) -> Any:
        return items.pop(0) if len(items) > 1 else items[0]

    def orchestrator(self, req, mode, step):
        head = f"Brief {len(self.briefs['orchestrator'])}:"
        return f"{head} {self.brief_text}" if self.brief_text is not None else f"{head}\n{req.last_user}"

    def check_session(self, brief: str, mode: str, step: int) -> Any:
        """The executor's CHECK session: each command its brief lists (``"command": "..."``) run, then
        the report."""
        found = re.findall(r'"command": ("(?:[^"\\]|\\.)*")', brief) if self.check_runs else []
        commands = list(dict.fromkeys(json.loads(c) for c in found))
        if step < 0 and self.check_first is not None:
            return render(mode, *self.check_first, "First this.")
        if step < len(commands):
            return render(mode, "run", {"command": commands[step]}, "Re-run.")
        evidence = [{"command": c, "exit_code": 0} for c in commands]
        return render(mode, FINISH, {"unit": "", "done": True, "evidence": evidence}, "Re-ran.")

    def scout(self, req, mode, step):
        if step == 0:
            return render(mode, "read_file", {"path": "textkit.py"}, "Look.")
        facts = {"facts": [{"pointer": "textkit.py:9", "fact": "slugify raises NotImplementedError"}]}
        if self.empty_scout_reports > 0:
            self.empty_scout_reports -= 1
            facts = {"facts": []}
        return render(mode, FINISH, facts, "Facts.")

    def check_scout(self, brief: str, mode: str, step: int) -> Any:
        """CHECK's scout: reads the raw output the kit appended to its brief (``$ command`` then
        ``[status; proves C1, C2]``) and reports per criterion the command, exit status, how much
        output there was and a pointer -- never the output itself, never a verdict."""
        if step == 0:
            return render(mode, "read_file", {"path": "textkit.py"}, "Look.")
        if self.check_facts:
            item = self.check_facts.pop(0)
            return {"content": item} if isinstance(item, str) else render(mode, FINISH, item, "Facts.")
        raw = brief.split("\n## Raw output", 1)[-1]
        facts = []
        for block in re.split(r"\n\n(?=\$ )", raw):
            head = re.search(r"^\$ (.*)\n\[(.*?); proves (.*?)\]", block, flags=re.MULTILINE)
            if head:
                code = re.match(r"exit (\d+)", head.group(2))
                for cid in head.group(3).split(", "):
                    facts.append(
                        {
                            "criterion": cid,
                            "command": head.group(1),
                            "exit_code": int(code.group(1)) if code else None,
                            "numbers": f"{block.count(chr(10)) - 1} lines of output",
                            "pointers": ["textkit.py:9"],
                        }
                    )
        return render(mode, FINISH, {"criteria": facts}, "Facts.")

    def command(self, req) -> str:
        return req.context["test_command"] if self.task_tests else TEST_CMD

    def analyst(self, req, mode, step):
        item = self._next(self.plans)
        text = item if isinstance(item, str) else json.dumps(item)
        return {"content": text.replace(json.dumps(TEST_CMD)[1:-1], json.dumps(self.command(req))[1:-1])}

    def auditor(self, req, mode, step):
        return {"content": json.dumps(self._next(self.verdicts))}

    def expert(self, req, mode, step):
        return render(mode, FINISH, {"confidence": 0.8, **self._next(self.decisions)}, "Decide.")

    def executor(self, req, mode, step):
        files = solution_files(req.context["task_path"])
        if step < len(files):
            path, content = files[step]
            return render(mode, "write_file", {"path": path, "content": content}, f"Write {path}.")
        session = len(self.briefs["executor"]) - 1
        if step == len(files):
            return render(mode, "run", {"command": self.command(req)}, "Test.")
        extra = self.after_test.get(session, [])
        if step <= len(files) + len(extra):
            tool, args = extra[step - len(files) - 1]
            return render(mode, tool, args, f"Then {tool}.")
        override = self.reports[session] if session < len(self.reports) else None
        report = {
            "unit": "",
            "changed": [p for p, _ in files],
            "done": True,
            "evidence": [{"command": self.command(req), "exit_code": 0, "numbers": "4 passed"}],
            **(override or {}),
        }
        return render(mode, FINISH, report, "Report.")


def scripted_profile(policy: Any, mode: str = "native") -> tuple[Profile, PriceSheet]:
    model = scripted.register(policy)
    sheet = PriceSheet(
        name="t", prices={"p": ModelPrice(input=1, output=2, cache_read=0.1, cache_write=1.25)}
    )
    tiers = {t: ModelSpec(model=model, price="p", action_mode=mode) for t in TIERS}
    return Profile(name="t", price_sheet="t", tiers=tiers), sheet


@dataclass
class Outcome:
    result: Any
    ctx: RunContext
    cast: Cast

    @property
    def root(self) -> Path:
        return self.ctx.workspace.root

    @property
    def status_text(self) -> str:
        return (self.root / ".pdca" / "status" / "micro-slugify-1.md").read_text()

    @property
    def log(self) -> list[tuple[str, ...]]:
        """Progress-log rows: (time, phase, r, n, max, event, evidence)."""
        return [m.groups() for line in self.status_text.splitlines() if (m := LOG_LINE.match(line))]

    def events(self, kind: str | None = None) -> list[dict]:
        rows = read_jsonl(self.ctx.recorder.run_dir / EVENTS)
        return [e for e in rows if kind is None or e["kind"] == kind]

    @property
    def calls(self) -> list[dict]:
        return read_jsonl(self.ctx.recorder.run_dir / CALLS)

    def sessions(self, role: str) -> int:
        return len(self.cast.briefs[role])


def run_cast(
    tmp_path: Path,
    cast: Cast,
    mode: str = "native",
    max_model_calls: int | None = None,
    tiers: dict[str, str] | None = None,
    overrides: dict[str, str] | None = None,
    **options: Any,
) -> Outcome:
    profile, sheet = scripted_profile(cast, mode)
    ctx = run_context(
        tmp_path,
        "pdca",
        profile,
        sheet,
        gateway_context={"task_path": ..., "test_command": ..., "workspace": ...},
        limits=Limits(max_steps=10),
        options=options,
        budget={"max_model_calls": max_model_calls},
        overrides=overrides,
    )
    ctx.tiers = dict(tiers or {})  # type: ignore[arg-type]
    recorder = ctx.recorder
    result = pdca.run(ctx)
    recorder.close()
    return Outcome(result, ctx, cast)
