"""A full disk loses nothing that was finished. Every agent here fills its clone's quota (96 MB); the
results folder is a small disk of its own (400 MB, loop-mounted). A finished run's clone is removed
once it is scored when it takes more than 16 MB (kit.sandbox.quota.KEPT_CLONE_BYTES), so four such
runs are all recorded; then a disk filled from outside during run 6 stops the experiment with run 5
recorded and run 6 torn, and once space is freed the same command redoes run 6 alone.

Before: each finished run left its 96 MB image on the results disk, which the pre-run space check did
not count; the fourth run filled the disk and the experiment stopped with runs unrecorded."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time

import pytest

from kit.config import Limits
from kit.errors import ResultsError
from kit.model import scripted
from kit.model.actions import FINISH, render
from kit.run.runner import run_experiment
from kit.sandbox.quota import quota_mechanism
from tests.support.helpers import experiment, run_json, write_profile

pytestmark = pytest.mark.skipif(
    quota_mechanism() != "loop", reason="needs the loop quota (root, loop devices) for a disk of its own"
)

FILL = (
    'python -c "import os\n'
    "for i in range(100):\n"
    "    try:\n"
    "        with open(f'fill{i}.bin', 'wb') as f:\n"
    "            for _ in range(8):\n"
    "                f.write(bytes(1 << 20))\n"
    "    except OSError:\n"
    '        break"'
)
DISK_MB = 400


def _fill_results_disk(folder) -> None:
    """Another process fills the results disk to its last byte (here: the test, in the kit's process)."""
    with open(folder / "filler.bin", "ab", buffering=0) as fh:
        for chunk in (1 << 20, 1 << 16, 4096, 1024, 1):
            with contextlib.suppress(OSError):
                while True:
                    fh.write(bytes(chunk))


def _agent(results):
    filled = []

    def policy(request):
        mode = request.context.get("action_mode") or "native"
        if any("Fill it." in str(m.get("content") or "") + str(m.get("tool_calls") or "")
               for m in request.messages if m.get("role") == "assistant"):  # fmt: skip
            return render(mode, FINISH, {"summary": "Done."}, "Done.")
        run_id = request.context.get("run_id", "")
        if run_id.endswith("r6") and not filled:
            run5 = results / "full" / "runs" / run_id.replace("r6", "r5") / "run.json"
            for _ in range(600):  # run 5 recorded first (it is scored while run 6 plays)
                if run5.exists():
                    break
                time.sleep(0.2)
            _fill_results_disk(results)
            filled.append(run_id)
        return render(mode, "run", {"command": FILL}, "Fill it.")

    return policy


@contextlib.contextmanager
def small_disk(tmp_path):
    image, mount = tmp_path / "disk.img", tmp_path / "results"
    mount.mkdir()
    with open(image, "wb") as fh:
        fh.truncate(DISK_MB * 2**20)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-O", "^has_journal", "-m", "0", str(image)], check=True)
    subprocess.run(["mount", "-o", "loop", str(image), str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_disk_filled_mid_experiment_keeps_every_finished_run(tmp_path):
    with small_disk(tmp_path) as results:
        model = scripted.register(_agent(results), "quota-filler")
        profile = write_profile(tmp_path, model, "native")
        limits = Limits(max_steps=6, disk_quota_mb=96, disk_quota_files=2000)
        exp = experiment("full", profile, ["micro-slugify"], ["vibe"], repeats=4, limits=limits)
        out = run_experiment(exp, results_dir=results, progress=False)
        runs = sorted((out / "runs").iterdir())
        assert len(runs) == 4
        for run in runs:
            rec = run_json(run)
            assert (rec["outcome"], rec["stop_reason"]) == ("budget", "disk-quota"), rec["error"]
            assert rec["score"] is not None and (run / "diff.patch").is_file()
            assert not (run / "repo.img").exists() and not os.path.ismount(run / "repo")
            assert "clone-removed" in (run / "events.jsonl").read_text()
            assert not (run / ".records-room").exists()

        more = exp.model_copy(update={"repeats": 6})
        with pytest.raises(ResultsError, match="the disk is full"):
            run_experiment(more, results_dir=results, progress=False)
        r5, r6 = (
            out / "runs" / runs[0].name.replace("r1", "r5"),
            out / "runs" / runs[0].name.replace("r1", "r6"),
        )
        assert run_json(r5)["stop_reason"] == "disk-quota"  # run 5 was recorded
        assert not (r6 / "run.json").exists()  # run 6 is torn: redone by the next kit run
        started = {r.name: run_json(r)["started_at"] for r in [*runs, r5]}

        (results / "filler.bin").unlink()
        run_experiment(more, results_dir=results, progress=False)
        assert run_json(r6)["stop_reason"] == "disk-quota"
        assert {r.name: run_json(r)["started_at"] for r in [*runs, r5]} == started  # nothing else redone
