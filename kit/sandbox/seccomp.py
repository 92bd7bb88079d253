"""The seccomp filter every bwrap command runs under (bwrap's ``--seccomp FD``): a classic-BPF program
assembled here, for x86_64 and aarch64, that denies the system calls reaching kernel state no
namespace of the sandbox makes private, and those that mount or make namespaces.

Why these calls. Each bwrap command gets new PID, network, IPC, UTS and cgroup namespaces, a private
``/tmp`` and ``/dev``: what a process leaves in those dies with the command. What is left is state
the kernel keeps per *user* -- and every run's commands, scoring sessions included, are the same
sandbox user -- with no namespace of the sandbox's around it:

- **kernel keyrings** (``add_key``, ``keyctl``, ``request_key``): the user and user-session keyrings
  outlive every process of their uid, and a command inherits the kit's session keyring; a key added
  by run A's command (its solution, the hidden tests' inputs seen in scoring) would be read by run
  B's. Denied (EPERM), as Docker's default profile denies them;
- **BPF objects** (``bpf``): maps and programs can be pinned and shared; denied;
- **performance counters** (``perf_event_open``) and **userfaultfd** see or stall other processes'
  work; denied (also Docker's defaults).

**Mounts and new namespaces** are denied too (EPERM): ``mount``, ``umount2``, ``pivot_root``, the new
mount API (``open_tree``, ``move_mount``, ``fsopen``, ``fsconfig``, ``fsmount``, ``fspick``,
``mount_setattr``), ``unshare``, ``setns``, and ``clone`` with any ``CLONE_NEW*`` flag (its flags are
an argument the filter reads); ``clone3``, whose flags sit in memory a filter cannot read, fails with
ENOSYS, on which the C library falls back to ``clone`` (threads, ``fork``, ``posix_spawn`` work as
before). Why: a sandboxed process -- an agent's command, or the code under test inside a scoring
session, in-process through ctypes -- could otherwise make a user namespace of its own, which grants
it mount rights there, and mount a tmpfs over a read-only folder of hidden test data laid in the repo
copy (``tests/golden``): from then on pytest and the hidden tests in that process read the agent's
expected values. Nothing leaves the process's own namespace, but that is where the tests run.
Without the mount calls a new user namespace could cover nothing, but namespace creation is denied
as well: it is the door to every other namespaced privilege, and no task needs it. bwrap makes its
own namespaces and mounts before it loads the filter (just before it starts the command), so its
setup is unaffected. (Docker's default profile denies the same calls.)

**Sockets** of families other than AF_UNIX, AF_INET and AF_INET6 are refused (``socket``,
``socketpair``: EAFNOSUPPORT, as on a kernel without them), and io_uring is denied (EPERM): a netlink
socket's queue is charged to no memory cgroup -- up to 8 MB a socket with no limit across sockets, 40
of them held 310 MB under a 100 MB cap --, AF_VSOCK reaches the VM's host, which no network
namespace covers, and an io_uring (``IORING_OP_SOCKET``) makes a socket without the ``socket`` call.
Without netlink the C library's ``getaddrinfo`` assumes both IPv4 and IPv6 (as it does where netlink
fails); ``if_nameindex`` and ``getifaddrs`` fail.

A user namespace per command would make the user keyrings private too (the kernel keys them by user
namespace), but not the session keyring a command inherits from the kit, and the command would need
a uid map and a second drop of privileges inside it; denying the calls closes the class whatever the
kernel's keyring namespacing does, and costs one pipe per command.

The filter allows only the native system-call ABI: a call made through another one (x86's 32-bit
``int 0x80`` or the x32 ABI, arm32 on aarch64) kills the process -- otherwise ``keyctl`` under its
32-bit number would pass. On any other machine :func:`program` returns None and bwrap runs without
the filter (``filter_mechanism()`` says so).
"""

from __future__ import annotations

import errno
import functools
import os
import platform
import struct
import sys

# classic BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h)
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K
RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000
RET_ALLOW = 0x7FFF0000
_NR, _ARCH = 0, 4  # offsets in struct seccomp_data
#: the low 32 bits of the first argument (``struct seccomp_data``'s args start at 16; native order)
_ARG0_LOW = 16 if sys.byteorder == "little" else 20
#: CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID |
#: CLONE_NEWNET (Docker's profile masks the same bits); CLONE_NEWTIME is only known to clone3/unshare
CLONE_NEW = 0x7E020000

