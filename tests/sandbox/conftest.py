"""Fixtures the sandbox's tests share."""

from __future__ import annotations

import pytest

from kit.sandbox import processes


@pytest.fixture
def memory_cgroup():
    if processes._memory_cgroup_root() is None:
        pytest.skip(f"needs a writable memory cgroup: {processes.memory_limit_mechanism()}")
