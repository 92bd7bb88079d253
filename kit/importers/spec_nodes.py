"""What the specification audit (:mod:`kit.importers.spec_audit`) needs of one function of a hidden
test module, read once however many tests reach it, and the audit's work budget.

A hidden test module is hostile input: one helper of 40,000 list elements called by 200 tests made
the audit walk 8 million nodes (the work was tests x helper size). Each function is walked once here;
a test's audit then costs what its reached functions may hold of interest (calls, names, compared
sides), counted against :data:`MAX_WORK`."""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

EQUALS = {"assertEqual", "assertEquals", "assertMultiLineEqual", "assertNotEqual", "assert_equal", "eq_"}
#: units of work (a node read, a call followed, a candidate checked, a word merged, a gap found) one
#: audit may spend: about 100 times the most a shipped or real-repos task spends (5,327, cachetools-5-5)
MAX_WORK = 500_000


class OverBudget(Exception):
    """The audit spent its budget: it stops, and says so."""


class Budget:
    def __init__(self, limit: int | None = None) -> None:
        self.limit, self.spent = MAX_WORK if limit is None else limit, 0

    def spend(self, units: int) -> None:
        self.spent += units
        if self.spent > self.limit:
            raise OverBudget


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


@dataclass
class FunctionFacts:
    """One function's nodes of interest, in ``ast.walk`` order."""

    candidates: list[ast.AST]  # nodes that may make a gap (see :func:`read_function`)
    calls: list[tuple[str, str]]  # ("name", f) for ``f(...)``, ("self", m) for ``self.m(...)``/``cls.m(...)``
    stores: frozenset[str]  # names it assigns and its arguments' names
    assigned: dict[str, list[str | None]]  # name -> the static strings of its single-name assignments
    loads: Counter[str]
    sides: Counter[str]  # names on a compared side (``==`` / ``!=`` / ``assertEqual``-like)
    input_sides: set[str]  # names on a side of any comparison or ``assertEqual``-like call
    expected: set[int]  # ids of the constants on such a side
    assigns: list[tuple[frozenset[str], frozenset[int]]]  # an Assign's target names, its value's constants
    constants: list[ast.Constant]  # str / int / float constants
    size: int
    _words: dict[frozenset[str], set[str]] = field(default_factory=dict)

    def input_words(self, compared: set[str]) -> set[str]:
        """The words of its constants other than the expected ones, given the names compared in the
        test (an Assign to one of them holds an expected value)."""
        key = frozenset(n for targets, _ in self.assigns for n in targets if n in compared)
        if key not in self._words:
            skip = set(self.expected)
            for targets, consts in self.assigns:
                if targets & key:
                    skip |= consts
            out: set[str] = set()
            for c in self.constants:
                if id(c) not in skip:
                    out |= words(str(c.value))
            self._words[key] = out
        return self._words[key]


def read_function(root: ast.AST, interesting: Callable[[ast.AST], bool]) -> FunctionFacts:
    """Walk ``root`` once; ``interesting`` picks the candidate nodes (the audit's rule)."""
    facts = FunctionFacts([], [], frozenset(), {}, Counter(), Counter(), set(), set(), [], [], 0)
    stores: set[str] = set()
    for n in ast.walk(root):
        facts.size += 1
        if interesting(n):
            facts.candidates.append(n)
        if isinstance(n, ast.Call):
            f = n.func
            if isinstance(f, ast.Name):
                facts.calls.append(("name", f.id))
            elif (
                isinstance(f, ast.Attribute)
                and isinstance(f.value, ast.Name)
                and f.value.id in ("self", "cls")
            ):
                facts.calls.append(("self", f.attr))
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            stores.add(n.id)
        elif isinstance(n, ast.arg):
            stores.add(n.arg)
        if isinstance(n, ast.Assign):
            if len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                facts.assigned.setdefault(n.targets[0].id, []).append(static(n.value))
            names = frozenset(t.id for t in n.targets if isinstance(t, ast.Name))
            consts = frozenset(id(c) for c in ast.walk(n.value) if isinstance(c, ast.Constant))
            facts.assigns.append((names, consts))
            facts.size += len(consts)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            facts.loads[n.id] += 1
        sides = compared(n)
        facts.sides.update(x.id for x in sides if isinstance(x, ast.Name))
        if isinstance(n, ast.Compare):
            sides = [n.left, *n.comparators]
        facts.input_sides |= {x.id for x in sides if isinstance(x, ast.Name)}
        facts.expected |= {id(x) for x in sides if isinstance(x, ast.Constant)}
        if isinstance(n, ast.Constant) and isinstance(n.value, str | int | float):
            facts.constants.append(n)
    facts.stores = frozenset(stores)
    return facts


def static(node: ast.AST) -> str | None:
    """The string ``node`` always evaluates to -- a literal, ``"a" + "b"``, ``"\n".join([...])`` of
    literals -- or None."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = static(node.left), static(node.right)
        return left + right if left is not None and right is not None else None
    f = getattr(node, "func", None)
    if (
        isinstance(node, ast.Call)
        and isinstance(f, ast.Attribute)
        and f.attr == "join"
        and len(node.args) == 1
    ):
        sep, items = static(f.value), node.args[0]
        parts = [static(e) for e in items.elts] if isinstance(items, ast.List | ast.Tuple) else [None]
        return sep.join(parts) if sep is not None and None not in parts else None  # type: ignore[arg-type]
    return None


def assigned_strings(read: list[FunctionFacts]) -> dict[str, str]:
    """Names the test assigns a static string once (:func:`static`): an expected value kept in a
    variable (``expected = ...; assert_equal(expected, result)``). A name read anywhere else is an
    input too (a round trip): left out."""
    found: dict[str, list[str | None]] = {}
    loads: Counter[str] = Counter()
    sides: Counter[str] = Counter()
    for f in read:
        for k, v in f.assigned.items():
            found.setdefault(k, []).extend(v)
        loads.update(f.loads)
        sides.update(f.sides)
    return {
        k: v[0] for k, v in found.items() if len(v) == 1 and v[0] is not None and loads[k] == sides[k] > 0
    }


def compared(n: ast.AST) -> list[ast.expr]:
    """The sides of an ``==`` / ``!=`` or of an ``assertEqual``-like call, else []."""
    if isinstance(n, ast.Compare) and all(isinstance(op, ast.Eq | ast.NotEq) for op in n.ops):
        return [n.left, *n.comparators]
    f = getattr(n, "func", None) if isinstance(n, ast.Call) else None
    return n.args[:2] if f is not None and getattr(f, "attr", getattr(f, "id", "")) in EQUALS else []  # type: ignore[attr-defined]
