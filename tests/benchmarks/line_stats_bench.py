"""The cost of the kit's own count of the lines changed (kit.scoring.diffstats.line_stats) against
git's ``--numstat`` it replaced, on a synthetic clone: ``text`` rewrites half the lines of 30 of 40
10 KB modules and adds five (a patch of ~740 KB); ``big`` adds a 7 MB text file and a 20 MB binary
one (over the cap: counted whole). Prints the counts, the medians of 5 and, with /usr/bin/time -v,
the peak memory:

    .venv/bin/python tests/benchmarks/line_stats_bench.py text|big
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # (for ``tests.``: run as a script)

from kit.scoring.diffstats import line_stats  # noqa: E402
from kit.tasks.patch import snapshot_diff  # noqa: E402
from kit.tasks.snapshot import snapshot  # noqa: E402
from kit.tasks.task import load_task  # noqa: E402
from kit.tasks.workspace import create_workspace  # noqa: E402
from tests.importers.test_attack39d import _hand_made_task  # noqa: E402


def median_ms(fn) -> float:
    times = []
    for _ in range(5):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def main(mode: str, tmp: Path) -> None:
    rnd = random.Random(1)
    task = _hand_made_task(tmp)
    for i in range(40):
        body = "".join(f"def f{j}(x):\n    return x * {j} + {rnd.random()}\n\n" for j in range(250))
        (task / "repo" / f"m{i}.py").write_text(body)
    ws = create_workspace(load_task(task), tmp / "clone")
    if mode == "text":
        for i in range(30):
            path = ws.root / f"m{i}.py"
            lines = path.read_text().splitlines(True)
            path.write_text(
                "".join(x if k % 2 else x.replace("return", "return -") for k, x in enumerate(lines))
            )
        for i in range(5):
            (ws.root / f"new{i}.py").write_text(
                "".join(f"def g{j}(y):\n    return y - {j}\n" for j in range(1000))
            )
    else:
        (ws.root / "big.txt").write_bytes(
            b"".join(b"row %d, %f\n" % (j, rnd.random()) for j in range(300000))
        )
        (ws.root / "blob.bin").write_bytes(os.urandom(20 * 2**20))
    with snapshot(ws.root, ws.sandbox) as snap:
        stats = line_stats(ws, snap)
        ours = median_ms(lambda: line_stats(ws, snap))
        git = median_ms(lambda: snapshot_diff(ws, snap, "--numstat", "--no-renames"))
        patch_kb = len(snapshot_diff(ws, snap, "--no-renames")) / 1024
    print(
        f"{mode}: {stats.files} files, +{stats.added} -{stats.removed}, counted whole {stats.counted_whole}; "
        f"patch {patch_kb:.0f} KB; line_stats median {ours:.0f} ms, git --numstat median {git:.0f} ms"
    )


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="orchbench-lines-") as folder:
        main(sys.argv[1] if len(sys.argv) > 1 else "text", Path(folder))
