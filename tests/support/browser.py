"""A real headless Chromium for tests and manual checks, driven over the DevTools protocol: open a page,
wait for a text, read the page's text or evaluate JavaScript, take a screenshot.

Needs ``chromium`` (Debian: ``apt-get install chromium``) and websocket-client (in the venv). Started
with the flags a machine without network needs (no background networking, no component updates), a
fresh profile, and always stopped (its process group) by whoever started it.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import websocket  # websocket-client

from tests.support.inspect_view import free_port, get_json, stop

FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-allow-origins=*",
    "--window-size=1440,1000",
]


def chromium_path() -> str | None:
    """The chromium executable, or None when it is not installed."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


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
        return self.js("document.body ? document.body.innerText : ''") or ""

    def js(self, expression: str) -> object:
        """The value of a JavaScript expression in the page (JSON-serialisable values)."""
        res = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return res.get("result", {}).get("value")

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
    exe = chromium_path()
    if exe is None:
        raise SystemExit("chromium is not installed (Debian: apt-get install chromium)")
    return subprocess.Popen(
        [exe, *FLAGS, f"--remote-debugging-port={port}", f"--user-data-dir={profile}", "about:blank"],
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


@contextmanager
def browser() -> Iterator[Page]:
    """A headless Chromium with one tab, stopped on exit."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        proc = chromium(port, Path(profile))
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
            yield page
        finally:
            stop(proc)
