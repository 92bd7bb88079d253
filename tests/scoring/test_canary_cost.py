"""The own tests' canaries copy the tests the base commit's own-tests run measured cheapest
(kit/scoring/testcost.py): a test whose work is out of sight of its source (a module-level list of a
million items, toolz's bench/test_join.py) is not copied twice because its source is one line; and a
scope whose tests are all slow gets its pair only within a budget (testcost.left_bare)."""

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


# the own tests' canary budget (testcost.left_bare): a module of cheap tests, one whose tests are all
# deselected, and four of slow tests only (toolz's bench/) -- "slow_a"'s pair may take 2 x 0.12 s
CHEAP = """
class TestThing:
    def test_one(self):
        assert quick(1)

    def test_two(self):
        assert quick(2)


def test_three():
    assert quick(3)
"""
SLOW = "\n\n".join(f"def test_{word}():\n    assert {word}_work()\n" for word in ("first", "second", "third"))
SLOW_SECONDS = {"slow_a": (0.10, 0.12, 0.5), "slow_b": (0.3,), "slow_c": (0.4, 0.45), "slow_d": (2.0,)}
MEASURED = {
    **{
        f"tests/test_cheap.py::{t}": 0.01
        for t in ("TestThing::test_one", "TestThing::test_two", "test_three")
    },
    **{
        f"bench/test_{mod}.py::test_{word}": took
        for mod, seconds in SLOW_SECONDS.items()
        for word, took in zip(("first", "second", "third"), seconds, strict=False)
    },
}  # 3.9 s in all: the costly pairs may take 0.39 s


def _budget_tree(root, seed: int, seconds: dict[str, float] | None, slow=tuple(SLOW_SECONDS), cheap=True):
    """The injected tree's canaries by scope, and ``inject_own``'s answer."""
    files = []
    if cheap:
        (root / "tests").mkdir(parents=True)
        for name in ("test_cheap.py", "test_gone.py"):
            (root / "tests" / name).write_text(CHEAP)
            files.append(f"tests/{name}")
    (root / "bench").mkdir(parents=True)
    for mod in slow:
        words = len(SLOW_SECONDS[mod])
        (root / "bench" / f"test_{mod}.py").write_text("\n\n".join(SLOW.split("\n\n")[:words]))
        files.append(f"bench/test_{mod}.py")
    found = inject_own(root, files, ["tests/test_gone.py"], rng=random.Random(seed), seconds=seconds)
    scopes: dict[str, list[bool]] = {}
    for scope, must_pass in found.canaries.values():
        scopes.setdefault(scope, []).append(must_pass)
    return {k: sorted(v) for k, v in scopes.items()}, found


def test_own_canaries_that_copy_only_slow_tests_are_placed_within_a_budget(tmp_path):
    pair = [False, True]
    cheap_scopes = {"tests/test_cheap.py::TestThing": pair, "tests/test_cheap.py": pair}
    for seed in range(6):
        scopes, found = _budget_tree(tmp_path / f"timed{seed}", seed, MEASURED)
        # cheap scopes all get their pair; of the slow-only ones, the cheapest while 2 x their costliest
        # pickable test stays within 10% of the base's 3.9 s: slow_a (0.24 s), slow_b (+0.6 s: over)
        assert scopes == {**cheap_scopes, "bench/test_slow_a.py": pair}, (seed, scopes)
        assert found.bare == ["bench/test_slow_b.py", "bench/test_slow_c.py", "bench/test_slow_d.py"]
        # a scope whose every test is deselected still gets none, and is no scope the budget left out
        assert not any(s.startswith("tests/test_gone.py") for s in [*scopes, *found.bare])
    # what the kept canaries copy stays random: one of the cheaper half (first, second), never third
    copied = set()
    for seed in range(12):
        _budget_tree(tmp_path / f"pick{seed}", seed, MEASURED)
        text = (tmp_path / f"pick{seed}" / "bench" / "test_slow_a.py").read_text()
        copied |= {w for w in ("first", "second", "third") if text.count(f"{w}_work()") > 1}
    assert copied == {"first", "second"}
    # no cheap scope at all, every slow pair over the budget: the cheapest still gets its pair
    scopes, found = _budget_tree(tmp_path / "slowonly", 0, MEASURED, ("slow_d", "slow_c"), cheap=False)
    assert scopes == {"bench/test_slow_c.py": pair} and found.bare == ["bench/test_slow_d.py"]
    # nothing measured yet (a task's first scoring): every scope that runs a test gets its pair
    scopes, found = _budget_tree(tmp_path / "untimed", 0, None)
    slow = {f"bench/test_{mod}.py": pair for mod in SLOW_SECONDS}
    assert scopes == {**cheap_scopes, **slow} and found.bare == []
