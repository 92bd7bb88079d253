"""Red team of the bwrap sandbox's resource limits and clean-up where the kit may make a memory cgroup
but no pids cgroup (as in CI), or neither. Each attack is tried for real, and each test also shows its
probe succeeding where it should. The configuration is simulated in-process (``_cgroup_root`` returns
None) or made for real in a private mount namespace (``unshare -m``, the cgroup hierarchies bound
read-only) in a subprocess."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from kit.paths import REPO_ROOT
from kit.sandbox import processes
from kit.sandbox.backends import ProcessLimits, check_available
from tests.sandbox import test_cgroup_fallbacks as fallbacks
from tests.sandbox.test_sandbox import _live

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap needs Linux")
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (the kit as CI ran it)")


@pytest.fixture(params=["as-is", "no-pids-cgroup"])
def host(request, monkeypatch):
    """This host as it is, and as one whose pids controller the kit may not write to."""
    if request.param == "no-pids-cgroup":
        monkeypatch.setattr(processes, "_cgroup_root", lambda: None)
        monkeypatch.setitem(
            processes._WHY_NOT, "pids", "/sys/fs/cgroup/pids: Read-only file system (simulated)"
        )
        assert processes.process_limit_mechanism().startswith("RLIMIT_NPROC")
    return request.param


def sh(command, cwd, backend="bwrap", **kw):
    return fallbacks.sh(command, cwd, backend, **{"timeout_s": 30, **kw})


def _figures(output: str) -> dict[str, int]:
    return {
        w.split("=")[0]: int(w.split("=")[1])
        for w in output.split()
        if "=" in w and w.split("=")[1].isdigit()
    }


#: Holds kernel buffers in 30 loopback TCP connections (``tcp``) or 30 UDP receivers (``udp``) and
#: prints how many MB it held: bytes sent and never read (for UDP, what the receivers queued).
SOCKET_HOG = textwrap.dedent("""
    import socket, sys, time
    keep, held = [], 0
    srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(64)
    for _ in range(30):
        if sys.argv[1] == "tcp":
            c = socket.socket(); c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
            c.connect(srv.getsockname()); s, _ = srv.accept(); c.setblocking(False)
            for _ in range(2):
                try:
                    while True:
                        held += c.send(b"x" * (1 << 20))
                except BlockingIOError:
                    time.sleep(0.01)
            keep += [c, s]
            continue
        r = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); r.bind(("127.0.0.1", 0))
        r.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.setblocking(False)
        for _ in range(200):
            try:
                s.sendto(b"x" * 60000, r.getsockname())
            except OSError:
                break
        keep += [r, s]
    for r in keep[::2] if sys.argv[1] == "udp" else ():
        r.setblocking(False)
        try:
            while True:
                held += len(r.recv(65536))
        except BlockingIOError:
            pass
    print(f"{sys.argv[1]}={held >> 20}", flush=True)
""")


def _hold(cwd: Path, kind: str, memory_mb: int) -> int:
    (cwd / "hog.py").write_text(SOCKET_HOG)
    res = sh(["python3", "hog.py", kind], cwd, limits=ProcessLimits(memory_mb=memory_mb))
    assert kind in _figures(res.output), res.output[-500:]
    return _figures(res.output)[kind]


@as_root
@pytest.mark.parametrize("kind", ["tcp", "udp"])
def test_tcp_and_udp_buffers_count_against_the_commands_memory(tmp_path, host, kind, memory_cgroup):
    """cgroup v1 charges TCP and UDP buffers to no memory cgroup until ``memory.kmem.tcp`` has a
    limit: before it had one, this command held tcp=311 (udp=235) MB under a 100 MB cap -- and a
    host's TCP memory (``tcp_mem``, 2.2 GB here) is shared by every connection on it, the kit's own.
    Now they are capped at ``socket_mb(memory_mb)`` on top of the cap: 25 MB here."""
    held = _hold(tmp_path, kind, 100)
    assert held >= 10, held  # the probe works: a command can hold socket buffers
    assert held <= 100 // 4 + 4, held  # (a few MB of slack)


#: Tries a netlink and a vsock socket, io_uring_setup, and holds what 20 netlink queues take.
OTHER_FAMILIES = textwrap.dedent("""
    import ctypes, os, socket
    def attempt(family, kind, proto=0):
        try:
            socket.socket(family, kind, proto).close(); return "ok"
        except OSError as e:
            return e.errno
    out = {"unix": attempt(1, socket.SOCK_STREAM), "inet": attempt(2, socket.SOCK_STREAM),
           "inet6": attempt(10, socket.SOCK_DGRAM), "netlink": attempt(16, socket.SOCK_RAW),
           "vsock": attempt(40, socket.SOCK_STREAM)}
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.syscall(425, 8, ctypes.create_string_buffer(120))  # io_uring_setup (x86_64, aarch64)
    out["io_uring"] = "ok" if fd >= 0 else ctypes.get_errno()
    held, keep = 0, []
    try:
        for _ in range(20):
            r = socket.socket(16, socket.SOCK_RAW, 2); r.bind((0, 0))  # NETLINK_USERSOCK
            r.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
            s = socket.socket(16, socket.SOCK_RAW, 2); s.bind((0, 0)); s.setblocking(False)
            try:
                while True:
                    held += s.sendto(bytes(65536), r.getsockname())
            except BlockingIOError:
                pass
            keep += [r, s]
    except OSError as e:
        out["netlink_error"] = e.errno
    out["netlink_mb"] = held >> 20
    print("RESULT", __import__("json").dumps(out))