#: the new mount API: the same numbers on every architecture (the unified table, Linux 5.2+)
_NEW_MOUNT_API = {
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "mount_setattr": 442,
}  # fmt: skip
_IO_URING = {"io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427}
#: (audit arch, bits that mark a foreign ABI in the call number, call numbers by name) per machine.
ARCHES: dict[str, tuple[int, int, dict[str, int]]] = {
    "x86_64": (
        0xC000003E,  # AUDIT_ARCH_X86_64
        0x40000000,  # __X32_SYSCALL_BIT
        {"add_key": 248, "request_key": 249, "keyctl": 250, "perf_event_open": 298, "bpf": 321, "userfaultfd": 323,
         "mount": 165, "umount2": 166, "pivot_root": 155, "unshare": 272, "setns": 308, "clone": 56, "clone3": 435,
         "socket": 41, "socketpair": 53, **_IO_URING, **_NEW_MOUNT_API},
    ),
    "aarch64": (
        0xC00000B7,  # AUDIT_ARCH_AARCH64
        0,
        {"add_key": 217, "request_key": 218, "keyctl": 219, "perf_event_open": 241, "bpf": 280, "userfaultfd": 282,
         "mount": 40, "umount2": 39, "pivot_root": 41, "unshare": 97, "setns": 268, "clone": 220, "clone3": 435,
         "socket": 198, "socketpair": 199, **_IO_URING, **_NEW_MOUNT_API},
    ),
}  # fmt: skip
KERNEL_STATE = ("add_key", "request_key", "keyctl", "bpf", "perf_event_open", "userfaultfd")
MOUNTS = (
    "mount", "umount2", "pivot_root", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick",
    "mount_setattr",
)  # fmt: skip
NAMESPACES = ("unshare", "setns")
#: denied outright (EPERM); besides, ``clone`` with a CLONE_NEW* flag (EPERM) and ``clone3`` (ENOSYS)
DENIED = KERNEL_STATE + MOUNTS + NAMESPACES
#: the only socket families ``socket`` and ``socketpair`` may make (others: EAFNOSUPPORT): AF_UNIX,
#: AF_INET, AF_INET6. A netlink socket's queue is charged to no memory cgroup (40 of them held 310 MB
#: under a 100 MB cap, up to 8 MB each with no limit across sockets), and AF_VSOCK reaches the VM's
#: host, which no network namespace covers.
SOCKET_FAMILIES = (1, 2, 10)
#: denied in bwrap's filter (EPERM): an io_uring ``IORING_OP_SOCKET`` makes a socket of any family
#: without the ``socket`` call the filter checks
IO_URING = tuple(_IO_URING)


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def _link(prog: list[tuple[int, str | int, str | int, int]], labels: dict[str, int]) -> bytes:
    """``prog``'s instructions with their jump targets (a label, or 0: the next one) made relative."""
    out = []
    for at, (code, jt, jf, k) in enumerate(prog):
        rel = [labels[t] - at - 1 if isinstance(t, str) else t for t in (jt, jf)]
        out.append(_insn(code, rel[0], rel[1], k))
    return b"".join(out)


def assemble(arch: str) -> bytes:
    """The filter for machine ``arch`` (a key of :data:`ARCHES`) as bwrap reads it: struct
    sock_filter entries in native byte order."""
    audit_arch, foreign_bits, numbers = ARCHES[arch]
    prog: list[tuple[int, str | int, str | int, int]] = [(_LD_W_ABS, 0, 0, _ARCH)]
    prog.append((_JEQ_K, 0, "kill", audit_arch))  # another ABI: kill
    prog.append((_LD_W_ABS, 0, 0, _NR))
    if foreign_bits:
        prog.append((_JSET_K, "kill", 0, foreign_bits))  # x32 numbers: kill
    prog += [(_JEQ_K, "deny", 0, numbers[name]) for name in DENIED + IO_URING]
    prog.append((_JEQ_K, "enosys", 0, numbers["clone3"]))  # (its flags are out of the filter's reach)
    prog += [(_JEQ_K, "family", 0, numbers[name]) for name in ("socket", "socketpair")]
    prog.append((_JEQ_K, 0, "allow", numbers["clone"]))
    prog.append((_LD_W_ABS, 0, 0, _ARG0_LOW))  # clone's flags
    prog.append((_JSET_K, "deny", "allow", CLONE_NEW))
    family = len(prog)
    prog.append((_LD_W_ABS, 0, 0, _ARG0_LOW))  # the socket's family
    prog += [(_JEQ_K, "allow", 0, f) for f in SOCKET_FAMILIES]
    prog.append((_RET_K, 0, 0, RET_ERRNO | errno.EAFNOSUPPORT))
    labels = {name: len(prog) + i for i, name in enumerate(("allow", "deny", "enosys", "kill"))}
    labels["family"] = family
    prog.append((_RET_K, 0, 0, RET_ALLOW))
    prog.append((_RET_K, 0, 0, RET_ERRNO | errno.EPERM))
    prog.append((_RET_K, 0, 0, RET_ERRNO | errno.ENOSYS))
    prog.append((_RET_K, 0, 0, RET_KILL_PROCESS))
    return _link(prog, labels)


@functools.cache
def program() -> bytes | None:
    """The filter for this machine, or None where the kit has none (another machine or OS)."""
    machine = platform.machine().lower()
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    if platform.system() != "Linux" or machine not in ARCHES:
        return None
    return assemble(machine)


def filter_mechanism() -> str:
    """What denies the keyring, mount and namespace calls in a bwrap command here."""
    if program() is None:
        return f"none (no seccomp filter for {platform.machine()})"
    return (
        "seccomp (" + ", ".join(DENIED + IO_URING) + ", clone with CLONE_NEW* denied; clone3 ENOSYS; "
        "sockets: AF_UNIX, AF_INET, AF_INET6 only)"
    )


def filter_fd() -> int | None:
    """A fresh pipe's read end holding :func:`program` (bwrap reads it to its end), or None. The
    caller passes it to bwrap and closes it after the command started."""
    prog = program()
    if prog is None:
        return None
    read_fd, write_fd = os.pipe()
    try:
        os.write(write_fd, prog)  # a few hundred bytes: far below a pipe's buffer
    finally:
        os.close(write_fd)
    return read_fd
