"""The oracle: a scripted model that plays any task's reference solution through every strategy's roles,
as each strategy's contract asks (``--profile oracle``, model ``scripted/oracle-all``).

A pipeline check, never a benchmark: it lets a user run their own (imported) tasks end to end under all
five strategies before paying for a model. Every run it plays should end ``done`` and solved; one that
does not points at the task (a reference solution its own test command rejects, a budget too small)
or at the pipeline, not at a strategy. What each role does:

* vibe, and workflow's implementer -- writes the solution's files (``solution/``), deletes the files
  ``solution/DELETED.txt`` lists, runs the task's test command, says it is done;
* linear -- each default skill step's work (reads the code, writes ``PLAN.md``, the whole solution in
  step 4, runs the test command in step 5, the diff in step 6); its reviewers report no issue;
* pdca -- one cast per run (:mod:`kit.model.oracle_pdca`): the orchestrator hands every brief on as
  written, the scout reports a fact, the analyst a plan with every field (expected result,
  constraints, assumptions, two acceptance criteria proved by the task's test command, one unit, means,
  risks, stop conditions), the executor applies the solution and proves it, CHECK's re-run session
  runs every command it is given and CHECK's scout reports each criterion's command, exit status and
  output size, the auditor finds every criterion met, the status writer writes what it is asked;
* workflow -- analyzers report clean (the solution is in), skeptics refute, the editor has nothing to fix;
* harness -- the initializer writes a one-feature list, ``init.sh`` and the progress file and commits; a
  coder session applies the solution, runs the tests, flips the feature and commits.

It knows the strategies only by the words of their prompts and the call context the gateway gives it
(role, strategy, run, task folder, test command, action mode), so the fake provider server
(``tests/support/fake_server.py``) plays the same over the wire. The proving command is the task's test
command less the own tests the task deselects (``own_tests_deselect``: their base versions fail with
the reference solution).
"""

from __future__ import annotations

import threading
from typing import Any

from kit.model import oracle_roles
from kit.model.oracle_pdca import PdcaCast
from kit.model.script_io import Request

#: the oracle profile's model; every view labels its runs a pipeline check (kit.analysis.report)
NAME = "oracle-all"
MODEL = f"scripted/{NAME}"


class Oracle:
    """The callable behind ``scripted/oracle-all``: dispatches on the call's strategy; one pdca cast per
    run (keyed by the run id; the other strategies' roles read their step from the conversation)."""

    def __init__(self) -> None:
        self._casts: dict[str, Any] = {}
        self._lock = threading.Lock()

    def cast(self, key: str, fresh: bool = False) -> Any:
        with self._lock:
            if fresh or key not in self._casts:
                self._casts[key] = PdcaCast()
            return self._casts[key]

    def __call__(self, request: Request) -> Any:
        strategy = request.context.get("strategy") or "vibe"
        if strategy == "pdca":
            return self.cast(str(request.context.get("run_id", "")))(request)
        roles = {
            "linear": oracle_roles.linear,
            "workflow": oracle_roles.workflow,
            "harness": oracle_roles.harness,
        }
        return roles.get(strategy, oracle_roles.vibe)(request)
