"""The seccomp filter every bwrap command runs under (bwrap's ``--seccomp FD``): a classic-BPF program
assembled here, for x86_64 and aarch64, that denies the system calls reaching kernel state no
namespace of the sandbox makes private.

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

# classic BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h)
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K
RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000
RET_ALLOW = 0x7FFF0000
_NR, _ARCH = 0, 4  # offsets in struct seccomp_data

#: (audit arch, bits that mark a foreign ABI in the call number, call numbers by name) per machine.
ARCHES: dict[str, tuple[int, int, dict[str, int]]] = {
    "x86_64": (
        0xC000003E,  # AUDIT_ARCH_X86_64
        0x40000000,  # __X32_SYSCALL_BIT
        {"add_key": 248, "request_key": 249, "keyctl": 250, "perf_event_open": 298, "bpf": 321, "userfaultfd": 323},
    ),
    "aarch64": (
        0xC00000B7,  # AUDIT_ARCH_AARCH64
        0,
        {"add_key": 217, "request_key": 218, "keyctl": 219, "perf_event_open": 241, "bpf": 280, "userfaultfd": 282},
    ),
}  # fmt: skip
DENIED = ("add_key", "request_key", "keyctl", "bpf", "perf_event_open", "userfaultfd")


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def assemble(arch: str) -> bytes:
    """The filter for machine ``arch`` (a key of :data:`ARCHES`) as bwrap reads it: struct
    sock_filter entries in native byte order."""
    audit_arch, foreign_bits, numbers = ARCHES[arch]
    denied = [numbers[name] for name in DENIED]
    prog = [_insn(_LD_W_ABS, 0, 0, _ARCH)]
    # the checks below end in three returns: allow, deny (EPERM), kill; jumps count from the next one
    checks = 1 + (1 if foreign_bits else 0) + len(denied)  # instructions after this jump, before the returns
    prog.append(_insn(_JEQ_K, 0, checks + 2, audit_arch))  # another ABI: kill
    prog.append(_insn(_LD_W_ABS, 0, 0, _NR))
    left = checks - 1  # this check and the ones after it: allow is ``left`` ahead of the next one
    if foreign_bits:
        prog.append(_insn(_JSET_K, left + 1, 0, foreign_bits))  # x32 numbers: kill
        left -= 1
    for nr in denied:
        prog.append(_insn(_JEQ_K, left, 0, nr))  # deny
        left -= 1
    prog.append(_insn(_RET_K, 0, 0, RET_ALLOW))
    prog.append(_insn(_RET_K, 0, 0, RET_ERRNO | errno.EPERM))
    prog.append(_insn(_RET_K, 0, 0, RET_KILL_PROCESS))
    return b"".join(prog)


@functools.cache
def program() -> bytes | None:
    """The filter for this machine, or None where the kit has none (another machine or OS)."""
    machine = platform.machine().lower()
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    if platform.system() != "Linux" or machine not in ARCHES:
        return None
    return assemble(machine)


def filter_mechanism() -> str:
    """What denies the keyring calls in a bwrap command here."""
    if program() is None:
        return f"none (no seccomp filter for {platform.machine()})"
    return "seccomp (" + ", ".join(DENIED) + " denied)"


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
