"""A perfect scripted model for every strategy, on micro-slugify (or, with ``any_task``, on any task
whose reference solution it can write: the real-repos suite's): one callable that plays each
strategy's roles the way a flawless model would (it dispatches on the call context's ``strategy`` and
keeps one cast per run). For tests of shipped experiments: can each strategy reach its own success end
within the experiment's limits? Pipeline validation, never a benchmark.

* vibe     -- the oracle: writes the reference solution, runs the tests, says it is done;
* linear   -- does what each default skill step needs (``tests/strategies/test_linear.py``'s diligent);
* pdca     -- the scripted PDCA cast with a complete plan and a passing verdict (``tests/support/pdca.py``);
* workflow -- implements the solution, every analyzer reports clean (``tests/support/workflow.py``);
* harness  -- an initializer that writes a one-feature list, init.sh and the progress file and commits;
  a coder that writes the solution, flips the feature and commits.

With ``any_task`` every role writes all the solution's files and proves with the task's own test
command (linear: :func:`any_task_skill`; pdca: the cast's ``task_tests``); files the solution deletes
are left in place.
"""

from __future__ import annotations

import json
import shlex
import threading
from pathlib import Path
from typing import Any

from kit.model import policies
from kit.model.actions import FINISH, render
from kit.model.policies import solution_files
from kit.model.scripted import Request
from tests.support.pdca import Cast
from tests.support.workflow import WorkflowPolicy

FEATURES = "feature_list.json"
COMMIT = "git add -A && git -c user.name=t -c user.email=t@example.com commit -qm"


def _mode(request: Request) -> str:
    return request.context.get("action_mode") or "native"


def _steps(request: Request) -> int:
    return sum(m.get("role") == "assistant" for m in request.messages)


def harness(request: Request) -> dict[str, Any]:
    """The initializer's four actions, or a coder session's (orient, implement, flip, commit)."""
    ws, step, mode = Path(request.context["workspace"]), _steps(request), _mode(request)
    test = request.context.get("test_command") or "python -m pytest -q"
    if request.context["role"] == "initializer":
        feature = {"id": "F1", "category": "functional", "description": "the task is done as specified",
                   "steps": [test], "passes": False}  # fmt: skip
        plan = [
            ("write_file", {"path": FEATURES, "content": json.dumps([feature], indent=2)}),
            ("write_file", {"path": "init.sh", "content": f"#!/bin/sh\n{test}\n"}),
            ("write_file", {"path": "harness-progress.md", "content": "# Progress\n- initializer\n"}),
            ("run", {"command": f"{COMMIT} 'harness: feature list'"}),
        ]
    else:
        files = solution_files(request.context["task_path"])
        flipped = [{**f, "passes": True} for f in json.loads((ws / FEATURES).read_text())]
        plan = [("write_file", {"path": path, "content": content}) for path, content in files]
        plan += [
            ("run", {"command": test}),
            ("write_file", {"path": FEATURES, "content": json.dumps(flipped, indent=2)}),
            ("run", {"command": f"echo '- coder: F1 done' >> harness-progress.md && {COMMIT} F1"}),
        ]
    if step < len(plan):
        tool, args = plan[step]
        return render(mode, tool, args, f"step {step}")
    return render(mode, FINISH, {"summary": "Done."}, "Done.")


def any_task_skill(task_path: Path, test_command: str) -> Any:
    """linear on any task: each default step's work, the whole reference solution in step 4."""
    from tests.strategies.test_linear import scripted_skill

    files = solution_files(str(task_path))
    return scripted_skill(
        {
            2: [("read_file", {"path": files[0][0]})],
            3: [("write_file", {"path": "PLAN.md", "content": "1. make the change\n2. test it\n"})],
            4: [("write_file", {"path": path, "content": content}) for path, content in files],
            5: [("run", {"command": test_command})],
            6: [("run", {"command": "git diff --stat"})],
        }
    )


class ProvingCast(Cast):
    """The PDCA cast on any task: it proves with the task's test command less the own tests the task
    deselects (their base versions fail with the reference solution -- tests the change rewrote, or
    ones that cannot pass here), as a perfect agent that updated those tests would see it."""

    def command(self, req: Request) -> str:
        from kit.tasks.task import load_task

        deselect = load_task(req.context["task_path"]).own_tests_deselect
        return " ".join([req.context["test_command"], *(f"--deselect={shlex.quote(n)}" for n in deselect)])


class Perfect:
    """The callable the scripted profile registers: one fresh cast per run (keyed by run id)."""

    def __init__(self, any_task: bool = False) -> None:
        self._casts: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.any_task = any_task

    def _cast(self, strategy: str, run_id: str, task_path: str, test_command: str) -> Any:
        from tests.strategies.test_linear import diligent  # the linear tests' step-by-step policy

        with self._lock:
            if run_id not in self._casts:
                self._casts[run_id] = {
                    "vibe": lambda: policies.oracle,
                    "linear": lambda: (
                        any_task_skill(Path(task_path), test_command)
                        if self.any_task
                        else diligent(Path(task_path))
                    ),
                    "pdca": lambda: ProvingCast(task_tests=True) if self.any_task else Cast(),
                    "workflow": lambda: WorkflowPolicy(verdicts=["clean"]),
                    "harness": lambda: harness,
                }[strategy]()
            return self._casts[run_id]

    def __call__(self, request: Request) -> Any:
        context = request.context
        test = context.get("test_command") or "python -m pytest -q"
        return self._cast(context["strategy"], context.get("run_id", ""), context["task_path"], test)(request)
