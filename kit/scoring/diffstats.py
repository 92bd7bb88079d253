"""Lines changed since the base commit: (files touched, lines added, lines removed) from a snapshot of
the clone (:mod:`kit.tasks.snapshot`), as every score records them."""

from __future__ import annotations

from kit.tasks.patch import snapshot_diff
from kit.tasks.snapshot import Snapshot, snapshot
from kit.tasks.workspace import Workspace


def diff_stats_of(ws: Workspace, snap: Snapshot) -> tuple[int, int, int]:
    """(files touched, lines added, lines removed) from the base to the snapshot; binary files count 0 lines."""
    out = snapshot_diff(ws, snap, "--numstat", "--no-renames").decode("utf-8", "replace")  # as the patch
    files = added = removed = 0
    for line in out.splitlines():
        parts = line.split("\t", 2)
        if len(parts) < 3:
            continue
        files += 1
        added += int(parts[0]) if parts[0].isdigit() else 0
        removed += int(parts[1]) if parts[1].isdigit() else 0
    return files, added, removed


def diff_stats(ws: Workspace) -> tuple[int, int, int]:
    """(files touched, lines added, lines removed) since the base commit, from a fresh snapshot."""
    with snapshot(ws.root, ws.sandbox) as snap:
        return diff_stats_of(ws, snap)
