"""The agent's view names nothing of the experiment: a command an agent runs (the ``run`` tool, through
the runner) sees its clone at /work/repo and the kit's interpreter at /opt/venv, and nothing it can
read there -- its working folder, its variables, the interpreter's prefix, ``pyvenv.cfg``, scripts and
site-packages (the editable install's finder included) -- names the kit's checkout, the task, the
strategy or the experiment. Before: ``pwd`` printed ``.../runs/<task>__<strategy>__...`` and the
editable finder's ``MAPPING`` the checkout."""

from __future__ import annotations

import sys

import pytest

from kit.model import scripted
from kit.model.actions import FINISH, render
from kit.paths import REPO_ROOT
from kit.run.runner import run_experiment
from kit.sandbox.backends import default_sandbox
from tests.support.helpers import experiment, run_json, write_profile

pytestmark = pytest.mark.skipif(default_sandbox() != "bwrap", reason="the agent's view is a sandbox's")

EXPERIMENT = "canary-exp-7f3a"
SECRETS = [str(REPO_ROOT), str(sys.prefix), "micro-slugify", "vibe", EXPERIMENT, "runs/"]
LOOK = (
    "SP=$(python -c 'import site; print(site.getsitepackages()[0])'); "
    "{ pwd; env; python -c 'import sys; print(sys.prefix, sys.executable, sys.path)'; "
    'ls -la . .. /work /opt/venv "$SP"; cat /opt/venv/pyvenv.cfg "$SP"/*.pth "$SP"/__editable__*; '
    'cat "$SP"/*.dist-info/direct_url.json; head -qn1 /opt/venv/bin/*; '
    "python -m pytest --co -q 2>&1 | tail -3; } > /tmp/view.txt 2>&1; "
    'echo PWD=$(pwd); echo FINDER=$(cat "$SP"/__editable__*finder* 2>/dev/null | wc -c); '
    "echo LINES=$(wc -l < /tmp/view.txt); echo HITS=$(grep -a -c -F -f /tmp/secrets /tmp/view.txt)"
)


def _agent(seen: list[str]):
    def policy(request):
        mode = request.context.get("action_mode") or "native"
        results = [str(m.get("content")) for m in request.messages if m.get("role") == "tool"]
        if results:
            seen.extend(results)
            return render(mode, FINISH, {"summary": "Looked."}, "Looked.")
        secrets = ("\n".join(SECRETS) + "\n").encode().hex()  # hex: the command's text is not rewritten
        write = f"python -c \"open('/tmp/secrets', 'wb').write(bytes.fromhex('{secrets}'))\""
        return render(mode, "run", {"command": f"{write}; {LOOK}"}, "Look.")

    return policy


def test_a_command_the_agent_runs_sees_nothing_of_the_experiment(tmp_path):
    seen: list[str] = []
    profile = write_profile(tmp_path, scripted.register(_agent(seen), "looker"), "native")
    exp = experiment(EXPERIMENT, profile, ["micro-slugify"], ["vibe"])
    out = run_experiment(exp, results_dir=tmp_path / "results", progress=False)
    (run_dir,) = (out / "runs").iterdir()
    assert run_json(run_dir)["sandbox"] == "bwrap"
    (result,) = seen
    assert "PWD=/work/repo" in result and "FINDER=0" in result, result
    lines = int(result.split("LINES=")[1].split()[0])
    assert lines > 100, result  # it saw the site-packages listing, the variables ...
    assert "HITS=0" in result, result  # ... and none of it names the checkout, task, strategy or experiment
    assert not any(s in result for s in SECRETS), result
