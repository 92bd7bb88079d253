"""A probe that tries to leave state in every kernel object that outlives a process, and to find such
state again. Run as ``python kernel_probe.py plant|find TOKEN [CLONE]`` inside a sandbox (the test copies
it into the clone); prints one JSON object: per channel what happened.

plant: for each channel, ``"denied: ..."`` when the kernel refused, else ``"planted"``, then
``"seen"`` / ``"lost"`` when the same command looks again (so a probe that does not work shows).
find: per channel the token when found, else ``null``.

Channels: kernel keyrings (the user, user-session and session keyrings), SysV shared memory, message
queues and semaphores, POSIX message queues and shared memory, files in every folder outside the
clone the command can write, and what /proc shows of keys and SysV objects.
"""

import ctypes
import ctypes.util
import json
import os
import platform
import sys

NR = {  # add_key, request_key, keyctl
    "x86_64": (248, 249, 250),
    "aarch64": (217, 218, 219),
}[platform.machine()]
KEYRINGS = {"user": -4, "user-session": -5, "session": -3}
KEY = 0x0BC4_2A17  # SysV IPC key
NAME = "orchbench-probe"
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p


def err() -> str:
    return "denied: " + os.strerror(ctypes.get_errno())


# --------------------------------------------------------------------------- keyrings


def plant_key(ring: int, token: bytes) -> str:
    got = libc.syscall(NR[0], b"user", NAME.encode(), token, len(token), ring)
    return err() if got < 0 else "planted"


def find_key(ring: int) -> str | None:
    key = libc.syscall(NR[2], 10, ring, b"user", NAME.encode(), 0)  # KEYCTL_SEARCH
    if key < 0:
        return None
    buf = ctypes.create_string_buffer(16384)
    n = libc.syscall(NR[2], 11, key, buf, 16384)  # KEYCTL_READ
    return buf.raw[: min(n, 16384)].decode() if n > 0 else None


# --------------------------------------------------------------------------- SysV IPC


def plant_shm(token: bytes) -> str:
    shm = libc.shmget(KEY, 4096, 0o1000 | 0o666)  # IPC_CREAT
    if shm < 0:
        return err()
    addr = libc.shmat(shm, None, 0)
    ctypes.memmove(addr, token + b"\0", len(token) + 1)
    libc.shmdt(ctypes.c_void_p(addr))
    return "planted"


def find_shm() -> str | None:
    shm = libc.shmget(KEY, 0, 0)
    if shm < 0:
        return None
    addr = libc.shmat(shm, None, 0o10000)  # SHM_RDONLY
    return ctypes.string_at(addr).decode() or None


class MsgBuf(ctypes.Structure):
    _fields_ = [("mtype", ctypes.c_long), ("mtext", ctypes.c_char * 128)]


def plant_msg(token: bytes) -> str:
    queue = libc.msgget(KEY, 0o1000 | 0o666)
    if queue < 0:
        return err()
    msg = MsgBuf(1, token)
    return "planted" if libc.msgsnd(queue, ctypes.byref(msg), len(token), 0o4000) == 0 else err()


def find_msg() -> str | None:
    queue = libc.msgget(KEY, 0)
    if queue < 0:
        return None
    msg = MsgBuf()
    n = libc.msgrcv(queue, ctypes.byref(msg), 128, 0, 0o4000 | 0o10000)  # IPC_NOWAIT | MSG_COPY-less
    if n < 0:
        n = libc.msgrcv(queue, ctypes.byref(msg), 128, 0, 0o4000)
    return msg.mtext[:n].decode() if n > 0 else "(queue)"


def plant_sem(token: bytes) -> str:
    sem = libc.semget(KEY, 1, 0o1000 | 0o666)
    if sem < 0:
        return err()
    return "planted" if libc.semctl(sem, 0, 16, ctypes.c_int(len(token))) == 0 else err()  # SETVAL


def find_sem() -> str | None:
    sem = libc.semget(KEY, 1, 0)
    return None if sem < 0 else f"(semaphore set {sem})"


# --------------------------------------------------------------------------- POSIX IPC


def plant_mq(token: bytes) -> str:
    mq_open = libc.mq_open
    mq_open.restype = ctypes.c_int
    mq = mq_open(f"/{NAME}".encode(), os.O_CREAT | os.O_RDWR, 0o666, None)
    if mq < 0:
        return err()
    return "planted" if libc.mq_send(mq, token, len(token), 0) == 0 else err()


