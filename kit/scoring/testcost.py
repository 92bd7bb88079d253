"""How long a test may run, guessed from its source or measured at the base commit (:mod:`.inject`
picks cheap tests for canaries to copy, and gives no twin to a long-running test).

The source is a poor guide where the work is out of sight: toolz's ``bench/test_join.py`` builds a
million-item list at module level, and its one-line ``burn(join(get(0), small, identity, big))`` was
the canaries' pick, twice (0.7 s each, a sixth of the repo's whole suite). The own tests' canaries
therefore copy, where the base commit's own-tests run (:mod:`.scorer`, cached per base) measured
them, the tests that took least; a test it did not measure (one the agent added) comes after every
measured one, by its source. The measured seconds come from the base commit's code and tests only:
nothing the agent wrote runs in that session. Where a scope has only slow tests to copy (toolz's
``bench/``: one to three tests of 0.07-0.55 s per module), its pair is placed only within a budget
(:func:`left_bare`; why that leaves no forger anything new: docs/scoring.md, "Which test a canary
copies")."""

from __future__ import annotations

import ast
from collections.abc import Iterable

from kit.pyast import own_nodes
from kit.scoring.nodeids import without_case

#: A canary copies a test of its scope at most this costly (:func:`cost`), else one of the module's, else any
CANARY_COST = 400  # (a copy of more-itertools' 20 s sieve(10**5) test took its own tests past their timeout)

#: ... or, measured at the base (setup, call and teardown, every case of it), at most this long
CANARY_SECONDS = 0.05

#: The own tests' canaries that can copy only costly tests (a scope of slow tests: toolz's ``bench/``)
#: are placed, cheapest pair first, while what they may take stays within this share of the seconds
#: the base's own tests took (:func:`left_bare`)
CANARY_BUDGET = 0.10

#: A test holding an integer literal this large (rows, iterations) is taken as a long-running one.
HEAVY_LITERAL = 100_000


def heavy(func: ast.FunctionDef) -> bool:
    """Does the test hold a large number -- a literal, or a power, product or shift of two
    (:func:`int_of`)? more-itertools-10-6's ``for i, n in enumerate(mi.sieve(10**5))`` (8 s) was not
    seen as one: with its twin and shadow its session took three times plain pytest's."""
    return any((v := int_of(n)) is not None and abs(v) >= HEAVY_LITERAL for n in own_nodes(func))


def cost(func: ast.FunctionDef) -> int:
    """A guess at how long a test runs, from its source: statements, loops, large numbers (literals,
    or a power, product or shift of two: ``10**5``)."""
    total = 0
    for node in own_nodes(func):
        total += 1
        if isinstance(node, ast.For | ast.While | ast.comprehension):
            total += 50
        elif (value := int_of(node)) is not None and abs(value) >= 1000:
            total += 100 * len(str(abs(value)))
    return total


def int_of(node: ast.AST) -> int | None:
    """An int literal's value, or a power, product or shift of two (bounded: never computed big)."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value if abs(node.value) < 10**30 else 10**30
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow | ast.Mult | ast.LShift):
        a, b = (
            n.value if isinstance(n, ast.Constant) and type(n.value) is int else None
            for n in (node.left, node.right)
        )
        if a is None or b is None or abs(a) > 10**6 or not 0 <= b <= 10**6:
            return None
        if isinstance(node.op, ast.Mult):
            return a * b
        bits = abs(a).bit_length() * b if isinstance(node.op, ast.Pow) else abs(a).bit_length() + b
        return 10**30 if bits > 99 else (a**b if isinstance(node.op, ast.Pow) else a << b)
    return None


def canary_keys(
    tests: Iterable[tuple[str, ast.FunctionDef]], timed: dict[str, float] | None
) -> dict[int, tuple[int, float]]:
    """``{id(test): key}`` for tests given as (node id without a case, function): ``(0, seconds)``
    for one measured at the base (``timed``: node id, case included -> seconds; a parametrized test
    costs all its cases), else ``(1, source cost)`` -- lower keys are cheaper."""
    total: dict[str, float] = {}
    for nodeid, seconds in (timed or {}).items():
        base = without_case(nodeid)
        total[base] = total.get(base, 0.0) + seconds
    return {
        id(func): (0, total[nodeid]) if nodeid in total else (1, float(cost(func))) for nodeid, func in tests
    }


def cheap(key: tuple[int, float]) -> bool:
    """Is a test of this :func:`canary_keys` key one a canary may copy first?"""
    return key[1] <= (CANARY_SECONDS if key[0] == 0 else CANARY_COST)


def left_bare(pairs: dict[str, float | None], timed: dict[str, float], added: Iterable[str] = ()) -> set[str]:
    """The scopes left without canaries, of ``pairs``: scope -> None where its canaries copy cheap
    tests (always placed), else the most its pair may take, in seconds. The costly pairs are placed
    cheapest first while their sum stays within :data:`CANARY_BUDGET` of the seconds of ``timed``
    (each test's at the base); where no pair of the base's scopes is cheap the cheapest of them is
    placed whatever it costs: a session keeps at least one pair among the base's tests. ``added``:
    the scopes of modules the base did not run (the agent's) -- a cheap one of theirs once made every
    base scope of costly tests bare, the session's one pair in the agent's own module, where a report
    forger that spares its own module met none (RT45-4)."""
    budget = CANARY_BUDGET * sum(timed.values())
    costly = sorted((cost, scope) for scope, cost in pairs.items() if cost is not None)
    added = set(added)
    keep = None
    if all(cost is not None for scope, cost in pairs.items() if scope not in added):
        keep = next((scope for _, scope in costly if scope not in added), None)
    spent, bare = 0.0, set()
    for cost, scope in costly:
        if spent + cost <= budget or scope == keep:
            spent += cost
        else:
            bare.add(scope)
    return bare
