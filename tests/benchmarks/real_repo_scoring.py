"""Scoring time of a real-repo task (issue 29: within 1.5x of plain pytest): the kit's scoring of the
reference solution versus plain pytest running the same hidden and own tests on the same tree.

The kit (``kit.scoring.scorer.score``) snapshots the clone, copies it clean, and runs the hidden
tests (with their twins, canaries and sealed checks) and the own tests in two sandboxed pytest sessions
at once; its first scoring of a task also runs the base commit's own tests (cached after). The floor
is plain pytest with the kit's interpreter, no sandbox, no plugin -- none autoloaded either
(``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1``, as the kit's sessions run: the environment's hypothesis,
anyio and xdist plugins cost about 1 s a session here, which the kit never pays) -- and no bytecode
kept between runs (``-B``: the kit scores a fresh copy every time): the hidden test modules on the
tree with ``acceptance/`` laid at its paths, and the task's test command (its deselected own tests
left out) on the tree with the base's tests -- once one after the other, once both at the same time
(as the kit runs them). Ratios are kit / floor, against the parallel floor (the kit's own
arrangement) and the sequential one; ``kit/dflt`` is against the parallel runs of pytest as it starts
by default in this environment (plugins autoloaded, bytecode cached), for comparison only. Run it as
a script, on built tasks (``python -m kit tasks build-suite real-repos``):

python tests/benchmarks/real_repo_scoring.py [--tasks ID,...] [--repeat N] [--sandbox bwrap]
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kit.paths import is_ignored
from kit.scoring.scorer import clear_base_cache, score
from kit.tasks.packages import command_env
from kit.tasks.requirements import test_files
from kit.tasks.task import Task, apply_solution, load_task
from kit.tasks.workspace import COPY_IGNORE, create_workspace

DEFAULT_TASKS = "boltons-table-text,more-itertools-running-statistics"


def lay_acceptance(task: Task, tree: Path) -> list[str]:
    """Copy ``acceptance/`` over ``tree`` at its repo paths; the hidden test modules (relative paths)."""
    for src in sorted(task.acceptance_dir.rglob("*")):
        rel = src.relative_to(task.acceptance_dir)
        if src.is_file() and not is_ignored(rel):
            (tree / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, tree / rel)
    return [p.relative_to(task.acceptance_dir).as_posix() for p in test_files(task.acceptance_dir)]


#: the floor's pytest: no plugin autoloaded, no bytecode written or read back (as the kit's sessions)
STRICT = (["-B"], {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
#: pytest as it starts by default in this environment (for comparison only)
DEFAULT: tuple[list[str], dict[str, str]] = ([], {})


def pytest(
    tree: Path, args: list[str], timeout: float, env: dict[str, str], how: tuple = STRICT
) -> tuple[float, int]:
    flags, how_env = how
    base_env = {k: v for k, v in os.environ.items() if k != "PYTEST_DISABLE_PLUGIN_AUTOLOAD"}
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, *flags, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=tree,
        capture_output=True,
        timeout=timeout,
        env={**base_env, **how_env, **env},
    )
    return time.perf_counter() - started, proc.returncode


def plain(task: Task, own_tree: Path, acc_tree: Path, hidden: list[str]) -> dict[str, float]:
    """Plain pytest: the hidden modules, and the own tests, sequentially and at the same time. Each
    tree gets the ``PYTHONPATH`` the kit's sessions give the task's packages (a ``src/`` layout)."""
    own_args = shlex.split(task.test_command)[3:] if task.test_command.startswith("python -m pytest") else []
    own_args += [f"--deselect={node}" for node in task.own_tests_deselect]
    limit = task.limits.scoring_timeout_s * 4
    env_h = command_env(task.packages, task.repo_dir, acc_tree)
    env_o = command_env(task.packages, task.repo_dir, own_tree)
    wall_h, rc_h = pytest(acc_tree, hidden, limit, env_h)
    wall_o, rc_o = pytest(own_tree, own_args, limit, env_o)
    assert rc_h == 0 and rc_o == 0, f"plain pytest failed: hidden exit {rc_h}, own exit {rc_o}"
    par = {}
    for name, how in (("par_s", STRICT), ("dflt_s", DEFAULT)):
        started = time.perf_counter()
        with ThreadPoolExecutor(2) as pool:
            both = [
                pool.submit(pytest, acc_tree, hidden, limit, env_h, how),
                pool.submit(pytest, own_tree, own_args, limit, env_o, how),
            ]
            assert all(f.result()[1] == 0 for f in both)
        par[name] = time.perf_counter() - started
    return {"hidden_s": wall_h, "own_s": wall_o, "seq_s": wall_h + wall_o, **par}


def measure(task_id: str, sandbox: str | None, repeat: int) -> dict[str, float]:
    task = load_task(task_id)
    with tempfile.TemporaryDirectory(prefix="real-repo-bench-") as tmp_name:
        tmp = Path(tmp_name)
        ws = create_workspace(task, tmp / "ws", sandbox=sandbox)
        apply_solution(task, ws.root)
        own_tree, acc_tree = tmp / "own", tmp / "acc"
        shutil.copytree(task.repo_dir, own_tree, ignore=COPY_IGNORE)
        apply_solution(task, own_tree)
        shutil.copytree(own_tree, acc_tree)
        hidden = lay_acceptance(task, acc_tree)
        clear_base_cache()
        kit_walls = []
        for _ in range(repeat + 1):  # the first includes the base commit's own-test run
            started = time.perf_counter()
            s = score(task, ws, claimed_done=True, sandbox=sandbox)
            kit_walls.append(time.perf_counter() - started)
            assert s.requirements_failed == 0 and not s.tampered and s.unscored_reason is None, s
        floors = [plain(task, own_tree, acc_tree, hidden) for _ in range(repeat)]
    out = {k: statistics.median(f[k] for f in floors) for k in floors[0]}
    return {
        **out,
        "kit_first_s": kit_walls[0],
        "kit_s": statistics.median(kit_walls[1:]),
        "hidden": len(hidden),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--tasks", default=DEFAULT_TASKS, help="task ids, comma-separated, or 'all' (the suite's)"
    )
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sandbox", default=None, help="bwrap (default on Linux) or none")
    args = ap.parse_args()
    print(
        f"{'task':<36} {'kit 1st':>8} {'kit':>7} {'plain hidden':>12} {'plain own':>9} "
        f"{'plain seq':>9} {'plain par':>9} {'kit/par':>7} {'kit/seq':>7} {'kit/dflt':>8}  (target kit/par <= 1.5)"
    )
    ids = args.tasks.split(",")
    if args.tasks == "all":
        from kit.tasks.task import load_suite

        ids = [i.id for i in load_suite("real-repos", check_tasks=False).imports]
    ratios: dict[str, float] = {}
    dflt: dict[str, float] = {}
    for task_id in ids:
        try:
            m = measure(task_id, args.sandbox, args.repeat)
        except Exception as exc:  # noqa: BLE001 - the row says why the task was not measured
            print(f"{task_id:<36} not measured: {type(exc).__name__}: {str(exc)[:160]}", flush=True)
            continue
        ratios[task_id] = m["kit_s"] / m["par_s"]
        dflt[task_id] = m["kit_s"] / m["dflt_s"]
        print(
            f"{task_id:<36} {m['kit_first_s']:>7.1f}s {m['kit_s']:>6.1f}s {m['hidden_s']:>11.1f}s "
            f"{m['own_s']:>8.1f}s {m['seq_s']:>8.1f}s {m['par_s']:>8.1f}s "
            f"{m['kit_s'] / m['par_s']:>7.2f} {m['kit_s'] / m['seq_s']:>7.2f} {m['kit_s'] / m['dflt_s']:>8.2f}",
            flush=True,
        )
    if ratios:
        worst = max(ratios, key=ratios.__getitem__)
        print(
            f"{len(ratios)} of {len(ids)} tasks measured: kit/par median {statistics.median(ratios.values()):.2f}, "
            f"worst {ratios[worst]:.2f} ({worst}); over 1.5: {sum(r > 1.5 for r in ratios.values())}; "
            f"against pytest's default start (kit/dflt): median {statistics.median(dflt.values()):.2f}, "
            f"over 1.5: {sum(r > 1.5 for r in dflt.values())}"
        )


if __name__ == "__main__":
    main()
