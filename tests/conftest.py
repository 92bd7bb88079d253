"""Test setup: offline, and every run writes under a temporary results folder."""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before anything imports litellm

import pytest  # noqa: E402


def pytest_report_header(config):
    """Which sandbox limits hold on this host (a cgroup controller may not be writable in CI)."""
    from kit.sandbox.processes import memory_limit_mechanism, process_limit_mechanism

    return [
        f"sandbox process limit: {process_limit_mechanism()} (the none backend as root: "
        f"{process_limit_mechanism(runs_as_root=os.geteuid() == 0)})",
        f"sandbox memory limit: {memory_limit_mechanism()}",
    ]


@pytest.fixture(autouse=True)
def _results_in_tmp(tmp_path, monkeypatch):
    """Point ORCHBENCH_RESULTS_DIR at a temp folder so no test writes into the repo's results/."""
    monkeypatch.setenv("ORCHBENCH_RESULTS_DIR", str(tmp_path / "results"))


@pytest.fixture(autouse=True)
def _fresh_process_caches():
    """Reset what the kit keeps per process -- the scripted models' registry, the base commits'
    own-test results -- so no test sees another's."""
    yield
    from kit.model import scripted
    from kit.scoring import scorer

    scripted.clear_registry()
    scorer.clear_base_cache()


@pytest.fixture(autouse=True)
def _container_engine(request):
    """A test parametrized over sandbox backends (``backend`` or ``sandbox``) skips a container backend
    whose engine cannot run here, with the reason (tests/support/sandboxes.py)."""
    params = getattr(getattr(request.node, "callspec", None), "params", {})
    for key in ("backend", "sandbox"):
        if isinstance(params.get(key), str):
            from tests.support.sandboxes import skip_unless_ready

            skip_unless_ready(params[key])


@pytest.fixture
def fake_anthropic():
    """A fake Anthropic Messages API on 127.0.0.1 (see tests/support/fake_providers.py); stopped after the test."""
    from tests.support.fake_providers import FakeAnthropic

    with FakeAnthropic() as server:
        yield server


@pytest.fixture
def fake_openai():
    """A fake OpenAI chat API on 127.0.0.1 (see tests/support/fake_providers.py); stopped after the test."""
    from tests.support.fake_providers import FakeOpenAI

    with FakeOpenAI() as server:
        yield server
