"""Red team of the bwrap sandbox's socket-family filter (:mod:`kit.sandbox.seccomp`) and of the
guard that ends a command when its kit dies. Each attack is tried for real; each test also shows its
probe succeeding where it should (unsandboxed, or with the kit alive).

Attacks on the filter that failed (kept as tests): the i386 ``int 0x80`` ``socket`` and
``socketcall``, the x32 ABI (each kills the process), a family or a call number with its upper 32
bits set, ``socketpair``, ``(AF_INET, SOCK_PACKET)`` (the kernel makes that an AF_PACKET socket
behind the filter's back; it needs CAP_NET_RAW, which the sandbox user lacks), every io_uring call,
``clone3``, and a tracer rewriting an allowed call into ``socket(AF_NETLINK)`` (seccomp checks the
call after the tracer's syscall-entry stop)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kit.sandbox import processes
from kit.sandbox.backends import ProcessLimits, get_sandbox
from tests.sandbox.test_redteam_cgroups import _kill, _kit_in, as_root, parents  # noqa: F401 - a fixture
from tests.sandbox.test_sandbox import _live

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap needs Linux")


def sh(command, cwd, backend="bwrap", **kw):
    return get_sandbox(backend).run(command, cwd, writable=True, timeout_s=kw.pop("timeout_s", 60), **kw)


def _result(res) -> dict:
    assert "RESULT" in res.output, res.output[-800:]
    return json.loads(res.output.split("RESULT", 1)[1].strip().splitlines()[0])


#: Each attempt runs in a child; prints RESULT {"name": fd >= 0 -> "ok", -errno, or "signal N"}.
ATTACKS_C = r"""
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <sys/syscall.h>
static long sc(long nr, long a, long b, long c) {
    long ret; register long r10 asm("r10") = 0;
    asm volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10) : "rcx", "r11", "memory");
    return ret;
}
static long int80(long nr, long a, long b, long c) {
    long ret;
    asm volatile("int $0x80" : "=a"(ret) : "a"(nr), "b"(a), "c"(b), "d"(c) : "memory");
    return ret;
}
static int args32[3] = {16, 3, 0}, sv[2];
static long traced(void) {  /* a tracer turns the child's getpid into socket(AF_NETLINK) */
    pid_t p = fork();
    if (p == 0) {
        ptrace(PTRACE_TRACEME, 0, 0, 0); raise(SIGSTOP);
        long r = syscall(SYS_getpid); _exit(r >= 0 && r != getpid() ? 0 : 1);
    }
    int st, done = 0; waitpid(p, &st, 0);
    while (1) {
        ptrace(PTRACE_SYSCALL, p, 0, 0); waitpid(p, &st, 0);
        if (!WIFSTOPPED(st)) break;
        struct user_regs_struct r; ptrace(PTRACE_GETREGS, p, 0, &r);
        if (!done && r.orig_rax == SYS_getpid) {
            r.orig_rax = SYS_socket; r.rdi = 16; r.rsi = 3; r.rdx = 0;
            ptrace(PTRACE_SETREGS, p, 0, &r); done = 1;
        } else if (done == 1) { done = 2; ptrace(PTRACE_KILL, p, 0, 0); waitpid(p, &st, 0); return r.rax; }
    }
    return -9999;
}
static long attempt(int i) {
    switch (i) {
    case 0: return int80(359, 16, 3, 0);                        /* i386 socket */
    case 1: return int80(102, 1, (long)args32, 0);              /* i386 socketcall */
    case 2: return sc(0x40000000 | 41, 16, 3, 0);               /* x32 socket */
    case 3: return sc((1L << 32) | 41, 16, 3, 0);               /* call number's upper bits */
    case 4: return sc(41, (1L << 32) | 16, 3, 0);               /* family's upper bits */
    case 5: return sc(41, 0xffffffff00000010L, 3, 0);
    case 6: return sc(53, 16, 3, (long)sv);                     /* socketpair */
    case 7: return sc(41, 2, 10, 0);                            /* AF_INET, SOCK_PACKET */
    case 8: return sc(425, 8, (long)calloc(1, 120), 0);         /* io_uring_setup */
    case 9: return sc(426, 0, 0, 0);
    case 10: return sc(427, 0, 0, 0);
    case 11: return sc(435, (long)calloc(1, 88), 88, 0);        /* clone3 */
    case 12: return traced();
    }
    return 0;
}
static const char *names[] = {"i386_socket", "i386_socketcall", "x32_socket", "nr_upper", "family_upper",
    "family_upper2", "socketpair", "inet_sock_packet", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "clone3", "ptrace_rewrite"};
