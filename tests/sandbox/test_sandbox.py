"""The sandbox, tried the way a cheating agent would: each escape is attempted for real, and each
test also shows the same probe succeeding where it should (unsandboxed, or on the clone), so a
sandbox that stopped working would fail it. Every guarantee is tested under every backend that gives
it -- bwrap, podman, docker (``backend``: tests/support/sandboxes.py; a container engine that cannot
run here skips its cases with the reason)."""

from __future__ import annotations

import functools
import os
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

from kit.agent.toolbox import Toolbox
from kit.paths import REPO_ROOT
from kit.sandbox.backends import (
    ProcessLimits,
    SandboxUnavailable,
    check_available,
    get_sandbox,
    process_limit_mechanism,
    sandbox_env,
)
from kit.sandbox.processes import memory_limit_mechanism
from tests.support.sandboxes import backends

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap needs Linux")

BWRAP = get_sandbox("bwrap") if sys.platform == "linux" else None
NONE = get_sandbox("none")
ALL = backends()  # bwrap, podman, docker


@pytest.fixture
def runs(tmp_path):
    """Two sibling runs the way the runner lays them out, plus a file outside any run."""
    runs = tmp_path / "results" / "exp" / "runs"
    mine = runs / "task__vibe__p__r1" / "repo"
    other = runs / "task__pdca__p__r1" / "repo"
    for repo in (mine, other):
        repo.mkdir(parents=True)
        (repo / "README.md").write_text("hello\n")
    (other / "answer.txt").write_text("OTHER-RUN-SECRET\n")
    (tmp_path / "outside.txt").write_text("OUTSIDE-SECRET\n")
    return runs, mine


def sh(command, cwd, *, writable=True, sandbox=BWRAP, **kw):
    if isinstance(sandbox, str):
        sandbox = get_sandbox(sandbox)
    return sandbox.run(command, cwd, writable=writable, timeout_s=kw.pop("timeout_s", 20), **kw)


def shell_in(backend: str):
    """``sh`` with ``backend`` as its sandbox unless a call names another."""
    return functools.partial(sh, sandbox=backend)


@pytest.mark.parametrize("backend", ALL)
def test_files_outside_the_clone_cannot_be_read_or_written(runs, tmp_path, backend):
    sh = shell_in(backend)
    _, mine = runs
    outside = tmp_path / "outside.txt"
    assert "OUTSIDE-SECRET" in sh(f"cat {outside}", mine, sandbox=NONE).output  # the probe works
    res = sh(f"cat {outside}; echo planted > {tmp_path}/planted.txt; echo x >> {outside}", mine)
    assert "OUTSIDE-SECRET" not in res.output
    assert not (tmp_path / "planted.txt").exists()
    assert outside.read_text() == "OUTSIDE-SECRET\n"
    assert sh("echo mine > new.txt", mine).exit_code == 0 and (mine / "new.txt").read_text() == "mine\n"


@pytest.mark.parametrize("backend", ALL)
def test_other_runs_are_invisible(runs, backend):
    sh = shell_in(backend)
    runs_dir, mine = runs
    listing = sh(f"ls {runs_dir}; cat {runs_dir}/task__pdca__p__r1/repo/answer.txt", mine)
    assert "task__vibe__p__r1" in listing.output  # its own run's folder is on the path to the clone
    assert "task__pdca__p__r1" not in listing.output.replace("task__pdca__p__r1/repo/answer.txt", "")
    assert "OTHER-RUN-SECRET" not in listing.output
    assert (
        "OTHER-RUN-SECRET"
        in sh(f"cat {runs_dir}/task__pdca__p__r1/repo/answer.txt", mine, sandbox=NONE).output
    )


@pytest.mark.parametrize("backend", ALL)
def test_the_kit_datasets_and_home_are_unreachable(runs, backend):
    sh = shell_in(backend)
    _, mine = runs
    acceptance = next(REPO_ROOT.glob("datasets/tasks/*/acceptance"))
    secret_places = [REPO_ROOT / "kit", REPO_ROOT / "kit" / "sandbox.py", REPO_ROOT / "datasets", acceptance]
    secret_places += [Path.home() / name for name in os.listdir(Path.home())][:5]
    probe = "".join(f"[ -e '{p}' ] && echo VISIBLE {p}; " for p in secret_places)
    probe += "python -c 'import kit; print(\"IMPORTED\", kit.__file__)'"
    res = sh(probe, mine)
    assert "VISIBLE" not in res.output and "IMPORTED" not in res.output, res.output
    assert "No module named 'kit'" in res.output
    plain = sh(probe, mine, sandbox=NONE).output
    assert f"VISIBLE {acceptance}" in plain and "IMPORTED" in plain  # unsandboxed, the probe gets in


