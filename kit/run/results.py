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
from pathlib import Path

from kit.errors import ResultsError
from kit.paths import results_root
from kit.records.schema import load_run

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