""")


def _result(res) -> dict:
    assert "RESULT" in res.output, res.output[-500:]
    return json.loads(res.output.split("RESULT", 1)[1].strip().splitlines()[0])


def test_only_unix_and_inet_sockets_can_be_made(tmp_path, host):
    """A netlink queue is charged to no memory cgroup (cgroup v1 or v2): 20 of them held 160 MB
    under a 100 MB cap, 8 MB each with no limit across sockets (40 held 310 MB), so a command could
    take the host's memory; AF_VSOCK reaches the VM's host, which no network namespace covers; an
    io_uring makes sockets without the ``socket`` call. The seccomp filter lets a bwrap command make
    AF_UNIX, AF_INET and AF_INET6 sockets only, and denies io_uring."""
    (tmp_path / "fam.py").write_text(OTHER_FAMILIES)
    limits = ProcessLimits(memory_mb=100)
    plain = _result(sh(["python3", "fam.py"], tmp_path, "none", limits=limits))
    assert plain["netlink"] == "ok" and plain["netlink_mb"] >= 100, plain  # the probe works, unsandboxed
    boxed = _result(sh(["python3", "fam.py"], tmp_path, limits=limits))
    assert boxed["unix"] == boxed["inet"] == boxed["inet6"] == "ok", boxed
    assert boxed["netlink"] == boxed["vsock"] == boxed.get("netlink_error") == 97, boxed  # EAFNOSUPPORT
    assert boxed["netlink_mb"] == 0 and boxed["io_uring"] == 1, boxed  # EPERM


def _kit_in(memory_parent: Path, pids_parent: Path | None, body: str) -> subprocess.Popen:
    """A kit process in ``memory_parent`` (its memory cgroup: where it makes its commands') making its
    commands' pids cgroups in ``pids_parent``, running ``body``; it prints STARTING first."""
    kit = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {str(REPO_ROOT)!r})
        from pathlib import Path
        from kit.sandbox import processes
        from kit.sandbox.backends import get_sandbox
        pids = {str(pids_parent) if pids_parent else None!r}
        processes._cgroup_root = lambda: Path(pids) if pids else None
        print("STARTING", flush=True)
    """) + textwrap.dedent(body)
    join = f'echo $$ > {memory_parent}/cgroup.procs && exec {sys.executable} -c "$0"'
    child = subprocess.Popen(["/bin/sh", "-c", join, kit], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "STARTING"
    return child


def _wait_for(path: Path, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert path.exists(), path


def _kill(child: subprocess.Popen) -> None:
    child.send_signal(signal.SIGKILL)
    child.wait()


@pytest.fixture
def parents(memory_cgroup):
    """Private parent cgroups (memory; pids where writable) for a kit process of a test's own, so
    nothing of other kits on the host is touched."""
    name = f"rtcg-test-{os.getpid()}-{time.time_ns() % 10**6}"
    memory_parent = processes._memory_cgroup_root() / name
    pids_parent = processes._cgroup_root() / name if processes._cgroup_root() else None
    made = [p for p in (pids_parent, memory_parent) if p is not None]
    for parent in made:
        parent.mkdir()
    yield memory_parent, pids_parent
    for folder in [f for p in made for f in p.glob("orchbench-*")] + made:
        for _ in range(100):
            for pid in (folder / "cgroup.procs").read_text().split():  # an orphan the old code left
                with contextlib.suppress(OSError):
                    os.kill(int(pid), signal.SIGKILL)
            try:
                folder.rmdir()
                break
            except OSError:
                time.sleep(0.05)


@as_root
def test_a_killed_kits_cgroups_are_swept(tmp_path, monkeypatch, parents):
    """A kit killed mid-command (SIGKILL; a second Ctrl-C's ``os._exit``) left the command's cgroups
    for good -- its command dies with it, its folders did not: 26 empty ``orchbench-*`` pids cgroups
    had piled up on this host. ``check_available`` now removes the empty ones made over a minute ago;
    a live command's cgroup stays."""
    memory_parent, pids_parent = parents
    roots = [p for p in (pids_parent, memory_parent) if p is not None]
    clone = tmp_path / "clone"
    clone.mkdir()
    child = _kit_in(
        memory_parent,
        pids_parent,
        f"""
        get_sandbox("bwrap").run("touch started; sleep 30", Path({str(clone)!r}), writable=True, timeout_s=60)
    """,
    )
    try:
        _wait_for(clone / "started")
    finally:
        _kill(child)
    time.sleep(0.5)
    left = sorted(f for p in roots for f in p.glob("orchbench-*"))
    assert len(left) == len(roots), left  # the attack works: each cgroup outlived the kit
    assert not any((f / "cgroup.procs").read_text().split() for f in left)  # ... and is empty

    monkeypatch.setattr(processes, "_cgroup_root", lambda: pids_parent)
    monkeypatch.setattr(processes, "_memory_cgroup_root", lambda: memory_parent)
    check_available("bwrap")
    assert all(f.exists() for f in left)  # made under a minute ago: kept
    monkeypatch.setattr(processes, "STALE_CGROUP_S", 0.0)
    live = threading.Thread(target=sh, args=("sleep 3", clone))
    live.start()
    time.sleep(1.5)
    running = sorted(set(f for p in roots for f in p.glob("orchbench-*")) - set(left))
    assert len(running) == len(roots), running
    check_available("bwrap")
    assert not any(f.exists() for f in left)  # the dead kit's are gone
    assert all(f.exists() for f in running)  # the live command's stay
    live.join()
    assert not any(list(p.glob("orchbench-*")) for p in roots)


@as_root
def test_a_kit_killed_while_a_command_starts_leaves_nothing_running(tmp_path, parents):
    """bwrap's ``--die-with-parent`` is armed once bwrap runs; a kit killed before that -- while the
    launcher joins the cgroups and execs prlimit, a few ms, longer on a loaded machine (slowed down
    here to 2 s) -- left the command running as an orphan with no timeout (``sleep 30`` ran on). The
    launcher now arms a parent-death SIGKILL first (``setpriv --pdeathsig``)."""
    memory_parent, pids_parent = parents
    marker = f"{time.time_ns() % 10**6 + 800}.25"
    slow = tmp_path / "bin" / "prlimit"
    slow.parent.mkdir()
    slow.write_text(f'#!/bin/sh\ntouch {tmp_path}/launching\nsleep 2\nexec /usr/bin/prlimit "$@"\n')
    slow.chmod(0o755)
    clone = tmp_path / "clone"
    clone.mkdir()

    def kit_with_slow_launcher(timeout_s):
        return _kit_in(
            memory_parent,
            pids_parent,
            f"""
        processes._prlimit = lambda: {str(slow)!r}
        get_sandbox("bwrap").run("sleep {marker}", Path({str(clone)!r}), writable=True, timeout_s={timeout_s})
    """,
        )

    child = kit_with_slow_launcher(60)
    try:
        _wait_for(tmp_path / "launching")
    finally:
        _kill(child)
    time.sleep(3.5)  # the slowed launcher has gone on to start the command, or died with the kit
    assert _live(marker) == []
    # the probe works: the same slow launcher, the kit alive, starts the command
    child = kit_with_slow_launcher(4)
    try:
        time.sleep(3)
        assert _live(marker) != []
    finally:
        child.wait()


@pytest.mark.parametrize(
    "attack",
    [
        "setsid sleep {m} & echo ok",
        "( ( sleep {m} & ) & ); echo ok",
        "exec >/dev/null 2>&1; nohup sleep {m} & echo ok",
        "python3 -c 'import os\nif os.fork(): raise SystemExit\nos.setsid()\nif os.fork(): raise SystemExit\n"
        'os.execvp("sleep", ["sleep", "{m}"])\'',
        "sleep {m} & kill -STOP $!; echo ok",
        "trap '' TERM HUP INT; sleep {m}",
    ],
    ids=["setsid", "double-fork", "nohup", "daemon", "stopped", "past-its-timeout"],
)
def test_nothing_a_command_starts_outlives_it_without_a_pids_cgroup(tmp_path, host, attack):
    """Daemons, setsid, double forks, a stopped child, a command past its timeout: the PID namespace
    and the memory cgroup end them all without a pids cgroup too (these attacks failed). The default
    process limit: without a pids cgroup every command of the host's sandbox user shares it."""
    marker = f"{time.time_ns() % 10**6 + 600}.25"
    res = sh(attack.format(m=marker), tmp_path, timeout_s=2)
    assert res.timed_out == attack.startswith("trap"), res
    time.sleep(0.3)
    assert _live(marker) == []


#: The kit inside the real configuration: prints its mechanisms, the socket buffers a command held
#: under a 100 MB cap, and whether a setsid'd process outlived its command.
REAL_KIT = textwrap.dedent("""
    import json, sys, time, tempfile, os
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])
    from kit.sandbox import processes
    from kit.sandbox.backends import ProcessLimits, get_sandbox
    from tests.sandbox.test_sandbox import _live
    from tests.sandbox.test_redteam_cgroups import SOCKET_HOG, _figures
    cwd = Path(tempfile.mkdtemp(prefix="rtcg-real-"))
    (cwd / "hog.py").write_text(SOCKET_HOG)
    box = get_sandbox("bwrap")
    held = {}
    for kind in ("tcp", "udp"):
        res = box.run(["python3", "hog.py", kind], cwd, writable=True, timeout_s=30, limits=ProcessLimits(memory_mb=100))
        held.update(_figures(res.output))
    marker = f"{time.time_ns() % 10**6 + 700}.25"
    box.run(f"setsid sleep {marker} & echo ok", cwd, writable=True, timeout_s=10)
    time.sleep(0.3)
    print("RESULT", json.dumps({"pids": processes.process_limit_mechanism(), "memory":
        processes.memory_limit_mechanism(), "held": held, "live": _live(marker)}))
""")


@as_root
@pytest.mark.parametrize("read_only", [("pids",), ("pids", "memory")], ids=["no-pids", "neither"])
def test_the_real_configuration_in_a_private_mount_namespace(tmp_path, read_only, memory_cgroup):
    if shutil.which("unshare") is None:
        pytest.skip("needs util-linux unshare")
    binds = " && ".join(
        f"mount --bind /sys/fs/cgroup/{c} /sys/fs/cgroup/{c} && mount -o remount,bind,ro /sys/fs/cgroup/{c}"
        for c in read_only
    )
    (tmp_path / "kit.py").write_text(REAL_KIT)
    script = f'{binds} && exec "$0" "$@"'
    argv = ["unshare", "-m", "sh", "-c", script, sys.executable, str(tmp_path / "kit.py"), str(REPO_ROOT)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    got = json.loads(done.stdout.split("RESULT", 1)[1]) if "RESULT" in done.stdout else None
    assert got, done.stdout[-500:] + done.stderr[-1500:]
    assert got["pids"].startswith("RLIMIT_NPROC") and "Read-only file system" in got["pids"], got
    assert got["live"] == [], got
    held = got["held"]
    assert held.get("tcp", 0) >= 10 and held.get("udp", 0) >= 10, got  # the probe works
    if "memory" in read_only:  # no memory cgroup: RLIMIT_AS per process only, as the mechanism says
        assert got["memory"].startswith("none (RLIMIT_AS per process only"), got
        assert held["tcp"] > 100, got
    else:
        assert got["memory"] == "cgroup memory", got
        assert held["tcp"] <= 100 // 4 + 4 and held["udp"] <= 100 // 4 + 4, got
