"""How many acceptance tests of the shipped tasks have a sealed check (an equality whose expected value
never enters the scoring session: kit/scoring/seal.py), how many get a must-fail twin (a test
whose checks are all sealed needs none; a test with neither is counted ``unguarded`` by scoring),
per task and over all of them, and how many of those twins hold a
sentinel check (``==`` against a sentinel, ``raises`` of a sentinel type: these catch a value equal
to anything or a patched ``raises``) rather than only inverted truth checks (which catch a patched
assertion machinery, as every twin's final must-fail assertion does). Nothing is run: the twins are derived from
a copy of each task's ``acceptance/`` exactly as scoring derives them. Run it as a script:

python tests/benchmarks/twin_coverage.py
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from kit.scoring.inject import inject_folder
from kit.tasks.requirements import read_requirements
from kit.tasks.task import list_tasks


def coverage() -> list[tuple[str, int, int, int, int, list[str]]]:
    """(task, requirements, sealed, twinned, with a sentinel check, unguarded keys) per shipped
    task; baseline_pass tests excluded."""
    rows = []
    for task in sorted(list_tasks(), key=lambda t: t.id):
        requirements, _ = read_requirements(task.acceptance_dir)
        keys = {r.key for r in requirements if not r.baseline_pass}
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / "acceptance"
            shutil.copytree(task.acceptance_dir, folder)
            found = inject_folder(folder)
        unguarded = sorted(k for k in found.unguarded if k in keys)
        sealed = len(keys & {check.key for check in found.sealed.values()})
        twinned = len(keys & set(found.twins.values()))
        sentinel = sum(bool(found.kinds.get(k, set()) & {"equal", "raises"}) for k in keys)
        rows.append((task.id, len(keys), sealed, twinned, sentinel, unguarded))
    return rows


def main() -> None:
    rows = coverage()
    head = f"{'task':<30} {'requirements':>12} {'sealed':>7} {'twinned':>8} {'sentinel':>8} {'unguarded':>9}"
    print(head)
    for task_id, total, sealed, twinned, sentinel, unguarded in rows:
        print(f"{task_id:<30} {total:>12} {sealed:>7} {twinned:>8} {sentinel:>8} {len(unguarded):>9}")
        for key in unguarded:
            print(f"    unguarded: {key}")
    total, sealed, twinned, sentinel = (sum(r[i] for r in rows) for i in (1, 2, 3, 4))
    unguarded = sum(len(r[5]) for r in rows)
    name = f"all {len(rows)} tasks"
    print(f"{name:<30} {total:>12} {sealed:>7} {twinned:>8} {sentinel:>8} {unguarded:>9}")
    print(
        f"sealed: {sealed / total:.1%} of requirements; twinned: {twinned / total:.1%} (with a sentinel "
        f"check: {sentinel / total:.1%}); unguarded: {unguarded / total:.1%}"
    )


if __name__ == "__main__":
    main()
