"""The sandbox where only some cgroup controllers are writable (CI once ran where the memory
controller was delegated to the kit and the pids controller was not): each limit that can still
hold, holds, and the ``*_limit_mechanism`` functions say which. The missing pids cgroup is simulated
in-process; each test also shows the limit failing to hold where it should not."""

from __future__ import annotations

import os
import sys
import time
import warnings

import pytest

from kit.sandbox import processes
from kit.sandbox.backends import ProcessLimits, get_sandbox
from tests.sandbox.test_sandbox import _live

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap needs Linux")


@pytest.fixture
def no_pids_cgroup(monkeypatch):
    """As on a host whose pids controller the kit may not write to."""
    monkeypatch.setattr(processes, "_cgroup_root", lambda: None)
    monkeypatch.setitem(processes._WHY_NOT, "pids", "/sys/fs/cgroup/pids: Read-only file system (simulated)")


def sh(command, cwd, backend="bwrap", **kw):
    return get_sandbox(backend).run(command, cwd, writable=True, timeout_s=kw.pop("timeout_s", 20), **kw)


def test_the_mechanisms_say_what_holds_without_a_pids_cgroup(no_pids_cgroup):
    bwrap = processes.process_limit_mechanism(runs_as_root=False)
    assert bwrap.startswith("RLIMIT_NPROC (per user") and "Read-only file system (simulated)" in bwrap
    assert processes.process_limit_mechanism(runs_as_root=True).startswith("none (root without")


def test_the_mechanisms_with_every_cgroup_writable():
    if processes._cgroup_root() is None:
        pytest.skip(f"no writable pids cgroup here: {processes.process_limit_mechanism()}")
    assert processes.process_limit_mechanism() == processes.process_limit_mechanism(True) == "cgroup pids.max"


@pytest.mark.parametrize("backend", ["bwrap", "none"])
def test_without_a_pids_cgroup_the_memory_cgroup_still_caps_the_whole_tree(
    tmp_path, backend, no_pids_cgroup, memory_cgroup
):
    grab = "python3 -c 'b = b\"x\" * (60 * 2**20); import time; time.sleep(3)'"
    three = f"{grab} & a=$!; {grab} & b=$!; {grab} & c=$!; wait $a; echo A=$?; wait $b; echo B=$?; wait $c; echo C=$?"

    def statuses(memory_mb):
        out = sh(three, tmp_path, backend, limits=ProcessLimits(memory_mb=memory_mb)).output
        found = [line.split("=")[1] for line in out.split() if line[:2] in ("A=", "B=", "C=")]
        assert len(found) == 3, out
        return set(found)

    assert statuses(400) == {"0"}  # the probe works: under a cap that fits the three
    assert statuses(100) != {"0"}  # each fits RLIMIT_AS, together they do not: one at least was killed


def test_without_a_pids_cgroup_bwraps_tmp_is_still_capped_by_the_memory_cgroup(
    tmp_path, no_pids_cgroup, memory_cgroup
):
    fill = "for i in $(seq 80); do head -c 5000000 /dev/zero > /tmp/f$i || break; done; echo files=$i"
    roomy = sh(
        fill, tmp_path, limits=ProcessLimits(file_size_mb=10, memory_mb=1024, scratch_mb=1024), timeout_s=60
    )
    assert "files=80" in roomy.output, roomy.output
    res = sh(
        fill, tmp_path, limits=ProcessLimits(file_size_mb=10, memory_mb=256, scratch_mb=1024), timeout_s=60
    )
    # 400 MB asked: the loop stops short, or the shell itself is what the memory cgroup kills (-9;
    # 137 from bwrap when it is the one inside)
    assert "files=80" not in res.output and ("files=" in res.output or res.exit_code in (-9, 137)), res


@pytest.mark.skipif(os.geteuid() != 0, reason="the kit drops bwrap's commands to the sandbox user as root")
def test_without_a_pids_cgroup_a_fork_bomb_meets_the_sandbox_users_rlimit(tmp_path, no_pids_cgroup):
    """RLIMIT_NPROC counts the sandbox user's processes (all commands of every run together), which
    is why the kit prefers the per-command pids cgroup; without one it still stops the bomb."""
    marker = f"{time.time_ns() % 10**6 + 300}.25"
    started = time.monotonic()
    res = sh(
        f"b() {{ sleep {marker} & b & b; }}; b", tmp_path, limits=ProcessLimits(processes=64), timeout_s=10
    )
    assert time.monotonic() - started < 20
    assert not res.timed_out and "Cannot fork" in res.output, res.output[-300:]
    time.sleep(0.3)
    assert _live(marker) == []


def test_a_memory_cgroup_that_cannot_be_made_leaves_the_command_running_and_says_so(
    tmp_path, monkeypatch, no_pids_cgroup
):
    """Past 65,535 memory cgroups (removed ones count until their page cache is reclaimed) the kernel
    refuses new ones: the command still runs, under RLIMIT_AS, and the kit says its tree is uncapped."""
    monkeypatch.setattr(processes, "_memory_cgroup_root", lambda: tmp_path / "no-such-cgroup")
    monkeypatch.setattr(processes, "_WHY_NOT", {})
    with pytest.warns(UserWarning, match="could not make a command's memory cgroup .*no-such-cgroup"):
        res = sh("echo RAN", tmp_path)
    assert res.exit_code == 0 and "RAN" in res.output, res
    assert "could not be made" in processes.memory_limit_mechanism()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once a process
        assert "RAN" in sh("echo RAN", tmp_path).output
