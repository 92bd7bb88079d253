"""The oracle's pdca cast (:mod:`kit.model.oracle`): every role of one PDCA run, played so that the run
passes each gate on its first cycle with the task's reference solution.

The roles are told apart by the gateway's call context (``role``) and the kit's own words: a status
update starts ``Event: `` and asks to ``Append to`` the status file; the executor session CHECK briefs
follows a hand-off that says ``CHECK re-run:`` and its brief lists each command as ``"command": "..."``;
CHECK's scout follows a hand-off that mentions ``CHECK re-runs' output`` and reads the raw output under
``## Raw output`` as ``$ command`` then ``[exit N; proves C1, C2]`` blocks
(``kit/prompts/pdca/*.md``, ``kit/strategies/pdca``).
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

from kit.model.actions import FINISH, render
from kit.model.oracle_roles import _first_file, apply_actions, proving_command
from kit.model.script_io import Request


def plan(command: str, first_file: str, task: str = "the task") -> dict[str, Any]:
    """A plan with every field the analyst's contract asks for, proved by ``command``; its unit names
    ``task`` (so every brief that carries it tells its task apart, as a real plan's would)."""
    criteria = [
        {"id": "C1", "text": "the task's change is made as its prompt specifies", "how_verified": command,
         "negative_case": "the behaviour the task asks for is missing"},
        {"id": "C2", "text": "the project's own tests still pass", "how_verified": command,
         "negative_case": "an existing test fails"},
    ]  # fmt: skip
    return {
        "expected_result": f"the change the task asks for, in {first_file} and the files it needs",
        "constraints": ["keep the project's public interface", "keep its own tests passing"],
        "assumptions": ["the task's test command is how the project is tested"],
        "acceptance_criteria": criteria,
        "units": [
            {"id": "U1", "expected_result": f"{task}: the change made and tested", "criteria": ["C1", "C2"]}
        ],
        "means_and_access": f"{first_file}; {command}",
        "risks": ["an edge case the prompt names is missed"],
        "stop_conditions": ["the tests cannot run"],
    }


class PdcaCast:
    """One PDCA run's roles (a run is sequential: the latest hand-off says which session comes next)."""

    def __init__(self) -> None:
        self.handoff = ""
        self.briefs = 0
        self._lock = threading.Lock()

    def __call__(self, req: Request) -> Any:
        role, mode = req.context.get("role", ""), req.context.get("action_mode") or "native"
        if req.last_user.startswith("Event: ") and "\nAppend to " in req.last_user:  # a status update
            return {"content": req.last_user.split(":\n\n", 1)[-1]}
        if role == "orchestrator":
            with self._lock:
                self.handoff, self.briefs = req.last_user, self.briefs + 1
                return f"Brief {self.briefs}:\n{req.last_user}"
        step = sum(1 for m in req.messages if m["role"] == "assistant")
        first_user = req.first_user
        if role == "executor" and "CHECK re-run:" in self.handoff:
            return self.check_session(first_user, mode, step)
        if role == "scout" and "CHECK re-runs' output" in self.handoff:
            return self.check_scout(req, first_user, mode, step)
        handler = {"scout": self.scout, "analyst": self.analyst, "auditor": self.auditor,
                   "expert": self.expert, "executor": self.executor}.get(role, self.executor)  # fmt: skip
        return handler(req, mode, step)

    def check_session(self, brief: str, mode: str, step: int) -> Any:
        """The executor's CHECK session: each command its brief lists, run as written, then the report."""
        found = re.findall(r'"command": ("(?:[^"\\]|\\.)*")', brief)
        commands = list(dict.fromkeys(json.loads(c) for c in found))
        if step < len(commands):
            return render(mode, "run", {"command": commands[step]}, "Re-run.")
        evidence = [{"command": c, "exit_code": 0} for c in commands]
        return render(mode, FINISH, {"unit": "", "done": True, "evidence": evidence}, "Re-ran.")

    def check_scout(self, req: Request, brief: str, mode: str, step: int) -> Any:
        """CHECK's scout: per criterion the command, its exit status, how much output, a pointer."""
        pointer = f"{_first_file(req.context)}:1"
        if step == 0:
            return render(mode, "read_file", {"path": _first_file(req.context)}, "Look.")
        facts = []
        for block in re.split(r"\n\n(?=\$ )", brief.split("\n## Raw output", 1)[-1]):
            head = re.search(r"^\$ (.*)\n\[(.*?); proves (.*?)\]", block, flags=re.MULTILINE)
            if head:
                code = re.match(r"exit (\d+)", head.group(2))
                facts += [
                    {"criterion": cid, "command": head.group(1), "exit_code": int(code.group(1)) if code else None,
                     "numbers": f"{block.count(chr(10)) - 1} lines of output", "pointers": [pointer]}
                    for cid in head.group(3).split(", ")
                ]  # fmt: skip
        return render(mode, FINISH, {"criteria": facts}, "Facts.")

    def scout(self, req: Request, mode: str, step: int) -> Any:
        first = _first_file(req.context)
        if step == 0:
            return render(mode, "read_file", {"path": first}, "Look.")
        fact = {"pointer": f"{first}:1", "fact": f"{first} is where the change goes"}
        return render(mode, FINISH, {"facts": [fact]}, "Facts.")

    def analyst(self, req: Request, mode: str, step: int) -> Any:
        task = Path(req.context.get("task_path") or "the task").name
        return {"content": json.dumps(plan(proving_command(req.context), _first_file(req.context), task))}

    def auditor(self, req: Request, mode: str, step: int) -> Any:
        evidence = f"{proving_command(req.context)} -> exit 0"
        criteria = [{"id": c, "status": "met", "evidence": evidence} for c in ("C1", "C2")]
        return {"content": json.dumps({"criteria": criteria, "defects": []})}

    def expert(self, req: Request, mode: str, step: int) -> Any:
        decision = {"decision": "stop", "reasons": ["the oracle never needs the expert"], "confidence": 0.8}
        return render(mode, FINISH, decision, "Decide.")

    def executor(self, req: Request, mode: str, step: int) -> Any:
        actions = apply_actions(req.context)
        command = proving_command(req.context)
        if step < len(actions):
            tool, args = actions[step]
            return render(mode, tool, args, f"{tool} ({step + 1} of {len(actions)})")
        if step == len(actions):
            return render(mode, "run", {"command": command}, "Test.")
        changed = [a["path"] for t, a in actions if t == "write_file"]
        evidence = [{"command": command, "exit_code": 0, "numbers": "all passed"}]
        report = {"unit": "", "changed": changed, "done": True, "evidence": evidence}
        return render(mode, FINISH, report, "Report.")
