"""How long a test may run, guessed from its source (:mod:`.inject` picks cheap tests for canaries to
copy, and gives no twin to a long-running test)."""

from __future__ import annotations

import ast

from kit.scoring.twins import own_nodes

#: A canary copies a test of its scope at most this costly (:func:`cost`), else one of the module's, else any
CANARY_COST = 400  # (a copy of more-itertools' 20 s sieve(10**5) test took its own tests past their timeout)

#: A test holding an integer literal this large (rows, iterations) is taken as a long-running one.
HEAVY_LITERAL = 100_000


def heavy(func: ast.FunctionDef) -> bool:
    return any(
        isinstance(n, ast.Constant) and type(n.value) is int and abs(n.value) >= HEAVY_LITERAL
        for n in own_nodes(func)
    )


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
