"""The ``podman`` and ``docker`` backends: every command in a fresh container of its own, removed when
the command ends (one container per command -- measured against an ``exec`` into one container per
run in ``tests/benchmarks/container_overhead.py``; what it costs and guarantees: ``docs/sandbox.md``).

A command's container (:meth:`ContainerSandbox.argv`):

- **sees** the image read-only (``--read-only``), a private ``/tmp`` (a size-capped tmpfs; HOME lives
  there), the command's folder at its host path -- the only writable place, or read-only when
  ``writable=False`` -- and the ``ro_binds`` read-only. Nothing else of the host: not the kit's
  checkout, ``datasets/``, ``results/``, other runs, the kit's environment or its ``/proc``;
- **is not root**: the sandbox user :data:`~kit.sandbox.base.SANDBOX_UID` when the kit runs as root
  (the folder is handed to that user first, as for bwrap), else the kit's own user; every capability
  dropped, ``no-new-privileges``, and a seccomp profile that also denies the kernel-keyring, BPF,
  perf and userfaultfd calls, mounts and new namespaces (podman: :mod:`kit.sandbox.podman`);
- has **no network** (``--network none``: a loopback of its own, not the host's), its own PID, IPC
  and UTS namespaces, and an init process (``--init``): when the command ends, every process it
  started -- setsid'd or in the background -- ends with the container;
- is **limited**: the whole tree's memory (``--memory``, swap included) and process count
  (``--pids-limit``), CPU seconds, address space and file size per process (``--ulimit``), the
  ``/tmp`` size; its output is read by the kit keeping head and tail, and the container writes no log
  of its own (``--log-driver none``: a command printing without end fills no disk);
- **times out**: the kit removes the container (``rm -f``) when the timeout passes; podman's
  ``--timeout`` also stops it should the kit itself die.

The kit's interpreter does not exist in the image: a command that starts it (``sys.executable``, as
scoring, snapshots and searches do) runs the image's ``python3``, and ``PATH`` is the system's.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from kit.sandbox import throwaway
from kit.sandbox.base import (
    SANDBOX_GID,
    SANDBOX_HOME,
    SANDBOX_UID,
    SYSTEM_PATH,
    SandboxUnavailable,
    drops_to_sandbox_user,
    hand_over,
    interpreter_bin,
    sandbox_env,
)
from kit.sandbox.client import FdPlan, run_client
from kit.sandbox.engine import DEFAULT_IMAGE, HOST_LABEL, _alive, _host, install_hint
from kit.sandbox.processes import DEFAULT_LIMITS, ProcessLimits, Result, _as_argv, _check_timeout
from kit.sandbox.throwaway import PRISTINE, THROWAWAY, Layer, Writable
from kit.sandbox.view import VIEW_PREFIX, view_path, view_text

FILE_DESCRIPTORS = 1024
NPROC = 32768
_names = itertools.count()


def _checked_path(path: Path) -> str:
    text = str(path)
    if any(c in text for c in ",:\n="):
        raise ValueError(f"a container cannot mount {text!r}: its path has ',', ':', '=' or a newline")
    return text


class ContainerSandbox:
    """One container per command (see the module docstring); subclasses name the client."""

    name = "container"
    binary = "true"

    def __init__(self, image: str | None = None) -> None:
        self.image = image or DEFAULT_IMAGE
        found = shutil.which(self.binary)
        if found is None:
            raise SandboxUnavailable(
                f"`sandbox: {self.name}` needs {self.binary}, which is not installed: {install_hint(self.binary)}"
            )
        self.client = found

    @property
    def spec(self) -> str:
        """The sandbox spec naming this backend and its image (``podman@IMAGE``)."""
        return f"{self.name}@{self.image}"

    # ----------------------------------------------------------------- what a subclass adds

    def global_args(self) -> list[str]:
        return []

    def run_args(self, timeout_s: float) -> list[str]:
        return []

    # ----------------------------------------------------------------- the command line

    def user(self) -> list[str]:
        if drops_to_sandbox_user():
            return ["--user", f"{SANDBOX_UID}:{SANDBOX_GID}"]
        return ["--user", f"{os.getuid()}:{os.getgid()}"]

    def limits_args(self, limits: ProcessLimits) -> list[str]:
        mb = 2**20
        ulimits = {  # (the address space is set by the command's shell: :meth:`wrap`)
            "cpu": limits.cpu_s,
            "fsize": limits.file_size_mb * mb,
            "nofile": FILE_DESCRIPTORS,
            # the pids cgroup counts this command's processes; RLIMIT_NPROC would count every process
            # of the sandbox user on the host (every run's commands), so it is set out of the way (the
            # most podman's runc accepts here: a higher value fails as "error setting rlimit type 6")
            "nproc": max(NPROC, limits.processes),
        }
        args = [f"--memory={limits.memory_mb}m", f"--memory-swap={limits.memory_mb}m"]
        args += [f"--pids-limit={limits.processes}"]
        for key, value in ulimits.items():
            args += ["--ulimit", f"{key}={value}:{value}"]
        return args

    def env_args(self, env: dict[str, str]) -> list[str]:
        env = dict(env)
        kit_bins = (
            interpreter_bin(),
            str(VIEW_PREFIX / "bin"),
        )  # (the kit's interpreter is not in the image)
        path = [p for p in env.get("PATH", "").split(os.pathsep) if p and p not in kit_bins]
        env["PATH"] = os.pathsep.join(path or SYSTEM_PATH)
        args: list[str] = []
        for key, value in env.items():
            if "=" in key or "\0" in key + value:
                continue
            args += ["--env", f"{key}={value}"]
        return args

    def mounts(
        self,
        cwd: Path,
        writable: Writable,
        ro_binds: Sequence[Path],
        pins: Sequence[Path] = (),
        limits: ProcessLimits = DEFAULT_LIMITS,
        layer: Layer | None = None,
        neutral: bool = False,
    ) -> list[str]:
        """``--mount`` arguments, outer folders first: ``cwd`` (throwaway: :meth:`throwaway_mounts`),
        the ``pins`` (folders under it bound onto themselves, so they cannot be renamed or removed)
        and the ``ro_binds``. ``neutral``: ``cwd`` at /work/repo (:mod:`kit.sandbox.view`)."""
        args, mounts = [], []
        where = (lambda p: view_path(p, cwd)) if neutral else (lambda p: p)
        if throwaway.check(writable, pins) == THROWAWAY:
            args = self.throwaway_mounts(cwd, limits, layer, where(cwd))
        else:
            mounts = [(cwd, not writable), *((Path(p).resolve(), not writable) for p in pins)]
        mounts += [(Path(p).resolve(), True) for p in ro_binds]
        for path, ro in sorted(mounts, key=lambda m: len(where(m[0]).parts)):
            spec = f"type=bind,source={_checked_path(path)},destination={_checked_path(where(path))}"
            args += ["--mount", spec + (",readonly=true" if ro else "")]
        return args

    # ----------------------------------------------------------------- throwaway writes

    #: True: the container's shell copies :data:`PRISTINE` into ``cwd`` before the command
    copies_throwaway = True

    def throwaway_layer(self, cwd: Path, limits: ProcessLimits) -> contextlib.AbstractContextManager:
        """What the kit prepares on the host for one throwaway command: nothing here (podman's
        overlay takes a :class:`~kit.sandbox.throwaway.Layer` as root)."""
        return contextlib.nullcontext()

    def throwaway_mounts(
        self, cwd: Path, limits: ProcessLimits, layer: Layer | None, dest: Path | None = None
    ) -> list[str]:
        """``cwd`` read-only at :data:`PRISTINE` and at ``cwd`` (or ``dest``) a tmpfs of the folder's
        size plus the scratch space, owned like ``cwd``; :meth:`wrap` fills it with a copy first."""
        size = throwaway.tree_bytes(cwd) // 2**20 + limits.scratch_mb
        uid, gid = self.user()[1].split(":")
        mode = oct(os.stat(cwd).st_mode & 0o7777)[2:]
        tmpfs = (
            f"{_checked_path(dest or cwd)}:rw,exec,nosuid,nodev,size={size}m,mode={mode},uid={uid},gid={gid}"
        )
        pristine = f"type=bind,source={_checked_path(cwd)},destination={PRISTINE},readonly=true"
        return ["--mount", pristine, "--tmpfs", tmpfs]

    def argv(
        self,
        command: list[str],
        cwd: Path,
        *,
        container: str,
        writable: Writable,
        timeout_s: float,
        limits: ProcessLimits = DEFAULT_LIMITS,
        env: dict[str, str] | None = None,
        ro_binds: Sequence[Path] = (),
        plan: FdPlan | None = None,
        pins: Sequence[Path] = (),
        layer: Layer | None = None,
        neutral: bool = False,
    ) -> list[str]:
        """The client's command line for one command in a fresh container named ``container``
        (``layer``: podman's throwaway overlay as root)."""
        cwd = Path(cwd).resolve()
        if command and command[0] in (sys.executable, os.path.realpath(sys.executable)):
            command = ["python3", *command[1:]]  # the kit's interpreter is not in the image
        args = [self.client, *self.global_args(), "run", "--rm", "--name", container]
        args += ["--label", f"{HOST_LABEL}={_host()}", "--pull=never"]
        args += ["--network=none", "--hostname=sandbox", "--cgroupns=private", "--init", "--log-driver=none"]
        args += [*self.user(), "--cap-drop=all", "--security-opt=no-new-privileges"]
        args += ["--read-only", "--tmpfs", f"/tmp:rw,nosuid,nodev,size={limits.scratch_mb}m,mode=1777"]
        args += [f"--shm-size={limits.scratch_mb}m"]
        args += self.limits_args(limits) + self.run_args(timeout_s)
        args += self.mounts(cwd, writable, ro_binds, pins, limits, layer, neutral)
        args += ["--workdir", str(view_path(cwd, cwd) if neutral else cwd)]
        env = dict(env if env is not None else sandbox_env())
        args += self.env_args({k: view_text(v, cwd) for k, v in env.items()} if neutral else env)
        if plan:
            args.append("--interactive")
        copy = writable == THROWAWAY and self.copies_throwaway
        return [*args, self.image, *self.wrap(command, limits, plan, copy=copy)]

    @staticmethod
    def wrap(
        command: list[str], limits: ProcessLimits, plan: FdPlan | None, *, copy: bool = False
    ) -> list[str]:
        """``command`` behind a shell that caps each process's address space (``ulimit -v``: podman
        has no ``--ulimit as``), makes HOME, and joins standard error to standard output in the
        container, their order kept (with descriptors to pass, the prelude does that last part).
        ``copy``: the shell first copies :data:`PRISTINE` into the working folder (throwaway)."""
        script = (
            f'ulimit -v {limits.memory_mb * 1024} || exit 125; mkdir -p {SANDBOX_HOME} 2>/dev/null; exec "$@"'
        )
        if copy:  # what cannot be read is left out: the command could not have read it either
            script = f"cp -a {PRISTINE}/. . 2>/dev/null; {script}"
        if plan:
            return ["/bin/sh", "-c", script, "sh", *plan.wrap(command)]
        return ["/bin/sh", "-c", script + " 2>&1", "sh", *command]

    # ----------------------------------------------------------------- running

    def sweep(self) -> list[str]:
        """Remove the containers a kit process on this host left when it died (Docker has no
        ``--timeout``: a command that never ends would outlive its kit); the names removed."""
        res = subprocess.run(
            [self.client, *self.global_args(), "ps", "--all", "--filter", f"label={HOST_LABEL}={_host()}"]
            + ["--format", "{{.Names}}"],
            capture_output=True, text=True, env=self.client_env(), timeout=60, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        stale = [n for n in res.stdout.split() if not _alive(n)]
        for name in stale:
            self.remove(name)
        return stale

    def remove(self, container: str) -> None:
        """Force-remove ``container`` (killing what runs in it); quiet if it is gone already, or if the
        engine does not answer within a minute (podman's ``--timeout`` and the next sweep remain)."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            subprocess.run(
                [self.client, *self.global_args(), "rm", "--force", container],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=60,
                check=False,
            )

    def client_env(self) -> dict[str, str]:
        """The client's own environment: the allow-list plus what finds the engine (never a key)."""
        env = {k: v for k, v in sandbox_env().items() if k != "PATH"}
        env["PATH"] = os.pathsep.join(SYSTEM_PATH)
        env["HOME"] = os.environ.get("HOME", "/root")
        for key in (
            "XDG_RUNTIME_DIR",
            "DOCKER_HOST",
            "DOCKER_CONTEXT",
            "CONTAINER_HOST",
            "CONTAINER_CONNECTION",
        ):
            if key in os.environ:
                env[key] = os.environ[key]
        return env

    def run(
        self,
        argv: str | list[str],
        cwd: Path,
        *,
        writable: Writable,
        timeout_s: float,
        limits: ProcessLimits = DEFAULT_LIMITS,
        env: dict[str, str] | None = None,
        ro_binds: Sequence[Path] = (),
        pass_fds: Sequence[int] = (),
        max_output_chars: int = 10_000,
        pins: Sequence[Path] = (),
        neutral: bool = False,
    ) -> Result:
        _check_timeout(timeout_s)
        throwaway.check(writable, pins)
        if drops_to_sandbox_user() and os.stat(cwd).st_uid != SANDBOX_UID:
            hand_over(Path(cwd))  # the folder the command works in is the sandbox user's
        if writable == THROWAWAY and self.copies_throwaway:
            throwaway.refuse_binds_inside(cwd, ro_binds, self.name)
        plan = FdPlan(pass_fds)
        container = f"orchbench-{os.getpid()}-{next(_names)}-{plan.marker[:8]}"
        prepared = self.throwaway_layer(cwd, limits) if writable == THROWAWAY else contextlib.nullcontext()
        with prepared as layer:  # the container is gone (--rm, or removed) before the layer goes
            full = self.argv(
                _as_argv(argv),
                cwd,
                container=container,
                writable=writable,
                timeout_s=timeout_s,
                limits=limits,
                env=env,
                ro_binds=ro_binds,
                plan=plan,
                pins=pins,
                layer=layer,
                neutral=neutral,
            )
            return run_client(
                full,
                env=self.client_env(),
                timeout_s=timeout_s,
                max_output_chars=max_output_chars,
                plan=plan,
                remove=lambda: self.remove(container),
            )
