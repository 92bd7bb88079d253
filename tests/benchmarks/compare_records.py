"""Compare two results folders of the same experiment, run by two versions of the kit, record by record.

    python tests/benchmarks/compare_records.py RESULTS_A RESULTS_B

Every run's ``run.json``, ``calls.jsonl``, ``events.jsonl``, ``transcript.jsonl`` and ``diff.patch`` are
compared after dropping what legitimately differs between two executions: ids, timestamps, durations,
latencies, the kit's commit, the results folder's path and anything derived from wall time. (Token
counts are not normalised: give the two results folders paths of the same length, since a path that
reaches a prompt changes the scripted model's 4-characters-a-token estimate.) It prints one line per run (``same``
or the fields that differ) and exits 1 when any run differs. Used to show that a refactor kept
behaviour: the layout change compared the scripted smoke experiments before and after the move.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

#: keys whose values differ between two executions of the same run
VOLATILE = {
    "run_id",
    "started_at",
    "at",
    "kit_commit",
    "wall_s",
    "model_s",
    "tool_s",
    "latency_s",
    "duration_s",
    "scoring_s",
    "durations",
    "id",
    "call_id",
    "response_id",
    "created",
    "conversation",
    "journal_dir",
}
_TIMES = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:?\d\d)?|\b\d+\.\d+ ?s\b|\d+ ms\b")
_IDS = re.compile(r"\b[0-9a-f]{8,}\b|\b(call|toolu|chatcmpl|msg)_[A-Za-z0-9_-]+")


ROOTS: list[str] = []  # the two results folders: paths under them are the same path


def normalise(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: normalise(v) for k, v in sorted(value.items()) if k not in VOLATILE}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    if isinstance(value, str):
        for root in ROOTS:
            value = value.replace(root, "<results>")
        return _IDS.sub("<id>", _TIMES.sub("<t>", value))
    if isinstance(value, float):
        return round(value, 6)
    return value


def read(path: Path) -> Any:
    if not path.exists():
        return None
    if path.suffix == ".json":
        return normalise(json.loads(path.read_text(encoding="utf-8")))
    if path.suffix == ".jsonl":
        return [normalise(json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return normalise(path.read_text(encoding="utf-8", errors="replace"))


def differences(a: Any, b: Any, where: str = "") -> list[str]:
    if type(a) is not type(b):
        return [f"{where or '.'}: {type(a).__name__} vs {type(b).__name__}"]
    if isinstance(a, dict):
        out = []
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                out.append(f"{where}.{key}: only in {'B' if key not in a else 'A'}")
            else:
                out += differences(a[key], b[key], f"{where}.{key}")
        return out
    if isinstance(a, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} vs {len(b)} items"]
        return [
            d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in differences(x, y, f"{where}[{i}]")
        ]
    return [] if a == b else [f"{where}: {str(a)[:80]!r} vs {str(b)[:80]!r}"]


FILES = ("run.json", "calls.jsonl", "events.jsonl", "transcript.jsonl", "diff.patch")


def runs(folder: Path) -> dict[str, Path]:
    return {p.parent.name: p.parent for p in sorted(folder.rglob("runs/*/run.json"))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", type=Path)
    parser.add_argument("b", type=Path)
    args = parser.parse_args(argv)
    ROOTS.extend(str(p.resolve()) for p in (args.a, args.b))
    left, right = runs(args.a), runs(args.b)
    differing = 0
    for name in sorted(set(left) | set(right)):
        if name not in left or name not in right:
            print(f"{name}: only in {'B' if name not in left else 'A'}")
            differing += 1
            continue
        found = []
        for file in FILES:
            found += [f"{file}{d}" for d in differences(read(left[name] / file), read(right[name] / file))]
        counts = {f: len(read(left[name] / f) or []) for f in FILES[1:4]}
        print(
            f"{name}: {'same' if not found else 'DIFFERS'} ({', '.join(f'{n} {f}' for f, n in counts.items())})"
        )
        for line in found[:20]:
            print(f"    {line}")
        differing += bool(found)
    print(f"{len(set(left) | set(right)) - differing} of {len(set(left) | set(right))} runs the same")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