@pytest.mark.parametrize("backend", ALL)
def test_the_system_and_the_kit_venv_are_read_only(runs, backend):
    sh = shell_in(backend)
    _, mine = runs
    res = sh(f"touch {sys.prefix}/planted /usr/planted /etc/planted; echo done", mine)
    assert "Read-only file system" in res.output
    assert not Path(sys.prefix, "planted").exists() and not Path("/usr/planted").exists()


@pytest.mark.parametrize("backend", ALL)
def test_no_network_even_to_the_host_loopback(runs, backend):
    sh = shell_in(backend)
    _, mine = runs
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    accepted = []
    threading.Thread(target=lambda: accepted.append(server.accept()), daemon=True).start()
    connect = f"python -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3); print('CONNECTED')\""
    try:
        res = sh(connect, mine)
        assert "CONNECTED" not in res.output and res.exit_code != 0
        time.sleep(0.2)
        assert accepted == []
        assert "CONNECTED" in sh(connect, mine, sandbox=NONE).output  # the listener does accept
    finally:
        server.close()


def _live(marker: str) -> list[int]:
    """Host pids (not zombies) whose command line is ``sleep <marker>``."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if argv[:2] == [b"sleep", marker.encode()] and state != "Z":
            found.append(int(entry))
    return found


@pytest.mark.parametrize("backend", [*ALL, "none"])
def test_setsid_and_background_children_do_not_outlive_the_command(runs, backend):
    _, mine = runs
    marker = f"{time.time_ns() % 10**6 + 100}.25"
    res = sh(
        f"setsid sleep {marker} & nohup sleep {marker} >/dev/null 2>&1 & echo started",
        mine,
        sandbox=get_sandbox(backend),
    )
    assert res.exit_code == 0 and "started" in res.output
    time.sleep(0.3)
    assert _live(marker) == []


@pytest.mark.parametrize("backend", ALL)
def test_memory_limit_holds(runs, backend):
    sh = shell_in(backend)
    _, mine = runs
    grab = "python -c 'x = bytearray(400 * 1024 * 1024); print(\"GOT\", len(x))'"
    assert "GOT" in sh(grab, mine, limits=ProcessLimits(memory_mb=2048)).output
    res = sh(grab, mine, limits=ProcessLimits(memory_mb=200))
    assert "GOT" not in res.output and "MemoryError" in res.output


def _host_limits_only(backend: str) -> bool:
    """bwrap and none limit processes through the kit's own cgroup, where one is writable (a
    container engine always makes one); without it bwrap's sandbox user still has RLIMIT_NPROC,
    root (the none backend as root) has nothing."""
    as_root = backend == "none" and os.geteuid() == 0
    return backend in ("bwrap", "none") and process_limit_mechanism(as_root).startswith("none")


@pytest.mark.parametrize("backend", [*ALL, "none"])
def test_process_limit_holds_even_as_root(runs, backend):
    if _host_limits_only(backend):
        pytest.skip(
            "no writable pids cgroup and running as root: only the PID namespace and the timeout contain a fork bomb"
        )
    _, mine = runs
    spawn = (
        "python -c '\n"
        "import subprocess\n"
        "procs = []\n"
        "try:\n"
        "    for _ in range(80):\n"
        '        procs.append(subprocess.Popen(["sleep", "5"]))\n'
        "except OSError as e:\n"
        '    print("REFUSED", e.errno)\n'
        'print("STARTED", len(procs))\n'
        "[p.kill() for p in procs]\n'"
    )
    res = sh(spawn, mine, limits=ProcessLimits(processes=20), sandbox=get_sandbox(backend))
    started = int(res.output.split("STARTED")[1].split()[0])
    assert "REFUSED" in res.output and started < 20, res.output


@pytest.mark.parametrize("backend", ALL)
def test_a_fork_bomb_is_contained_and_cleaned_up(runs, backend):
    """Under a process limit the bomb's forks are refused and it ends by itself; without one (no
    writable pids cgroup, as root) only the timeout ends it. Either way nothing of it survives."""
    sh = shell_in(backend)
    _, mine = runs
    marker = f"{time.time_ns() % 10**6 + 200}.75"
    bomb = f"b() {{ sleep {marker} & b & b; }}; b"
    started = time.monotonic()
    res = sh(bomb, mine, limits=ProcessLimits(processes=64), timeout_s=10)
    assert time.monotonic() - started < 20
    if _host_limits_only(backend):
        assert res.timed_out, res.output[-300:]
    else:
        assert not res.timed_out and "Cannot fork" in res.output, res.output[-300:]
    time.sleep(0.3)
    assert _live(marker) == []


@pytest.mark.slow
def test_the_agent_cannot_raise_its_own_timeout(runs):
    """The toolbox's clamp, whatever the backend (that a timeout kills everything in each backend:
    test_containers.py, tests/agent/test_tools.py)."""
    _, mine = runs
    box = Toolbox(mine, ["exec"], timeout_s=1)
    for asked in (100, "inf", float("nan"), -5, 0):
        started = time.monotonic()
        r = box.execute("run", {"command": "sleep 4; echo FINISHED", "timeout_s": asked})
        assert time.monotonic() - started < 3.5, asked
        assert "FINISHED" not in r.output and r.output.endswith("killed after 1 s (timeout)"), asked
    r = box.execute("run", {"command": "sleep 3", "timeout_s": 0.2})  # lowering it is allowed
    assert r.output.endswith("killed after 0.2 s (timeout)")


@pytest.mark.parametrize("backend", ALL)
def test_a_role_without_write_cannot_change_the_clone_through_the_shell(runs, backend):
    """Its commands write a throwaway layer (tests/sandbox/test_throwaway.py); the clone stays as it was."""
    _, mine = runs
    attack = "echo changed > README.md; rm -f README.md; touch planted; mkdir d; echo exit=$?"
    analyst = Toolbox(mine, ["read", "exec"], role="analyst", sandbox=backend)
    r = analyst.execute("run", {"command": attack})
    assert "exit=0" in r.output and "Read-only file system" not in r.output
    assert (mine / "README.md").read_text() == "hello\n" and not (mine / "planted").exists()
    assert not (mine / "d").exists()
    res = get_sandbox(backend).run(attack, mine, writable=False, timeout_s=30)
    assert "Read-only file system" in res.output and not (mine / "planted").exists()
    coder = Toolbox(mine, ["read", "write", "exec"], role="coder", sandbox=backend)
    assert coder.execute("run", {"command": attack}).ok and (mine / "planted").exists()


@pytest.mark.parametrize("backend", ALL)
def test_commands_get_an_allow_listed_env_and_a_private_home(runs, monkeypatch, backend):
    sh = shell_in(backend)
    _, mine = runs
    monkeypatch.setenv("ORCHBENCH_CANARY_SETTING", "should-not-pass")
    env = sandbox_env({"EXTRA_OK": "1", "SNEAKY_TOKEN": "x"})
    assert "ORCHBENCH_CANARY_SETTING" not in env and env["EXTRA_OK"] == "1" and "SNEAKY_TOKEN" not in env
    assert env["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).parent)
    res = sh("echo home=$HOME; touch ~/ok && echo wrote-home; env", mine)
    assert "wrote-home" in res.output and "ORCHBENCH_CANARY_SETTING" not in res.output
    assert f"home={Path.home()}" not in res.output


@pytest.mark.parametrize("backend", ALL)
def test_pass_fds_and_ro_binds_reach_the_command(runs, tmp_path, backend):
    sh = shell_in(backend)
    _, mine = runs
    hidden = tmp_path / "hidden_tests"
    hidden.mkdir()
    (hidden / "t.txt").write_text("HIDDEN\n")
    read_fd, write_fd = os.pipe()
    try:
        res = sh(
            f"cat {hidden}/t.txt; python -c 'import os; os.write({write_fd}, b\"through-pipe\\n\")'; "
            f"touch {hidden}/x",
            mine,
            ro_binds=[hidden],
            pass_fds=[write_fd],
        )
        os.close(write_fd)
        assert "HIDDEN" in res.output and os.read(read_fd, 100) == b"through-pipe\n"
        assert not (hidden / "x").exists()
    finally:
        os.close(read_fd)


def test_unknown_or_broken_sandbox_gives_one_clear_error(monkeypatch):
    with pytest.raises(ValueError, match="valid: bwrap, docker, none, podman"):
        get_sandbox("lxc")
    broken = type(BWRAP)()
    broken.binary = "/bin/false"
    monkeypatch.setattr("kit.sandbox.backends.get_sandbox", lambda name: broken)
    with pytest.raises(SandboxUnavailable, match="set `sandbox: none` in the experiment to opt out"):
        check_available.__wrapped__("bwrap")
    check_available.__wrapped__("none")  # never refused


def test_the_report_flags_unsandboxed_runs(tmp_path):
    import json

    from kit import analysis
    from kit.analysis import report
    from tests.support.records import write_experiment

    exp = write_experiment(tmp_path)
    run_files = sorted(exp.glob("runs/*/run.json"))
    for i, path in enumerate(run_files):
        data = json.loads(path.read_text())
        data["sandbox"] = "none" if i == 0 else "bwrap"
        path.write_text(json.dumps(data))
    text = report.describe(analysis.load(exp))
    assert f"NOTE: {report.UNSANDBOXED_LABEL} (1 of {len(run_files)} runs)" in text
    data = json.loads(run_files[0].read_text())
    data["sandbox"] = "bwrap"
    run_files[0].write_text(json.dumps(data))
    assert "unsandboxed" not in report.describe(analysis.load(exp))


def test_the_clones_git_config_cannot_make_the_kits_git_run_commands(tmp_path):
    """The agent's shell may write .git/config in its clone; the kit's own git calls (the diff, the
    harness's commits) run outside the sandbox, so a filter / fsmonitor there must not execute."""
    import subprocess

    from kit.tasks.git import git_env
    from kit.tasks.task import load_task
    from kit.tasks.workspace import create_workspace, diff

    ws = create_workspace(load_task("micro-slugify"), tmp_path / "run" / "repo")
    marker = tmp_path / "RAN"
    attack = (
        f'git config filter.evil.clean "touch {marker}.clean"; git config filter.evil.process "touch {marker}.process"; '
        f'git config core.fsmonitor "touch {marker}.fsmonitor; false"; git config diff.evil.textconv "touch {marker}.textconv"; '
        'echo "* filter=evil diff=evil" > .gitattributes; echo changed >> README.md; echo done'
    )
    assert "done" in sh(attack, ws.root).output
    patch = diff(ws)
    assert "+changed" in patch and list(tmp_path.glob("RAN*")) == []
    probe = ["git", "-c", "safe.directory=*", "add", "-A"]  # the clone belongs to the sandbox user
    subprocess.run(probe, cwd=ws.root, env=git_env(), capture_output=True)
    assert list(tmp_path.glob("RAN*"))  # a plain `git add` would have run the agent's commands


@pytest.mark.parametrize("backend", ALL)
def test_a_read_only_bind_inside_the_clone_stays_read_only(runs, backend):
    sh = shell_in(backend)
    _, mine = runs
    (mine / "tests_hidden").mkdir()
    res = sh(
        "echo x > tests_hidden/planted; echo x > ok.txt; echo end", mine, ro_binds=[mine / "tests_hidden"]
    )
    assert "end" in res.output and (mine / "ok.txt").exists()
    assert not (mine / "tests_hidden" / "planted").exists()


def test_a_venv_under_tmp_stays_visible_over_the_private_tmp(monkeypatch):
    """A checkout in a temp folder (CI clones to /tmp) has its venv under /tmp: the interpreter's
    prefixes must be bound after the private /tmp, or the command cannot even start."""
    import kit.sandbox.bwrap as sandbox_mod

    venv_lib = Path("/tmp/some-checkout/.venv/lib")
    monkeypatch.setattr(sandbox_mod, "_prefix_binds", lambda: [("bind", venv_lib, "")])
    argv = sandbox_mod.BwrapSandbox().argv(["true"], Path("/tmp/run/repo"), writable=True)
    tmpfs = argv.index("--tmpfs")
    venv = argv.index(str(venv_lib))
    assert argv[tmpfs + 1] == "/tmp" and venv > tmpfs
    assert argv[venv - 1] == "--ro-bind"


@pytest.mark.skipif(os.geteuid() != 0, reason="the kit runs as a normal user: commands are that user already")
@pytest.mark.parametrize("backend", ALL)
def test_a_root_only_file_is_unreadable_and_nothing_runs_as_root(runs, tmp_path, backend):
    """The sandbox is not root: a 0600 root file it can see (in a bound folder, or planted in the clone
    by the kit) is unreadable, files the command makes are not root's, and /etc is minimal."""
    sh = shell_in(backend)
    _, mine = runs
    sh("true", mine)  # the clone is the sandbox user's from its first command on
    secret_dir = tmp_path / "kit-folder"
    secret_dir.mkdir()
    secret_dir.chmod(0o755)
    for where in (secret_dir / "key", mine / "root-only"):
        where.write_text("ROOT-ONLY-SECRET\n")
        where.chmod(0o600)
    probe = f"cat {secret_dir}/key root-only /etc/shadow /etc/gshadow; ls /etc"
    assert sh(probe, mine, sandbox=NONE, ro_binds=[secret_dir]).output.count("ROOT-ONLY-SECRET") == 2
    res = sh(probe, mine, ro_binds=[secret_dir])
    assert "ROOT-ONLY-SECRET" not in res.output and "Permission denied" in res.output
    assert sh("id -u; echo made > made.txt", mine).output.strip() != "0"
    assert (mine / "made.txt").stat().st_uid != 0
    for hidden in ("shadow", "gshadow", "ssh", "sudoers", "machine-id", "gitconfig"):
        assert f"\n{hidden}\n" not in f"\n{res.output}\n", f"/etc/{hidden} is visible"
    assert "passwd" in res.output
    keys = sh("ls /etc/ssl/private && cat /etc/ssl/private/*", mine)  # host keys stay closed
    assert keys.exit_code != 0 and "PRIVATE KEY" not in keys.output


@pytest.mark.parametrize("backend", ALL)
def test_what_the_kits_file_tools_write_stays_the_agents_to_change(runs, backend):
    """The file tools run in the kit's process (as root here); what they create -- folders too -- is
    given to the clone's owner, so the agent's non-root shell can still edit or delete it."""
    _, mine = runs
    coder = Toolbox(mine, ["read", "write", "exec"], role="coder", sandbox=backend)
    assert coder.execute("run", {"command": "true"}).ok
    assert coder.execute("write_file", {"path": "pkg/sub/new.py", "content": "A = 1\n"}).ok
    r = coder.execute(
        "run", {"command": "echo 'B = 2' >> pkg/sub/new.py && touch pkg/sub/more.py && echo ok"}
    )
    assert r.output.startswith("ok\n"), r.output
    assert (mine / "pkg" / "sub" / "new.py").read_text() == "A = 1\nB = 2\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs commands dropped to the sandbox user")