def find_mq() -> str | None:
    mq = libc.mq_open(f"/{NAME}".encode(), os.O_RDONLY | os.O_NONBLOCK)
    if mq < 0:
        return None
    buf = ctypes.create_string_buffer(9000)
    n = libc.mq_receive(mq, buf, 9000, None)
    return buf.raw[:n].decode() if n > 0 else "(queue)"


def plant_posix_shm(token: bytes) -> str:
    fd = libc.shm_open(f"/{NAME}".encode(), os.O_CREAT | os.O_RDWR, 0o666)
    if fd < 0:
        return err()
    os.write(fd, token)
    os.close(fd)
    return "planted"


def find_posix_shm() -> str | None:
    fd = libc.shm_open(f"/{NAME}".encode(), os.O_RDONLY, 0)
    if fd < 0:
        return None
    data = os.read(fd, 16384)
    os.close(fd)
    return data.decode()


# --------------------------------------------------------------------------- files


def _rw_mounts() -> list[str]:
    """Mount points mounted read-write, from /proc/self/mountinfo (only those can take a file)."""
    out = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            fields = line.split()
            point, options = fields[4].replace("\\040", " "), fields[5].split(",")
            if "rw" in options and not point.startswith(("/proc", "/sys")):
                out.append(point)
    return out


def _walk(clone: str):
    """Folders of the read-write mounts, not entering the clone or another mount."""
    for point in _rw_mounts():
        if point.startswith(clone) or not os.path.isdir(point):
            continue
        dev = os.stat(point).st_dev
        for folder, dirs, files in os.walk(point):
            dirs[:] = [
                d
                for d in dirs
                if not os.path.join(folder, d).startswith(clone)
                and os.lstat(os.path.join(folder, d)).st_dev == dev
            ]
            yield folder, files


def writable_folders(clone: str) -> list[str]:
    """Every folder outside the clone (and /proc, /sys) this command may write in."""
    return sorted({folder for folder, _ in _walk(clone) if os.access(folder, os.W_OK)})


def plant_files(token: bytes, clone: str) -> str:
    wrote = []
    for folder in writable_folders(clone):
        try:
            with open(os.path.join(folder, f".{NAME}"), "wb") as fh:
                fh.write(token)
            wrote.append(folder)
        except OSError:
            pass
    return f"planted in {wrote}" if wrote else "denied: no writable folder"


def find_files(clone: str) -> str | None:
    for folder, files in _walk(clone):
        if f".{NAME}" in files:
            with open(os.path.join(folder, f".{NAME}")) as fh:
                return fh.read()
    return None


def find_proc() -> str | None:
    seen = []
    for path in (
        "/proc/keys",
        "/proc/key-users",
        "/proc/sysvipc/shm",
        "/proc/sysvipc/msg",
        "/proc/sysvipc/sem",
    ):
        try:
            with open(path) as fh:
                text = fh.read()
        except OSError:
            continue
        if NAME in text or f"{KEY:x}" in text.lower() or str(KEY) in text:
            seen.append(path)
    return ", ".join(seen) or None


def main() -> None:
    mode, token, clone = sys.argv[1], sys.argv[2].encode(), os.path.realpath(sys.argv[3])
    finds = {"keyring " + ring: (lambda r=r: find_key(r)) for ring, r in KEYRINGS.items()} | {
        "sysv shm": find_shm,
        "sysv msg": find_msg,
        "sysv sem": find_sem,
        "posix mq": find_mq,
        "posix shm": find_posix_shm,
        "files": lambda: find_files(clone),
        "proc": find_proc,
    }
    if mode == "find":
        print(json.dumps({name: find() for name, find in finds.items()}))
        return
    plants = {"keyring " + ring: (lambda r=r: plant_key(r, token)) for ring, r in KEYRINGS.items()} | {
        "sysv shm": lambda: plant_shm(token),
        "sysv msg": lambda: plant_msg(token),
        "sysv sem": lambda: plant_sem(token),
        "posix mq": lambda: plant_mq(token),
        "posix shm": lambda: plant_posix_shm(token),
        "files": lambda: plant_files(token, clone),
    }
    out = {}
    for name, plant in plants.items():
        what = plant()
        if not what.startswith("denied"):
            what += "; seen" if finds[name]() else "; lost"
        out[name] = what
    print(json.dumps(out))


if __name__ == "__main__":
    main()
