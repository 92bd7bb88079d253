"""Manual check: an experiment exported with ``kit export inspect``, opened in Inspect's viewer in a real
(headless) Chromium, and photographed -- the log list, a sample's scores, the Models tab (usage by
model and by role with cache read / write) and a sample's transcript.

    PYTHONPATH=. .venv/bin/python tests/benchmarks/inspect_screenshots.py RESULTS/NAME [--out DIR]

Needs ``chromium`` (Debian: ``apt-get install chromium``) and websocket-client (in the venv). Chromium
is driven over the DevTools protocol (``--remote-debugging-port``): the plain ``--screenshot`` mode
stalls on the Models tab. Every page is waited for (a text it must show, bounded), photographed, and
its visible text saved beside the PNG. Chromium and ``inspect view`` are always stopped.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import urllib.parse
from pathlib import Path

from kit.app.export_inspect import export_inspect
from tests.support.browser import Page, chromium, page_ws
from tests.support.inspect_view import free_port, inspect_view, stop


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path, help="an experiment's results folder")
    ap.add_argument("--out", type=Path, default=Path("/tmp/inspect-shots"))
    ap.add_argument("--strategy", default=None, help="photograph this strategy's log (default: the first)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    exported = export_inspect(args.results)
    logs = [p for p in exported.logs if args.strategy is None or f"_{args.strategy}_" in p.name]
    if not logs:
        sys.exit(f"no log of strategy {args.strategy!r} in {exported.out}")
    log = logs[0]
    task, sample_id, epoch, conversation = _first_sample(log)
    port = free_port()
    with tempfile.TemporaryDirectory() as profile, inspect_view(exported.out) as base:
        browser = chromium(port, Path(profile))
        try:
            page = Page(page_ws(port))
            page.call("Page.enable")
            page.call(
                "Emulation.setDeviceMetricsOverride",
                width=1440,
                height=1000,
                deviceScaleFactor=1,
                mobile=False,
            )
            name = urllib.parse.quote(log.name)
            sample = f"{base}/#/logs/{name}/samples/sample/{urllib.parse.quote(str(sample_id))}/{epoch}"
            shots = [
                ("1-log-list", f"{base}/#/logs", [task]),
                ("0-samples", f"{base}/#/logs/{name}/samples", [str(sample_id)]),
                ("2-sample-scores", f"{sample}/scoring", ["requirements_met", "solved"]),
                ("3-models-tab", f"{base}/#/logs/{name}/models", ["Cache read"]),
                ("4-sample-transcript", f"{sample}/transcript", [conversation.upper()]),
            ]
            for stem, url, expect in shots:
                text = page.show(url, expect)
                page.shoot(args.out / f"{stem}.png")
                (args.out / f"{stem}.txt").write_text(text, encoding="utf-8")
                print(f"{args.out / stem}.png  <- {url}")
        finally:
            stop(browser)


def _first_sample(log: Path) -> tuple[str, str, int, str]:
    """The log's task (strategy), and its first sample's id, epoch and main conversation."""
    from inspect_ai.log import read_eval_log

    read = read_eval_log(str(log))
    first = read.samples[0]
    return read.eval.task, str(first.id), first.epoch, first.metadata["main_conversation"]


if __name__ == "__main__":
    main()
