"""What a container sandbox costs, per command and per run, beside bwrap and a plain process.

    flock /work/wt/.heavy.lock .venv/bin/python tests/benchmarks/container_overhead.py [--n 10] [--no-smoke]

1. **Per command** (``true``, ``python -c pass``): the median wall time of N runs of the floor (a plain
   ``subprocess.run``), the ``none`` and ``bwrap`` backends, and for each container engine that runs
   here (``podman``, ``docker``): the kit's backend -- a fresh container per command (``run --rm``) --
   and the design it was measured against, an ``exec`` into one long-lived container of the run with
   the same options. ``exec`` is the lower bound of that design: to give the per-command guarantees
   (every process gone at the end, a fresh /tmp, a read-only clone for a read-only role, the memory
   and process caps per command) it would need a second ``exec`` per command to clean up, and a
   container per role and per scoring session.
2. **Per run** (``--no-smoke`` skips it): ``kit run experiments/scripted-smoke.yaml`` (2 tasks, vibe, the
   scripted model -- pipeline validation, not a benchmark result) under each backend: its wall time,
   and each run's wall and scoring time.

Run it alone (under the heavy lock): figures taken while other work shares the two CPUs are
inflated -- the script prints the load average beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kit.errors import KitError  # noqa: E402
from kit.sandbox.backends import CONTAINER_BACKENDS, check_available, get_sandbox, sandbox_env  # noqa: E402
from kit.sandbox.container import ContainerSandbox  # noqa: E402
from tests.benchmarks.sandbox_overhead import medians_ms  # noqa: E402

COMMANDS = {"true": ["true"], "python -c pass": ["python3", "-c", "pass"]}


def _engines() -> list[str]:
    ready = []
    for name in CONTAINER_BACKENDS:
        try:
            check_available(name)
            ready.append(name)
        except (KitError, OSError) as exc:
            print(f"{name}: not measured ({exc})")
    return ready


class _Exec:
    """One long-lived container with the kit's options, and ``exec`` into it."""

    def __init__(self, box: ContainerSandbox, cwd: Path) -> None:
        self.box, self.name = box, f"orchbench-{os.getpid()}-bench-exec"
        argv = box.argv(["sleep", "3600"], cwd, container=self.name, writable=True, timeout_s=3600)
        run = argv.index("run")
        argv.insert(run + 1, "--detach")
        subprocess.run(argv, check=True, capture_output=True, env=box.client_env())

    def __call__(self, command: list[str]) -> None:
        subprocess.run(
            [self.box.client, *self.box.global_args(), "exec", self.name, *command],
            check=True,
            capture_output=True,
            env=self.box.client_env(),
        )

    def close(self) -> None:
        self.box.remove(self.name)


def per_command(n: int, engines: list[str]) -> None:
    env = sandbox_env()
    names = ["floor", "none", "bwrap"] + [f"{e} {how}" for e in engines for how in ("run", "exec")]
    print(f"\nper command: median ms of {n} runs, interleaved; load average {os.getloadavg()[0]:.1f}")
    print(f"{'command':<16}" + "".join(f"{name:>13}" for name in names))
    with tempfile.TemporaryDirectory(prefix="container-bench-") as tmp:
        cwd = Path(tmp)
        os.chmod(cwd, 0o755)
        execs = [_Exec(get_sandbox(e), cwd) for e in engines]
        try:
            for label, argv in COMMANDS.items():
                host_argv = [sys.executable, *argv[1:]] if argv[0] == "python3" else argv
                fns = [
                    lambda a=host_argv: subprocess.run(a, cwd=cwd, env=env, check=True),
                    lambda a=host_argv: get_sandbox("none").run(a, cwd, writable=True, timeout_s=60),
                    lambda a=host_argv: get_sandbox("bwrap").run(a, cwd, writable=True, timeout_s=60),
                ]
                for engine, ex in zip(engines, execs, strict=True):
                    fns.append(
                        lambda a=argv, e=engine: get_sandbox(e).run(a, cwd, writable=True, timeout_s=60)
                    )
                    fns.append(lambda a=argv, x=ex: x(a))
                print(f"{label:<16}" + "".join(f"{ms:>13.0f}" for ms in medians_ms(fns, n)))
        finally:
            for ex in execs:
                ex.close()


def smoke(backends: list[str]) -> None:
    print(f"\nscripted smoke (2 runs, scripted model: pipeline validation); load {os.getloadavg()[0]:.1f}")
    print(f"{'backend':<8} {'wall s':>7}  runs (wall s / scoring s)")
    kit = Path(__file__).resolve().parents[2]
    for backend in backends:
        with tempfile.TemporaryDirectory(prefix="smoke-bench-") as tmp:
            started = time.monotonic()
            subprocess.run(
                [sys.executable, "-m", "kit", "run", "experiments/scripted-smoke.yaml", "--sandbox", backend]
                + ["--results", tmp, "--quiet", "--no-report"],
                cwd=kit,
                check=True,
                capture_output=True,
            )
            wall = time.monotonic() - started
            runs = []
            for path in sorted(Path(tmp).glob("*/runs/*/run.json")):
                run = json.loads(path.read_text())
                runs.append(
                    f"{run['task']} {run['outcome']} {run['wall_s']:.1f}/{run['score']['scoring_s']:.1f}"
                )
            print(f"{backend:<8} {wall:>7.1f}  " + "; ".join(runs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10, help="runs per command and backend")
    parser.add_argument("--no-smoke", action="store_true", help="skip the scripted smoke experiment")
    args = parser.parse_args()
    engines = _engines()
    per_command(args.n, engines)
    if not args.no_smoke:
        smoke(["none", "bwrap", *engines])
    if shutil.which("nproc"):
        print(f"\n(cpus: {os.cpu_count()}; figures are medians on a machine others may share)")


if __name__ == "__main__":
    main()
