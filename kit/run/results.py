"""The experiment's results folder: ``<results>/<experiment>/`` with its ``runs/``, which runs in it
are finished (resume), and the one message for records that cannot be written.

Resume: a run whose run.json exists is skipped; a run folder without a readable run.json is a torn run
and is redone from scratch (no partial or duplicate records survive), and so is a run recorded as
``interrupted`` (Ctrl-C). ``retry_errors`` also redoes runs whose outcome was ``error`` or
``unscored``. The files are described in ``docs/records.md``; the outcomes in ``docs/strategies.md``
(``## Outcomes and stop reasons``).
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from pathlib import Path

from kit.config import Limits
from kit.errors import ResultsError
from kit.paths import results_root
from kit.records.schema import load_run
from kit.tasks.snapshot import DEFAULT_LIMITS as SNAPSHOT_LIMITS

EXPERIMENT_COPY = "experiment.yaml"
PRICE_SHEET_COPY = "price_sheet.yaml"
INTERRUPTED = "interrupted"  # outcome of a run stopped by Ctrl-C: redone by the next run


def prepare_results(results_dir: str | Path | None, name: str) -> Path:
    """``<results>/<name>`` as an absolute path (a relative ``results_dir`` is taken from the current
    folder), created with its ``runs/`` folder; one ResultsError when it cannot be used."""
    root = Path(results_dir or results_root()).expanduser().resolve()
    out = root / name
    for p in (*reversed(out.parents), out, out / "runs"):
        if p.exists() and not p.is_dir():
            raise ResultsError(
                f"results path {p} is a file, not a folder", "pass --results a folder (or move the file away)"
            )
    try:
        (out / "runs").mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ResultsError(
            f"cannot create the results folder {out}: {e.strerror or e}",
            "pick a writable folder with --results (or fix its permissions)",
        ) from None
    return out


def storage_error(out: Path, err: OSError, detail: str = "") -> ResultsError:
    """The one message for records that could not be written under ``out`` (disk full, read-only)."""
    what = "the disk is full" if err.errno in (errno.ENOSPC, errno.EDQUOT) else (err.strerror or str(err))
    where = f" ({err.filename})" if err.filename else ""
    return ResultsError(
        f"cannot write records under {out}: {what}{where}" + (f"; {detail}" if detail else ""),
        "free space (or fix the folder's permissions), then run the same command again: finished runs "
        "are kept, the others are redone",
    )


#: What one finished run may take on the results disk: run.json, the JSONL and Parquet files, the
#: prompts and diff.patch (at most 8 MB: kit.tasks.patch), and the clone it keeps (at most 16 MB,
#: kit.sandbox.quota.KEPT_CLONE_BYTES: a larger one is removed once the run is scored).
RECORDS_PER_RUN_MB = 32
#: Room each run holds on the results disk from its start until its last records are written (a file
#: of this size in the run folder, freed just before diff.patch and run.json are written): a disk
#: another run fills meanwhile cannot keep a scored run from being recorded.
ROOM_BYTES = 12 * 2**20
ROOM_FILE = ".records-room"


def hold_room(run_dir: Path) -> None:
    """Take :data:`ROOM_BYTES` of the results disk for the run's last records (an OSError when the
    disk has no such room: the run does not start)."""
    fd = os.open(run_dir / ROOM_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        if hasattr(os, "posix_fallocate"):
            os.posix_fallocate(fd, 0, ROOM_BYTES)
        else:  # macOS: written out
            for _ in range(ROOM_BYTES // 2**20):
                os.write(fd, bytes(2**20))
    except OSError:
        os.close(fd)
        (run_dir / ROOM_FILE).unlink(missing_ok=True)
        raise
    os.close(fd)


def free_room(run_dir: Path) -> None:
    """Give the room :func:`hold_room` took back, for the records about to be written."""
    (run_dir / ROOM_FILE).unlink(missing_ok=True)


def space_needed(limits: Limits, concurrency: int, runs: int, same_disk_tmp: bool) -> tuple[int, str]:
    """Bytes the results disk must have free for ``runs`` runs, and how that was counted: each
    run's records and the clone it keeps (:data:`RECORDS_PER_RUN_MB`), and for each run in flight
    -- a run playing, and the run its slot played before while it is scored -- its clone at its quota
    (and its snapshot, at its cap, when the temporary folder is on the same disk)."""
    if runs <= 0:
        return 0, "no run to do"
    in_flight = min(2 * concurrency, runs)  # each playing slot, and the run it played being scored
    clone_mb = limits.disk_quota_mb + (SNAPSHOT_LIMITS.total_bytes // 2**20 if same_disk_tmp else 0)
    mb = runs * RECORDS_PER_RUN_MB + in_flight * clone_mb
    how = f"{runs} run(s) x {RECORDS_PER_RUN_MB} MB of records + {in_flight} in flight x {clone_mb} MB"
    how += " (the clone's disk quota" + (" and a snapshot)" if same_disk_tmp else ")")
    return mb * 2**20, how


def check_free_space(out: Path, limits: Limits, concurrency: int, runs: int) -> None:
    """Refuse to start (ResultsError) when the results disk has less free space than ``runs`` runs
    need for their records (:func:`space_needed`)."""
    same = os.stat(out).st_dev == os.stat(tempfile.gettempdir()).st_dev
    need, how = space_needed(limits, concurrency, runs, same)
    free = shutil.disk_usage(out).free
    if free < need:
        raise ResultsError(
            f"the results disk has {free / 2**30:.1f} GB free, and this experiment needs about "
            f"{need / 2**30:.1f} GB for its records ({how}); nothing was run",
            "free space, lower limits.disk_quota_mb or concurrency, or put the results on another disk "
            "(--results)",
        )


def finished(run_dir: Path, retry_errors: bool) -> bool:
    """A run to skip: its run.json is readable and it was not interrupted (nor an error being retried)."""
    record = load_run(run_dir)
    if record is None or record.outcome == INTERRUPTED:
        return False
    return not (retry_errors and record.outcome in ("error", "unscored"))


def outcome_counts(out: Path) -> dict[str, int]:
    """How many runs of the experiment folder ``out`` ended in each outcome (readable run.json only)."""
    counts: dict[str, int] = {}
    runs = Path(out) / "runs"
    for run_dir in sorted(runs.iterdir()) if runs.is_dir() else []:
        record = load_run(run_dir)
        if record is not None:
            counts[record.outcome] = counts.get(record.outcome, 0) + 1
    return counts
