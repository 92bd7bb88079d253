"""The kit's pytest plugin for scoring. It runs INSIDE the scoring sandbox, started by
``kit/tasks/scoring/launcher.py``, and imports nothing from the kit (the kit is not visible there).

- registers the kit's markers (``severity``, ``baseline_pass``);
- adds the run's canary test file to the collected paths (own-tests runs) and moves the canary tests
  to the end of the run, so a report patch installed by any earlier test also meets them;
- streams every test's final outcome (setup, call and teardown together), every collection error and
  the session's exit status, one JSON line each, to a pipe the kit reads WHILE the tests run. What
  was sent cannot be taken back: an exit hook can only append, and the kit treats anything after the
  end line, a repeated test or a garbled line as tampering.

The functions it needs are bound at import, before any code under test is imported, so a later
monkeypatch of ``os.write`` or ``json.dumps`` does not reach the stream.
"""

from __future__ import annotations

import json
import os

import pytest

_write = os.write
_dumps = json.dumps


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in str(text).strip().splitlines() if ln.strip()]
    return (lines[0] if lines else "")[:300]


def _message(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    if report.skipped:
        reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
        return "skipped: " + _first_line(reason.removeprefix("Skipped: "))[:200]
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None and getattr(crash, "message", ""):
        return _first_line(crash.message) or "failed"
    text = str(longrepr)
    cause = [ln[1:].strip() for ln in text.splitlines() if ln.startswith("E ") and ln[1:].strip()]
    if cause:  # a collection error: its first line says where, its last `E` line what
        return f"{_first_line(text)} {cause[-1]}"[:300]
    return _first_line(text) or "failed"


class StreamReporter:
    """One per pytest session; ``fd`` is the write end of the kit's pipe."""

    def __init__(self, fd: int, canary_file: str | None, canary_names: list[str]) -> None:
        self.fd = fd
        self.canary_file = canary_file
        self.canaries = set(canary_names)
        self.seq = 0
        self.pending: dict[str, tuple[bool, str]] = {}
        os.set_inheritable(fd, False)  # commands the tests start do not get the pipe

    def send(self, **msg: object) -> None:
        self.seq += 1
        data = (_dumps({"seq": self.seq, **msg}) + "\n").encode()
        while data:
            data = data[_write(self.fd, data) :]

    def pytest_configure(self, config: pytest.Config) -> None:
        config.addinivalue_line("markers", "severity(level): requirement severity: critical, major or minor")
        config.addinivalue_line(
            "markers", "baseline_pass: this acceptance test may pass on the starting code"
        )
        if self.canary_file:
            config.args.append(self.canary_file)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        canaries = [i for i in items if i.name in self.canaries]
        items[:] = [i for i in items if i.name not in self.canaries] + canaries

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if not report.passed:
            self.send(kind="collect", nodeid=report.nodeid, message=_message(report))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        ok, message = self.pending.get(report.nodeid, (True, ""))
        if ok and not report.passed:  # the first failure (or skip) of setup, call, teardown counts
            ok, message = False, _message(report)
        if report.when == "teardown":
            self.pending.pop(report.nodeid, None)
            self.send(kind="test", nodeid=report.nodeid, passed=ok, message=message)
        else:
            self.pending[report.nodeid] = (ok, message)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, exitstatus: int) -> None:
        self.send(kind="end", exitstatus=int(exitstatus))