@pytest.mark.parametrize("backend", ALL)
def test_one_runs_processes_do_not_count_against_another_run(runs, tmp_path, backend):
    """Every run's commands are the same sandbox user: the process limit is per command (its cgroup),
    not per user, so a run holding many processes does not stop another from starting any."""
    if backend == "bwrap" and process_limit_mechanism() != "cgroup pids.max":
        pytest.skip("needs a writable pids cgroup")
    sh = shell_in(backend)
    _, mine = runs
    other = tmp_path / "other-run"
    other.mkdir()
    hog = threading.Thread(
        target=sh,
        args=("for i in $(seq 60); do sleep 6 & done; wait", mine),
        kwargs={"limits": ProcessLimits(processes=100), "timeout_s": 10},
    )
    hog.start()
    time.sleep(2)
    try:
        res = sh(
            "for i in 1 2 3 4 5; do sleep 0.1 & done; wait && echo STARTED",
            other,
            limits=ProcessLimits(processes=20),
        )
        assert "STARTED" in res.output, res.output
    finally:
        hog.join()


@pytest.mark.parametrize("backend", ALL)
def test_the_memory_of_a_commands_whole_process_tree_is_capped(runs, backend):
    """RLIMIT_AS caps each process; three processes under it together exceed the tree's cap (the
    attacker's sketch: 512 processes of 4 GB each would take the host)."""
    if backend == "bwrap" and not memory_limit_mechanism().startswith("cgroup"):
        pytest.skip("needs a writable memory cgroup")
    started = time.time()
    sh = shell_in(backend)
    _, mine = runs
    grab = "python3 -c 'b = b\"x\" * (60 * 2**20); import time; time.sleep(3)'"
    one = sh(f"{grab} && echo ONE-OK", mine, limits=ProcessLimits(memory_mb=100))
    assert "ONE-OK" in one.output, one.output  # 60 MB in one process: under both caps
    three = sh(
        f"{grab} & a=$!; {grab} & b=$!; {grab} & c=$!; wait $a; echo A=$?; wait $b; echo B=$?; wait $c; echo C=$?",
        mine,
        limits=ProcessLimits(memory_mb=100),
    )
    statuses = [line.split("=")[1] for line in three.output.split() if line[:2] in ("A=", "B=", "C=")]
    assert len(statuses) == 3 and set(statuses) != {"0"}, three.output  # one at least was killed
    time.sleep(0.5)  # podman's conmon writes ``oom`` where the client started, after it returns
    assert not (Path.cwd() / "oom").exists() or (Path.cwd() / "oom").stat().st_mtime < started


