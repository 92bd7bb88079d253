"""The own tests' canaries copy the tests the base commit's own-tests run measured cheapest
(kit/scoring/testcost.py): a test whose work is out of sight of its source (a module-level list of a
million items, toolz's bench/test_join.py) is not copied twice because its source is one line."""

from __future__ import annotations

import json
import random

from kit.scoring.inject import inject_own
from kit.scoring.session import Expect, read_stream
from kit.scoring.testcost import canary_keys, cheap

# test_slow's source is the cheapest of its module (one call); its work is in BIG, out of its sight
MODULE = """
BIG = list(range(10))


def burn(seq):
    for _ in seq:
        pass


def test_slow():
    burn(BIG)


def test_fast_one():
    total = 0
    for i in range(3):
        total += i
    for j in range(3):
        total -= j
    assert total == 0


def test_fast_two():
    items = [1, 2, 3]
    for i in items:
        assert i in items
    for j in reversed(items):
        assert j in items
"""

AT_BASE = {
    "tests/test_mod.py::test_slow": 0.7,
    "tests/test_mod.py::test_fast_one": 0.001,
    "tests/test_mod.py::test_fast_two": 0.002,
}


def _copied_slow(tmp_path, seed: int, seconds: dict[str, float] | None) -> bool:
    """Did a canary of the module copy test_slow (its ``burn(BIG)``)?"""
    root = tmp_path / str(seed)
    (root / "tests").mkdir(parents=True)
    path = root / "tests" / "test_mod.py"
    path.write_text(MODULE)
    found = inject_own(root, ["tests/test_mod.py"], rng=random.Random(seed), seconds=seconds)
    assert len(found.canaries) == 2
    text = path.read_text()
    return text.count("burn(BIG)") > 1


def test_the_own_tests_canaries_copy_the_tests_measured_cheapest_at_the_base(tmp_path):
    # judged by its source, the one-line test is a canary's source in most sessions ...
    by_source = [_copied_slow(tmp_path / "src", seed, None) for seed in range(12)]
    assert sum(by_source) >= 6
    # ... measured at the base, never: the two fast tests are the cheaper half
    measured = [_copied_slow(tmp_path / "timed", seed, AT_BASE) for seed in range(12)]
    assert not any(measured)


def test_a_test_the_base_did_not_measure_comes_after_every_measured_one():
    import ast

    tree = ast.parse(MODULE)
    funcs = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name.startswith("test")}
    ids = [(f"tests/test_mod.py::{name}", func) for name, func in funcs.items()]
    keys = canary_keys(ids, {"tests/test_mod.py::test_fast_one": 0.3})
    measured, unmeasured = keys[id(funcs["test_fast_one"])], keys[id(funcs["test_slow"])]
    assert measured < unmeasured  # 0.3 s measured, before a one-line source nobody timed
    assert not cheap(measured)  # over CANARY_SECONDS
    assert cheap(unmeasured)  # a short source is cheap when nothing was measured
    # a parametrized test costs every case
    cases = canary_keys(
        ids[:1], {"tests/test_mod.py::test_slow[1]": 0.03, "tests/test_mod.py::test_slow[2]": 0.04}
    )
    assert cases[id(funcs["test_slow"])] == (0, 0.07)


def _line(seq: int, **msg: object) -> bytes:
    return json.dumps({"seq": seq, **msg}).encode() + b"\n"


def test_the_stream_keeps_what_each_test_took_and_drops_what_is_not_a_duration():
    lines = [
        _line(1, kind="start"),
        _line(
            2, kind="test", nodeid="t.py::test_a", passed=True, outcome="passed", message="", micros=250000
        ),
        _line(3, kind="test", nodeid="t.py::test_b", passed=False, outcome="failed", message="x", micros="9"),
        _line(4, kind="test", nodeid="t.py::test_c", passed=True, outcome="passed", message="", micros=-1),
        _line(5, kind="test", nodeid="t.py::test_d", passed=True, outcome="passed", message="", micros=True),
        _line(6, kind="end", exitstatus=1),
    ]
    got = read_stream(b"".join(lines), Expect({}, uncollected_ok=True), exit_code=1, timed_out=False)
    assert got.seconds == {"t.py::test_a": 0.25}
    assert set(got.outcomes) == {"t.py::test_a", "t.py::test_b", "t.py::test_c", "t.py::test_d"}


def test_a_scoring_after_the_base_run_hands_the_own_tests_what_the_base_measured(tmp_path, monkeypatch):
    import kit.scoring.sessions as sessions
    from kit.scoring.scorer import clear_base_cache, score
    from kit.tasks.task import apply_solution, load_task
    from kit.tasks.workspace import create_workspace

    handed: list[dict | None] = []
    real = sessions.inject_own

    def spy(root, files, left_out=(), rng=None, seconds=None, **kwargs):
        handed.append(None if seconds is None else dict(seconds))
        return real(root, files, left_out, rng, seconds=seconds, **kwargs)

    monkeypatch.setattr(sessions, "inject_own", spy)
    task = load_task("table-computed-columns")
    ws = create_workspace(task, tmp_path / "ws")
    apply_solution(task, ws.root)
    clear_base_cache()
    for _ in range(2):
        s = score(task, ws, claimed_done=True)
        assert s.requirements_failed == 0 and not s.tampered and s.regressions == 0, s
    first_own, base, second_own = handed  # (the first scoring's own session and the base's, any order)
    assert sum(h is None for h in (first_own, base)) == 2  # nothing measured yet
    assert second_own and all(v >= 0 for v in second_own.values())
    assert all(t.startswith("tests/test_") for t in second_own), second_own
