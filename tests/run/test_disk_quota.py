"""Each run's clone has a byte and file quota (``limits.disk_quota_mb`` / ``disk_quota_files``,
:mod:`kit.sandbox.quota`): an agent that writes past it ends its run with stop reason ``disk-quota``,
the run is scored on what it has, the other runs go on, and resume keeps it. ``kit run`` refuses to
start when the results disk cannot hold the experiment's records. Before: no quota at all -- one
agent filled the results disk, the experiment stopped on the first "disk full" and every resume
redid that run."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from kit.config import Limits
from kit.errors import ResultsError
from kit.model import policies, scripted
from kit.model.actions import FINISH, render
from kit.run.runner import run_experiment
from kit.sandbox.quota import quota_mechanism
from tests.support.helpers import experiment, run_json, write_profile

FILL = (
    "python -c \"import os\nfor i in range(12):\n    open(f'fill{i}.bin', 'wb').write(os.urandom(8 << 20))\""
)


def _agent(request):
    """Run 1 fills its clone (96 MB against a 32 MB quota) and then tries to finish; run 2 solves."""
    if not request.context.get("run_id", "").endswith("r1"):
        return policies.oracle(request)
    mode = request.context.get("action_mode") or "native"
    said = sum("Fill it." in str(m.get("content") or "") + str(m.get("tool_calls") or "")
               for m in request.messages if m.get("role") == "assistant")  # fmt: skip
    if not said:
        return render(mode, "run", {"command": FILL}, "Fill it.")
    return render(mode, FINISH, {"summary": "Done."}, "Done.")


def test_a_run_past_its_disk_quota_ends_so_is_scored_and_the_experiment_goes_on(tmp_path):
    model = scripted.register(_agent, "disk-filler")
    profile = write_profile(tmp_path, model, "native")
    limits = Limits(max_steps=12, disk_quota_mb=32, disk_quota_files=2000)
    exp = experiment("quota", profile, ["micro-slugify"], ["vibe"], repeats=2, limits=limits)
    out = run_experiment(exp, results_dir=tmp_path / "results", progress=False)
    r1, r2 = sorted((out / "runs").iterdir())
    first = run_json(r1)
    assert (first["outcome"], first["stop_reason"]) == ("budget", "disk-quota"), (
        first["outcome"],
        first["error"],
    )
    assert first["score"]["requirements_total"] == 7 and first["error"] is None
    solved = run_json(r2)
    assert solved["outcome"] == "done" and solved["score"]["requirements_failed"] == 0, solved["error"]
    if quota_mechanism() == "loop":  # the clone was a file system of its own: 32 MB at most
        took = re.search(r"the clone took (\d+) MB", (r1 / "events.jsonl").read_text())
        assert took and int(took.group(1)) < 40  # and, past 16 MB, removed once scored
        assert not (r1 / "repo.img").exists() and (r2 / "repo.img").is_file()  # a small one is kept
        assert not os.path.ismount(r1 / "repo") and not os.path.ismount(r2 / "repo")

    run_experiment(exp, results_dir=tmp_path / "results", progress=False)  # resume: nothing redone
    assert run_json(r1)["started_at"] == first["started_at"]

    if quota_mechanism() == "loop":  # a kit killed mid-run leaves the clone mounted: the redo copes
        (r2 / "repo").mkdir(exist_ok=True)
        subprocess.run(["mount", "-o", "loop", str(r2 / "repo.img"), str(r2 / "repo")], check=True)
        (r2 / "run.json").unlink()
        run_experiment(exp, results_dir=tmp_path / "results", progress=False)
        assert run_json(r2)["outcome"] == "done" and not os.path.ismount(r2 / "repo")


def test_kit_run_refuses_to_start_when_the_results_disk_cannot_hold_the_records(tmp_path, monkeypatch):
    import shutil

    profile = write_profile(tmp_path, "scripted/oracle", "native")
    exp = experiment("small-disk", profile, ["micro-slugify"], ["vibe"], repeats=3)
    real = shutil.disk_usage

    def nearly_full(path):
        usage = real(path)
        return usage._replace(free=200 * 2**20)  # 200 MB free

    monkeypatch.setattr(shutil, "disk_usage", nearly_full)
    with pytest.raises(
        ResultsError, match=r"has 0\.2 GB free, and this experiment needs about \d\.\d GB.* 2 in flight x"
    ):  # (a playing run and the run its slot played before, being scored)
        run_experiment(exp, results_dir=tmp_path / "results", progress=False)
    assert not any((tmp_path / "results" / "small-disk" / "runs").iterdir())