@pytest.mark.parametrize("backend", ALL)
def test_output_is_capped_keeping_its_head_and_tail(runs, backend):
    sh = shell_in(backend)
    _, mine = runs
    res = sh("seq 1 2000000; echo LAST", mine, max_output_chars=2000)
    assert res.exit_code == 0 and res.truncated_chars > 10_000_000
    assert res.output.startswith("1\n2\n3\n") and res.output.rstrip().endswith("1999999\n2000000\nLAST")
    assert len(res.output) < 2100


@pytest.mark.parametrize("backend", ALL)
def test_a_disk_filler_is_stopped_in_the_clone_and_in_tmp(runs, backend):
    """A file past the file-size limit is cut off (SIGXFSZ); the private /tmp, filled file by file
    under that limit, holds no more than the command's memory (a tmpfs: its pages are its memory)."""
    sh = shell_in(backend)
    _, mine = runs
    big = sh(
        "head -c 20000000 /dev/zero > big.bin; echo clone=$?", mine, limits=ProcessLimits(file_size_mb=5)
    )
    assert "clone=" in big.output and "clone=0" not in big.output, big.output
    assert (mine / "big.bin").stat().st_size <= 5 * 2**20
    if backend == "bwrap" and not memory_limit_mechanism().startswith("cgroup"):
        return  # bwrap's /tmp is capped by the memory cgroup only
    fill = "for i in $(seq 80); do head -c 5000000 /dev/zero > /tmp/f$i || break; done; echo files=$i"
    res = sh(fill, mine, limits=ProcessLimits(file_size_mb=10, memory_mb=256), timeout_s=60)
    assert "files=80" not in res.output, res.output  # 400 MB asked, ~256 MB got


@pytest.mark.parametrize("backend", ALL)
def test_the_clones_disk_quota_holds_for_its_commands(tmp_path, backend):
    """A clone under its quota (a file system of its own, kit/sandbox/quota.py) is full for a command
    in any backend: a container's bind mount of the clone is that file system."""
    from kit.sandbox.base import SANDBOX_GID, SANDBOX_UID
    from kit.sandbox.quota import provide, quota_mechanism, release

    if quota_mechanism() != "loop":
        pytest.skip("the clone's quota is a file system of its own only when the kit runs as root")
    quota = provide(tmp_path / "run" / "repo", 16 * 2**20, 1000, (SANDBOX_UID, SANDBOX_GID))
    try:
        fill = "for i in 1 2 3 4 5; do head -c 6000000 /dev/zero > f$i.bin || break; done; echo files=$i; df -m ."
        res = shell_in(backend)(fill, quota.folder, timeout_s=60)
        assert "No space left on device" in res.output and "files=5" not in res.output, res.output
        assert quota.over()
    finally:
        release(quota)
