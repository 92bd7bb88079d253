"""The analysis commands of the CLI: ``kit report`` (text fitted to the terminal, markdown or one
HTML file) and ``kit compare`` (with its filters), and the helpers ``kit run`` shares with them."""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

from kit.errors import KitError


def _write_atomic(path: Path, text: str) -> None:
    """``text`` into ``path``: a reader sees the old file or the whole new one."""
    path = path.expanduser()
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _width(asked: int | None) -> int | None:
    """The text report's width: ``--width`` (0: no limit), else the terminal's (COLUMNS, else the
    terminal's size, else 100 when the output is not a terminal)."""
    if asked is not None:
        return asked or None
    return shutil.get_terminal_size((100, 24)).columns


def _cmd_report(args: argparse.Namespace) -> int:
    from kit.analysis.compare import resolve
    from kit.analysis.report import report

    text = report(resolve(args.results_dir), args.format, _width(args.width), summary_only=args.summary)
    if args.out is None:
        print(text, end="" if text.endswith("\n") else "\n")
        return 0
    _write_atomic(args.out, text)
    print(f"wrote {args.out} ({args.format}, {len(text.encode()):,} bytes)")
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    from kit.analysis.compare import compare_text

    lists = {n: _names(getattr(args, n), n) for n in ("strategies", "tasks")}
    print(compare_text(args.a, args.b, every_pair=args.every_pair, **lists), end="")
    return 0


def _names(value: str | None, flag: str) -> list[str] | None:
    """A comma-separated ``--flag`` value as a list (None when not given); an empty one is an error."""
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        raise KitError(f"--{flag} is empty", f"give a comma-separated list, e.g. --{flag} a,b")
    return items


def _add_report_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report", help="the report: who won, per strategy, context, counters, per role x tier, cache"
    )
    p.add_argument("results_dir", help="results/NAME, or an experiment name")
    p.add_argument(
        "--format",
        choices=["text", "markdown", "html"],
        default="text",
        help="text (default; fitted to the terminal), markdown, or html (one self-contained file with the figures)",
    )
    p.add_argument(
        "--summary", action="store_true", help="only the first screen: what was loaded and who won"
    )
    p.add_argument("--out", type=Path, default=None, help="write the report to this file (else stdout)")
    p.add_argument(
        "--width",
        type=int,
        default=None,
        metavar="N",
        help="text width (default: the terminal's; 0: no limit)",
    )
    p.set_defaults(func=_cmd_report)


def _add_compare_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare", help="two results folders side by side per strategy x task, with the prompt diff"
    )
    p.add_argument("a", help="results/NAME, or an experiment name (A)")
    p.add_argument("b", help="results/NAME, or an experiment name (B); changes are B - A")
    p.add_argument("--strategies", metavar="X,Y", help="compare only these strategies")
    p.add_argument("--tasks", metavar="A,B", help="compare only these tasks")
    p.add_argument(
        "--every-pair",
        action="store_true",
        help="also tabulate the strategy x task pairs only one side ran (default: one line for them)",
    )
    p.set_defaults(func=_cmd_compare)


def add_cli(sub: argparse._SubParsersAction) -> None:
    """Register ``report`` and ``compare``."""
    _add_report_cli(sub)
    _add_compare_cli(sub)
