"""Helpers the tests share: scripted profiles and runs (``helpers``), the fake provider servers
(``fake_providers``), pdca and workflow casts (``pdca``, ``workflow``), a synthetic experiment folder
(``records``) and :func:`context.run_context`, the one way a test builds a RunContext."""

from pathlib import Path

#: tests/fixtures: inputs the tests read (Exercism exercises, recorded provider payloads)
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
