"""Tasks that are not independent samples: two tasks whose commit sets intersect (each task's
``source.commits``, the commits from its base to its head, head included) overlap -- e.g. a fix
commit inside a release span, whose hidden tests are among the span's. ``kit tasks list suite:X``
says so, so that a suite's averages are not read as that many independent tasks."""

from __future__ import annotations

from kit.tasks.task import Task


def commit_set(task: Task) -> set[str]:
    """The commits a task's reference change is made of (none for a task not from git history)."""
    if task.source is None:
        return set()
    return {*task.source.commits, task.source.head}


def overlaps(tasks: list[Task]) -> list[tuple[str, str, int]]:
    """(task a, task b, commits shared) for every pair whose commit sets intersect, in list order."""
    sets = [(t.id, commit_set(t)) for t in tasks]
    out = []
    for i, (a, sa) in enumerate(sets):
        for b, sb in sets[i + 1 :]:
            shared = len(sa & sb)
            if shared:
                out.append((a, b, shared))
    return out


def overlap_lines(tasks: list[Task]) -> list[str]:
    """What ``kit tasks list`` prints: one line per overlapping pair, and the independent count."""
    pairs = overlaps(tasks)
    if not pairs:
        return []
    lines = [
        f"overlapping tasks ({len(pairs)} pair(s); their commit sets intersect, not independent samples):"
    ]
    for a, b, n in pairs:
        lines.append(f"  {a} ∩ {b}: {n} commit(s) shared")
    return lines
