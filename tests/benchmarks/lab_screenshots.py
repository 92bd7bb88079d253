"""Manual check: the prompt lab as a new user meets it -- `kit lab` started, the editable copy of a prompt
opened from JupyterLab's file browser, notebook 03 run from the browser (Run > Run All Cells), and
photographed in a real (headless) Chromium.

    PYTHONPATH=. .venv/bin/python tests/benchmarks/lab_screenshots.py --results DIR --profile PROFILE \
        [--prompt-file TEXTFILE] [--out DIR]

``--profile`` is what notebook 03 runs on (a name or a path: e.g. a profile whose tiers point at
``python -m tests.support.fake_server``). The edited prompt (``--prompt-file``, else a short careful
one) is written into the lab's copy ``lab-notebooks/prompts/vibe/coder.md`` through Jupyter's contents
API (what saving it in the editor does), and the notebook's parameters cell is set to use it. Prints
how long the notebook took in the browser and how many stderr outputs (red boxes) it shows.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.support.browser import browser
from tests.support.inspect_view import free_port, stop

CAREFUL = "You are a careful engineer. Read the code first, make the smallest change, run the tests.\n"


def _api(base: str, path: str, method: str = "GET", body: dict | None = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"{base}/api/contents/{path}", data=data, method=method)
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read() or b"{}")


def _set_parameters(base: str, notebook: str, params: dict[str, object]) -> None:
    """Rewrite the notebook's parameters cell (what a user types there), through the contents API."""
    model = _api(base, notebook)
    cell = next(c for c in model["content"]["cells"] if "parameters" in c["metadata"].get("tags", []))
    lines = []
    for line in "".join(cell["source"]).splitlines():
        name = line.split("=")[0].strip()
        lines.append(f"{name} = {params[name]!r}" if name in params else line)
    cell["source"] = "\n".join(lines)
    _api(base, notebook, "PUT", {"type": "notebook", "format": "json", "content": model["content"]})


def _click(page, selector_js: str) -> None:
    box = page.js(f"(() => {{ const e = {selector_js}; if (!e) return null; const r = e.getBoundingClientRect(); "
                  "return {x: r.x + r.width / 2, y: r.y + r.height / 2}; })()")  # fmt: skip
    if not box:
        raise RuntimeError(f"nothing to click: {selector_js}")
    page.call("Input.dispatchMouseEvent", type="mouseMoved", x=box["x"], y=box["y"])  # menus act on hover
    time.sleep(0.3)
    for kind in ("mousePressed", "mouseReleased"):
        page.call("Input.dispatchMouseEvent", type=kind, x=box["x"], y=box["y"], button="left", clickCount=1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", type=Path, required=True, help="results root for kit lab")
    ap.add_argument("--profile", required=True, help="the profile notebook 03 runs on")
    ap.add_argument("--prompt-file", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=Path("/tmp/lab-shots"))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = open(args.out / "jupyter.log", "wb")  # noqa: SIM115 - closed at the end
    lab = subprocess.Popen(
        [sys.executable, "-m", "kit", "lab", "--results", str(args.results), "--", f"--port={port}",
         "--ServerApp.token=", "--ServerApp.password=", "--ServerApp.disable_check_xsrf=True"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=os.environ.copy(),
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                _api(base, "")
                break
            except OSError:
                time.sleep(0.5)
        prompt = args.prompt_file.read_text() if args.prompt_file else CAREFUL
        _api(
            base,
            "lab-notebooks/prompts/vibe/coder.md",
            "PUT",
            {"type": "file", "format": "text", "content": prompt},
        )
        nb = "lab-notebooks/03_prompt_lab.ipynb"
        _set_parameters(base, nb, {"profile": args.profile, "prompt_file": "prompts/vibe/coder.md",
                                   "results_dir": str(args.results / "lab")})  # fmt: skip
        with browser() as page:
            page.show(
                f"{base}/lab/tree/lab-notebooks/prompts/vibe/coder.md", ["careful engineer"], timeout_s=120
            )
            time.sleep(2)
            page.shoot(args.out / "1-prompt-in-file-browser.png")
            page.show(f"{base}/lab/tree/{nb}", ["Prompt lab", "prompt_lab("], timeout_s=120)
            time.sleep(3)
            _click(
                page,
                "[...document.querySelectorAll('.lm-MenuBar-itemLabel')].find(e => e.innerText === 'Run')",
            )
            time.sleep(1)
            _click(
                page,
                "[...document.querySelectorAll('.lm-Menu-itemLabel')].find(e => e.innerText.trim() === 'Run All Cells')",
            )
            started = time.monotonic()
            while "transcripts are" not in page.text() and "@@" not in page.text():
                if time.monotonic() - started > 900:
                    raise TimeoutError("notebook 03 did not finish in the browser within 15 minutes")
                time.sleep(2)
                if int(time.monotonic() - started) % 20 < 2:
                    page.shoot(args.out / "2-running.png")
            took = time.monotonic() - started
            time.sleep(2)
            page.shoot(args.out / "3-done-top.png")
            red = page.js(
                "document.querySelectorAll('[data-mime-type=\"application/vnd.jupyter.stderr\"]').length"
            )
            for _ in range(2):  # the wheel over the notebook (whichever element scrolls it): the last outputs
                page.call("Input.dispatchMouseEvent", type="mouseWheel", x=900, y=600, deltaX=0, deltaY=400)
                time.sleep(0.3)
            time.sleep(2)
            page.shoot(args.out / "4-done-bottom.png")
            (args.out / "page.txt").write_text(page.text(), encoding="utf-8")
            print(
                f"notebook 03 in the browser: {took:.0f} s; stderr outputs (red boxes): {red}; shots in {args.out}"
            )
    finally:
        stop(lab)
        log.close()


if __name__ == "__main__":
    main()
