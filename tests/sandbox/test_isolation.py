"""Nothing persists between two sandboxed commands of different runs except through the run's own clone
(docs/sandbox.md): each kernel object that outlives a process is tried for real -- planted by one
run's command, looked for by another run's command and by another run's scoring -- and /proc shows
no host PID or count of commands. Every test runs under each isolating backend (``isolating``)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path

import pytest

from kit.sandbox.backends import BACKENDS, SandboxUnavailable, check_available, get_sandbox
from tests.support.sandboxes import backends, skip_unless_ready

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the isolating backends need Linux")

PROBE = Path(__file__).with_name("kernel_probe.py")


def _isolating() -> list:
    """The backends that promise isolation between runs (all but ``none``), the container ones marked
    ``container`` (tests/support/sandboxes.py)."""
    return backends(*sorted(name for name in BACKENDS if name != "none"))


@pytest.fixture(params=_isolating())
def isolating(request):
    """An isolating backend that can start here (a container engine's image built once)."""
    skip_unless_ready(request.param)
    try:
        check_available(request.param)
    except SandboxUnavailable as exc:
        pytest.skip(f"{request.param}: {exc}")
    return get_sandbox(request.param)


@pytest.fixture
def two_runs(tmp_path):
    """The clones of two runs of one experiment, laid out as the runner does, each with the probe."""
    runs = []
    for run in ("task__vibe__p__r1", "task__pdca__p__r1"):
        clone = tmp_path / "results" / "exp" / "runs" / run / "repo"
        clone.mkdir(parents=True)
        shutil.copy(PROBE, clone / PROBE.name)
        runs.append(clone)
    return runs


def _probe(box, clone: Path, mode: str, token: str) -> dict:
    res = box.run(["python", PROBE.name, mode, token, str(clone)], clone, writable=True, timeout_s=60)
    assert res.exit_code == 0, res.output
    return json.loads(res.output.strip().splitlines()[-1])


def test_kernel_state_one_runs_command_leaves_is_not_seen_by_another_runs_command(isolating, two_runs):
    """Keyrings, SysV shared memory / queues / semaphores, POSIX queues and shared memory, files in
    any folder outside the clone, /proc: each is denied, or what run A left is gone for run B."""
    a, b = two_runs
    token = f"RUN-A-{time.time_ns()}"
    planted = _probe(isolating, a, "plant", token)
    for channel, what in planted.items():  # the probe works: refused, or seen again by A itself
        assert what.startswith("denied") or what.endswith("; seen"), (channel, what)
    found = _probe(isolating, b, "find", token)
    assert {k: v for k, v in found.items() if v} == {}, found
    again = _probe(isolating, a, "find", token)  # nor by A's own next command: only the clone carries
    assert {k: v for k, v in again.items() if v} == {}, again


def test_a_socket_one_run_listens_on_is_unreachable_from_another_run(isolating, two_runs):
    """Abstract unix sockets and loopback ports belong to the command's network namespace."""
    a, b = two_runs
    name = f"orchbench-{time.time_ns()}"
    listen = (
        "import socket, time\n"
        f"u = socket.socket(socket.AF_UNIX); u.bind('\\0{name}'); u.listen()\n"
        "t = socket.create_server(('127.0.0.1', 47011))\n"
        "print('LISTENING', flush=True); time.sleep(6)\n"
    )
    connect = (
        "import socket\n"
        "for kind, addr in ((socket.AF_UNIX, '\\0" + name + "'), (socket.AF_INET, ('127.0.0.1', 47011))):\n"
        "    s = socket.socket(kind)\n"
        "    try:\n        s.connect(addr); print('CONNECTED', kind)\n"
        "    except OSError as e:\n        print('refused', e.errno)\n"
    )
    (a / "listen.py").write_text(listen)
    (b / "connect.py").write_text(connect)
    holder = threading.Thread(
        target=isolating.run, args=(["python", "listen.py"], a), kwargs={"writable": True, "timeout_s": 10}
    )
    holder.start()
    try:
        time.sleep(2)
        res = isolating.run(["python", "connect.py"], b, writable=True, timeout_s=10)
        assert res.output.count("refused") == 2 and "CONNECTED" not in res.output, res.output
        (a / "connect.py").write_text(connect)  # the same probe inside A's own namespace connects
        same = isolating.run(
            ["sh", "-c", "python listen.py & sleep 1; python connect.py"], a, writable=True, timeout_s=10
        )
        assert same.output.count("CONNECTED") == 2, same.output
    finally:
        holder.join()


def test_proc_shows_no_host_pid_or_count_of_commands(isolating, two_runs):
    """/proc/self/cgroup named the kit's host PID and a counter of every sandboxed command."""
    a, _ = two_runs
    look = "cat /proc/self/cgroup; echo ==; ls /proc; echo ==; cat /proc/self/mountinfo"
    first = isolating.run(look, a, writable=True, timeout_s=20).output.split("==\n")
    second = isolating.run(look, a, writable=True, timeout_s=20).output.split("==\n")
    kit_pid = str(os.getpid())
    cgroups = first[0].splitlines()
    assert cgroups and all(line.rsplit(":", 1)[1] == "/" for line in cgroups), cgroups
    assert first[0] == second[0]  # nothing counts the commands
    assert f"orchbench-{kit_pid}" not in "".join(first), "the kit's host pid is visible"
    pids = sorted(int(p) for p in first[1].split() if p.isdigit() and int(p) > 64)
    assert not pids, f"host pids visible: {pids[:10]}"


#: A user + mount namespace of the command's own, then a tmpfs over a folder: in-process (ctypes) and
#: with util-linux's ``unshare`` (attack-iso-2's U1; F7 did the same in a scoring session)
USERNS = r"""
import ctypes, json, os, subprocess
libc = ctypes.CDLL(None, use_errno=True)
def call(f, *args):
    ctypes.set_errno(0)
    r = f(*args)
    return [r, ctypes.get_errno()]
uid, gid = os.getuid(), os.getgid()
got = {"unshare": call(libc.unshare, 0x10000000 | 0x00020000)}  # CLONE_NEWUSER | CLONE_NEWNS
if got["unshare"][0] == 0:
    open("/proc/self/setgroups", "w").write("deny")
    open("/proc/self/uid_map", "w").write(f"{uid} {uid} 1")
    open("/proc/self/gid_map", "w").write(f"{gid} {gid} 1")
got["mount"] = call(libc.mount, b"none", b"d", b"tmpfs", 0, None)
got["unshare_user"] = call(libc.unshare, 0x10000000)
if os.uname().machine == "x86_64":  # clone(CLONE_NEWUSER | SIGCHLD): a child in a namespace of its own
    got["clone_newuser"] = r = call(libc.syscall, 56, 0x10000000 | 17, 0, 0, 0, 0)
    if r[0] == 0:
        os._exit(0)
    if r[0] > 0:
        os.waitpid(r[0], 0)
cmd = "unshare -Urm sh -c 'mount -t tmpfs none d && echo fake > d/f'"
got["unshare_cmd"] = subprocess.run(cmd, shell=True, capture_output=True, text=True).returncode
got["file"] = open("d/f").read()
print(json.dumps(got))
"""


def test_no_command_can_mount_or_make_a_namespace(isolating, two_runs):
    """Before: under bwrap and podman a command (or the code under test, in-process) made a user
    namespace of its own and mounted over a read-only folder there (attack-iso-2 U1, F7): mount,
    unshare, setns and clone with CLONE_NEW* flags are now denied (EPERM) -- docker's profile already
    denied them. Threads, processes and multiprocessing still work (clone3 falls back to clone)."""
    a, _ = two_runs
    (a / "d").mkdir()
    (a / "d" / "f").write_text("orig\n")
    (a / "userns.py").write_text(USERNS)
    res = isolating.run(["python3", "userns.py"], a, writable=True, timeout_s=60)
    assert res.exit_code == 0, res.output
    got = json.loads(res.output.strip().splitlines()[-1])
    assert got["unshare"] == [-1, 1] and got["unshare_user"] == [-1, 1], got  # EPERM
    assert got["mount"] == [-1, 1], got
    assert got.get("clone_newuser", [-1, 1])[0] == -1, got  # (podman's profile: its default ENOSYS)
    assert got["unshare_cmd"] != 0 and got["file"] == "orig\n", got
    work = "import multiprocessing as m, subprocess; print(m.Pool(2).map(abs, [-1, -2])); subprocess.run(['true'])"
    res = isolating.run(["python3", "-c", work], a, writable=True, timeout_s=60)
    assert res.exit_code == 0 and "[1, 2]" in res.output, res.output


def test_the_interpreter_prefix_shows_only_what_python_needs(isolating, two_runs):
    """A pip.conf (an index token) at the top of the interpreter's prefix stays out of the sandbox;
    so does everything there but the interpreter, its libraries and pyvenv.cfg (a container shows
    none of the kit's interpreter: its image has its own)."""
    a, _ = two_runs
    conf = Path(sys.prefix) / "pip.conf"
    if conf.exists():
        pytest.skip(f"{conf} exists: the test will not touch it")
    conf.write_text("[global]\nindex-url = https://user:SECRET-INDEX-TOKEN@pypi.example/simple\n")
    try:
        prefixes = sorted({sys.prefix, sys.base_prefix})
        res = isolating.run(
            f'cat {conf}; for p in {" ".join(prefixes)}; do echo "== $p"; ls -A $p 2>/dev/null; done; '
            "python -c 'import pytest'",
            a,
            writable=True,
            timeout_s=20,
        )
    finally:
        conf.unlink()
    assert res.exit_code == 0 and "SECRET-INDEX-TOKEN" not in res.output, res.output
    for block in res.output.split("== ")[1:]:
        prefix, *names = block.split()
        if "cannot access" in block:  # (a container backend shows none of the host's prefix)
            continue
        if not prefix.startswith(("/usr/", "/etc/")):
            assert set(names) <= {"bin", "lib", "lib64", "pyvenv.cfg"}, (prefix, names)


# --------------------------------------------------------------------------- across runs, scoring too

STASH = """
import base64, kernel_probe as k, sys
token = base64.b64encode(open(sys.argv[1], "rb").read())
for ring in k.KEYRINGS.values():
    k.plant_key(ring, token)
k.plant_shm(token); k.plant_mq(token); k.plant_posix_shm(token); k.plant_files(token, sys.argv[2])
"""

#: run B's textkit.py: the solution from wherever run A left it, else nothing (every test fails)
LOADER = """
import base64, os, kernel_probe as k
for find in (lambda: k.find_key(-4), lambda: k.find_key(-5), lambda: k.find_key(-3), k.find_shm,
             k.find_mq, k.find_posix_shm, lambda: k.find_files(os.path.dirname(os.path.abspath(__file__)))):
    try:
        found = find()
        exec(compile(base64.b64decode(found), "textkit.py", "exec"))
        break
    except Exception:
        continue
"""


def test_a_solution_one_run_stashes_in_kernel_state_reaches_neither_another_runs_scoring_nor_its_agent(
    isolating, tmp_path
):
    """Run A's command stashes its solution in every channel; run B's clone only loads it. B scored
    solved on the old sandbox (the keyring carried it). And what code under test stashes while it is
    scored (the hidden tests' inputs) is not seen by a later run's command."""
    from kit.scoring.scorer import score
    from kit.tasks.task import apply_solution, load_task
    from kit.tasks.workspace import create_workspace

    task = load_task("micro-slugify")
    runs = tmp_path / "results" / "exp" / "runs"
    ws_a = create_workspace(task, runs / "a" / "repo", sandbox=isolating.name)
    ws_b = create_workspace(task, runs / "b" / "repo", sandbox=isolating.name)
    apply_solution(task, ws_a.root)
    for ws in (ws_a, ws_b):
        shutil.copy(PROBE, ws.root / PROBE.name)
    (ws_a.root / "stash.py").write_text(STASH)
    res = isolating.run(
        ["python", "stash.py", "textkit.py", str(ws_a.root)], ws_a.root, writable=True, timeout_s=30
    )
    assert res.exit_code == 0, res.output
    (ws_b.root / "textkit.py").write_text(LOADER)
    s = score(task, ws_b, claimed_done=True, sandbox=isolating.name)
    assert s.unscored_reason is None and not s.tampered, s
    assert s.requirements_failed == s.requirements_total, "run B was credited with run A's solution"

    # code under test that stashes at import while run A is scored; a later run's command looks
    token = f"SEEN-IN-SCORING-{time.time_ns()}"
    source = (ws_a.root / "textkit.py").read_text()
    (ws_a.root / "textkit.py").write_text(
        f"import kernel_probe as _k\nfor _r in _k.KEYRINGS.values():\n    _k.plant_key(_r, {token!r}.encode())\n"
        f"_k.plant_shm({token!r}.encode()); _k.plant_mq({token!r}.encode())\n" + source
    )
    assert score(task, ws_a, claimed_done=True, sandbox=isolating.name).requirements_failed == 0
    found = _probe(isolating, ws_b.root, "find", token)
    assert not any(v and token in v for v in found.values()), found