int main(void) {
    printf("RESULT {");
    for (int i = 0; i < 13; i++) {
        int pipefd[2]; pipe(pipefd);
        pid_t p = fork();
        if (p == 0) { long r = attempt(i); if (r == 0 && i == 11) _exit(0); write(pipefd[1], &r, sizeof r); _exit(0); }
        close(pipefd[1]);
        long r = 1; int st, got = read(pipefd[0], &r, sizeof r) == sizeof r;
        waitpid(p, &st, 0); close(pipefd[0]);
        if (WIFSIGNALED(st) && !got) printf("\"%s\": \"signal %d\"", names[i], WTERMSIG(st));
        else if (r >= 0) printf("\"%s\": \"ok\"", names[i]);
        else printf("\"%s\": %ld", names[i], -r);
        printf(i < 12 ? ", " : "}\n");
    }
    return 0;
}
"""


@pytest.fixture
def attacks(tmp_path) -> Path:
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None or os.uname().machine != "x86_64":
        pytest.skip("needs a C compiler on x86_64")
    (tmp_path / "attacks.c").write_text(ATTACKS_C)
    built = subprocess.run(
        [cc, "-O0", "-o", str(tmp_path / "attacks"), str(tmp_path / "attacks.c")],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr
    return tmp_path


def test_no_other_abi_argument_trick_io_uring_or_tracer_makes_another_family(attacks):
    """Every other way to a netlink socket fails in the sandbox: other ABIs are killed (SIGSYS), the
    rest get EAFNOSUPPORT (97) or EPERM (1); clone3 gets ENOSYS (38). Unsandboxed (the kit runs as
    root here, or as a user) the same calls reach the kernel."""
    boxed = _result(sh(["./attacks"], attacks, limits=ProcessLimits(memory_mb=200)))
    for name in ("i386_socket", "i386_socketcall", "x32_socket"):
        assert boxed[name] == "signal 31", boxed
    for name in ("nr_upper", "family_upper", "family_upper2", "socketpair", "ptrace_rewrite"):
        assert boxed[name] == 97, boxed
    assert boxed["inet_sock_packet"] == 1, boxed  # AF_PACKET in disguise: no CAP_NET_RAW
    assert boxed["io_uring_setup"] == boxed["io_uring_enter"] == boxed["io_uring_register"] == 1, boxed
    assert boxed["clone3"] == 38, boxed
    plain = _result(sh(["./attacks"], attacks, "none", limits=ProcessLimits(memory_mb=200)))
    assert plain["family_upper"] == plain["nr_upper"] == plain["ptrace_rewrite"] == "ok", plain
    assert plain["io_uring_setup"] == "ok" and plain["i386_socket"] == "ok", plain


HONEST = textwrap.dedent("""
    import asyncio, http.server, json, multiprocessing, socket, threading, urllib.request, uuid
    def square(x):
        return x * x
    def pool(method):
        with multiprocessing.get_context(method).Pool(2) as p:
            return sum(p.map(square, range(10)))
    async def echo():
        srv = await asyncio.start_server(lambda r, w: (w.write(b"hi"), w.close()), "127.0.0.1", 0)
        r, w = await asyncio.open_connection("localhost", srv.sockets[0].getsockname()[1])
        data = await r.read(); w.close(); srv.close()
        return data.decode()
    def serve():
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
            def log_message(self, *a):
                pass
        srv = http.server.ThreadingHTTPServer(("localhost", 0), Handler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        try:
            return urllib.request.urlopen(f"http://localhost:{srv.server_address[1]}/", timeout=10).read().decode()
        finally:
            srv.shutdown()
    if __name__ == "__main__":
        a, b = socket.socketpair(); a.send(b"x")
        out = {"getaddrinfo": sorted({x[4][0] for x in socket.getaddrinfo("localhost", 80)}),
               "asyncio": asyncio.run(echo()), "http": serve(), "uuid1": uuid.uuid1().version,
               "socketpair": b.recv(1).decode(), "inet6": socket.create_server(("::1", 0), family=socket.AF_INET6) and "ok"}
        out.update({m: pool(m) for m in ("fork", "spawn", "forkserver")})
        print("RESULT", json.dumps(out))
""")


def test_what_honest_tasks_do_with_sockets_still_works(tmp_path):
    (tmp_path / "honest.py").write_text(HONEST)
    got = _result(sh(["python3", "honest.py"], tmp_path))
    assert got["getaddrinfo"] and got["getaddrinfo"][0] == "127.0.0.1", got
    assert got["asyncio"] == "hi" and got["http"] == "ok" and got["socketpair"] == "x", got
    assert got["uuid1"] == 1 and got["inet6"] == "ok", got
    assert got["fork"] == got["spawn"] == got["forkserver"] == 285, got


def _bwraps(marker: str) -> int:
    """How many bwrap processes run ``sleep <marker>``: 2 once bwrap has cloned the sandbox's pid 1."""
    found = 0
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        found += argv[0].endswith(b"bwrap") and any(marker.encode() in arg for arg in argv)
    return found


@as_root
@pytest.mark.parametrize("moment", ["bwrap-cloned", "0ms", "10ms", "40ms"])
def test_a_kit_killed_while_bwrap_sets_the_sandbox_up_leaves_nothing_running(tmp_path, parents, moment):  # noqa: F811
    """bwrap arms ``--die-with-parent`` in its clone (the sandbox's pid 1) only once that has set the
    sandbox up, and the clone does not inherit the launcher's ``setpriv --pdeathsig``: a kit killed
    meanwhile (a few to tens of ms per command) left the clone and the command running for good, with
    no timeout (``bwrap-cloned``: 5 runs in 5; killed 0 to 300 ms into the run: 3 in 26, at 30 and 50
    ms). The launcher's watchdog now kills the shell and the command's cgroups when the kit dies."""
    memory_parent, pids_parent = parents
    marker = f"{time.time_ns() % 10**6 + 900}.25"
    clone = tmp_path / "clone"
    clone.mkdir()
    run = f'get_sandbox("bwrap").run("sleep {marker}", Path({str(clone)!r}), writable=True, timeout_s=60)'
    child = _kit_in(memory_parent, pids_parent, run)
    try:
        if moment == "bwrap-cloned":
            deadline = time.monotonic() + 20
            while _bwraps(marker) < 2 and time.monotonic() < deadline:
                pass
            assert _bwraps(marker) >= 2, "bwrap never cloned"
        else:
            time.sleep(int(moment[:-2]) / 1000)
    finally:
        _kill(child)
    time.sleep(2)
    assert _live(marker) == []
    # the probe works: with the kit alive, the command runs
    child = _kit_in(memory_parent, pids_parent, run.replace("timeout_s=60", "timeout_s=3"))
    try:
        time.sleep(1.5)
        assert _live(marker) != []
    finally:
        child.wait()
    assert _live(marker) == []


@pytest.mark.parametrize("cgroups", ["as-is", "none"])
def test_the_watchdog_ends_with_the_command_and_shows_it_nothing(tmp_path, monkeypatch, cgroups):
    """The watchdog's pipe never reaches the command, and nothing of the launcher outlives a run;
    with no cgroup too (where the watchdog kills the launcher's process group)."""
    if cgroups == "none":
        monkeypatch.setattr(processes, "_cgroup_root", lambda: None)
        monkeypatch.setattr(processes, "_memory_cgroup_root", lambda: None)
    marker = f"{time.time_ns() % 10**6 + 950}.25"
    res = sh(f"readlink /proc/self/fd/0; cat; ls /proc/self/fd; : {marker}", tmp_path)
    assert res.output.split() == ["/dev/null", "0", "1", "2", "3"], res.output
    read, write = os.pipe()  # a descriptor the caller passes on 9, where the watchdog's would go
    os.write(write, b"passed")
    os.close(write)
    try:
        saved, inheritable = os.dup(9), os.get_inheritable(9)  # (pytest's, say)
    except OSError:
        saved = inheritable = None
    os.dup2(read, 9)
    os.close(read)
    try:
        res = sh(["sh", "-c", "cat <&9; ls /proc/self/fd"], tmp_path, pass_fds=[9])
    finally:
        if saved is None:
            os.close(9)
        else:
            os.dup2(saved, 9, inheritable=bool(inheritable))
            os.close(saved)
    assert res.output.split() == ["passed0", "1", "2", "3", "9"], res.output
    res = sh(f"sleep {marker}", tmp_path, timeout_s=1)
    assert res.timed_out
    time.sleep(0.3)
    left = [
        e for e in filter(str.isdigit, os.listdir("/proc"))
        if marker.encode() in _cmdline(e) and int(e) != os.getpid()
    ]  # fmt: skip
    assert left == []


def _cmdline(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
