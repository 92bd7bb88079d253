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
import base64
import json
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

import websocket  # websocket-client

from kit.app.export_inspect import export_inspect
from tests.support.inspect_view import free_port, get_json, inspect_view, stop


class Page:
    """One Chromium tab over the DevTools protocol."""

    def __init__(self, ws_url: str) -> None:
        self.ws = websocket.create_connection(ws_url, timeout=60, suppress_origin=True)
        self.next_id = 0

    def call(self, method: str, **params: object) -> dict:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def text(self) -> str:
        res = self.call("Runtime.evaluate", expression="document.body ? document.body.innerText : ''")
        return res.get("result", {}).get("value", "")

    def show(self, url: str, expect: list[str], timeout_s: float = 60.0) -> str:
        """Navigate to ``url`` and wait until the page shows every text of ``expect``; its text."""
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + timeout_s
        while True:
            text = self.text()
            if all(e in text for e in expect):
                time.sleep(1.0)  # let the last renders settle
                return self.text()
            if time.monotonic() > deadline:
                missing = [e for e in expect if e not in text]
                raise TimeoutError(
                    f"{url}: {missing} not shown within {timeout_s} s; page text:\n{text[:2000]}"
                )
            time.sleep(0.5)

    def shoot(self, path: Path) -> None:
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))


def chromium(port: int, profile: Path) -> subprocess.Popen:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        sys.exit("chromium is not installed (Debian: apt-get install chromium)")
    return subprocess.Popen(
        [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
        + [f"--remote-debugging-port={port}", "--remote-allow-origins=*", f"--user-data-dir={profile}"]
        + ["--window-size=1440,1000", "--no-first-run", "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def page_ws(port: int, timeout_s: float = 30.0) -> str:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            pages = [p for p in get_json(f"http://127.0.0.1:{port}/json/list") if p.get("type") == "page"]
            if pages:
                return pages[0]["webSocketDebuggerUrl"]
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError("chromium's DevTools endpoint did not answer")
        time.sleep(0.3)


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
