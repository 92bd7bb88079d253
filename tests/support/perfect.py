"""A perfect scripted model for every strategy, on micro-slugify: one callable that plays each
strategy's roles the way a flawless model would (it dispatches on the call context's ``strategy`` and
keeps one cast per run). For tests of shipped experiments: can each strategy reach its own success end
within the experiment's limits? Pipeline validation, never a benchmark.

* vibe     -- the oracle: writes the reference solution, runs the tests, says it is done;
* linear   -- does what each default skill step needs (``tests/strategies/test_linear.py``'s diligent);
* pdca     -- the scripted PDCA cast with a complete plan and a passing verdict (``tests/support/pdca.py``);
* workflow -- implements the solution, every analyzer reports clean (``tests/support/workflow.py``);
* harness  -- an initializer that writes a one-feature list, init.sh and the progress file and commits;
  a coder that writes the solution, flips the feature and commits.
"""

from __future__ import annotations

import json
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
    """The initializer's four actions, or a coder session's four (orient, implement, flip, commit)."""
    ws, step, mode = Path(request.context["workspace"]), _steps(request), _mode(request)
    if request.context["role"] == "initializer":
        feature = {"id": "F1", "category": "functional", "description": "slugify follows the specification",
                   "steps": ["python -m pytest -q"], "passes": False}  # fmt: skip
        plan = [
            ("write_file", {"path": FEATURES, "content": json.dumps([feature], indent=2)}),
            ("write_file", {"path": "init.sh", "content": "#!/bin/sh\npython -m pytest -q\n"}),
            ("write_file", {"path": "harness-progress.md", "content": "# Progress\n- initializer\n"}),
            ("run", {"command": f"{COMMIT} 'harness: feature list'"}),
        ]
    else:
        (path, content), *_ = solution_files(request.context["task_path"])
        flipped = [{**f, "passes": True} for f in json.loads((ws / FEATURES).read_text())]
        plan = [
            ("write_file", {"path": path, "content": content}),
            ("run", {"command": "python -m pytest -q"}),
            ("write_file", {"path": FEATURES, "content": json.dumps(flipped, indent=2)}),
            ("run", {"command": f"echo '- coder: F1 done' >> harness-progress.md && {COMMIT} F1"}),
        ]
    if step < len(plan):
        tool, args = plan[step]
        return render(mode, tool, args, f"step {step}")
    return render(mode, FINISH, {"summary": "Done."}, "Done.")


class Perfect:
    """The callable the scripted profile registers: one fresh cast per run (keyed by run id)."""

    def __init__(self) -> None:
        self._casts: dict[str, Any] = {}
        self._lock = threading.Lock()

    def _cast(self, strategy: str, run_id: str, task_path: str) -> Any:
        from tests.strategies.test_linear import diligent  # the linear tests' step-by-step policy

        with self._lock:
            if run_id not in self._casts:
                self._casts[run_id] = {
                    "vibe": lambda: policies.oracle,
                    "linear": lambda: diligent(Path(task_path)),
                    "pdca": Cast,
                    "workflow": lambda: WorkflowPolicy(verdicts=["clean"]),
                    "harness": lambda: harness,
                }[strategy]()
            return self._casts[run_id]

    def __call__(self, request: Request) -> Any:
        context = request.context
        return self._cast(context["strategy"], context.get("run_id", ""), context["task_path"])(request)
