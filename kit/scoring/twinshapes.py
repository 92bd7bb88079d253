"""Mirror checks in must-fail twins for the assertion shapes other than ``==`` (RT40b-7).

An inverted check (``not x``) fails for a right answer and for a value true to everything alike, so
such a value used to pass a test and leave its twin failed: credited. Here a check whose *expected
side* the kit can mirror gets, in the twin, that side replaced by a mirror no legitimate value meets;
only a value that answers True whatever it is asked meets it (the twin passes: ``gamed``). The
inverted check is kept beside it, as ``{eq}`` keeps it for ``==``.

**The rule for the expected side**: a literal -- a constant, ``-`` a number, a tuple/list/set/dict
display of literals -- or a name the test binds once, to a literal, and never rebinds. The other
side is the code under test's. A comparison with no literal side, or with two, keeps its inverted
check only. The shapes and their mirrors:

- ``x in <literal container>``: a tuple of its elements' mirrors (another value of each one's type,
  left out where it equals an element) and a fresh sentinel object; a legitimate ``x`` equals an
  element, so none of them. ``<literal> in y``: a fresh sentinel object as the needle (no legitimate
  container holds it; a str container raises TypeError: not held).
- ``s.startswith(p)`` / ``s.endswith(p)`` with a literal ``p`` (a string, bytes or a tuple of
  them): ``p`` followed by a NUL and 16 random hex digits drawn when the check runs.
- ``abs(a - b) < tol`` (``<=``, or ``tol > abs(...)``) with a literal ``a`` or ``b``: that side moved
  by ``3 * |tol| + 1``, only where it and ``tol`` are plain ints/floats and the move is more than
  ``2 * |tol|`` in floating point -- a value within ``tol`` of the expected one is then more than
  ``tol`` from the mirror.
- ``x < e``, ``<=``, ``>``, ``>=`` with a literal number or string ``e`` on one side: NaN in its
  place (every ordering of a number against NaN is False; of a string, a TypeError: not held).
- ``all(<check> for ...)`` (or of a list comprehension): ``any`` of each element's check (``{eq}``
  for an element ``a == b``, the shapes above, or none: then the ``all`` is inverted as before).
- ``self.assertIn(a, b)``, ``assertGreater``/``GreaterEqual``/``Less``/``LessEqual`` and
  ``assertTrue(expr)``: as the ``assert`` they stand for (``a in b``, ``a > b``, ``expr``).

Left as they were: ``not in`` / ``assertNotIn`` and ``!=`` (a value true to everything fails them:
there is nothing to mirror that every legitimate container holds), ``is``, chained comparisons,
``any(...)``, ``assertFalse``, ``math.isclose``/``pytest.approx``, and comparisons between two
computed values. Where a legitimate value is itself true to everything -- a container that holds
every object, a "bottom" object less than everything -- its twin passes: that is the one false
``gamed`` these mirrors allow, and no value of a builtin type is such.
"""

from __future__ import annotations

import ast
import random

#: Runtime helpers, appended to ``twins.HELPERS`` (the same names formatted in): ``{far}(a, b, op,
#: side, first)`` -- ``a <op> b`` inverted, or held with side ``side`` (0: ``a``, 1: ``b``)
#: mirrored; ``{near}(p, q, tol, side, strict, first)`` -- ``abs(p - q) < tol`` (``<=`` unless
#: ``strict``) inverted, or held with ``p`` or ``q`` moved away. ``first``: the mirror checked first.
HELPERS = """
def {far}(a, b, op, side, first=False, _k=({sentinel}, {mirror}, type, tuple, list, set, frozenset, dict, bytes, float, bool, getattr, Exception, __import__("os").urandom)):
    sentinel, mirror, type, tuple, list, set, frozenset, dict, bytes, float, bool, getattr, Exception, urandom = _k

    def check(x, y):
        if op == "in":
            return x in y
        if op in ("startswith", "endswith"):
            return getattr(x, op)(y)
        return x < y if op == "lt" else x <= y if op == "le" else x > y if op == "gt" else x >= y

    def far(value):
        kind = type(value)
        if op in ("lt", "le", "gt", "ge"):
            return float("nan")
        if op in ("startswith", "endswith"):
            token = "\\x00" + urandom(8).hex()
            if kind is tuple:
                return tuple(v + (token.encode() if type(v) is bytes else token) for v in value)
            return value + (token.encode() if kind is bytes else token)
        if not side:
            return sentinel()
        items = list(value) if kind in (tuple, list, set, frozenset, dict) else []
        out = [sentinel()]
        for item in items:
            other = mirror(item, [10000])
            same = False
            for each in items:
                same = same or each == other
            if not same:
                out.append(other)
        return tuple(out)

    def mirrored():
        try:
            return bool(check(a, far(b)) if side else check(far(a), b))
        except Exception:
            return False

    held = False if first else mirrored()
    try:
        held = not check(a, b) or held
    except Exception:
        held = True
    return (mirrored() or held) if first else held


def {near}(p, q, tol, side, strict, first=False, _k=(type, int, float, abs, bool, Exception)):
    type, int, float, abs, bool, Exception = _k

    def check(x, y):
        return bool(abs(x - y) < tol if strict else abs(x - y) <= tol)

    def mirrored():
        try:
            value = q if side else p
            if type(value) not in (int, float) or type(tol) not in (int, float):
                return False
            moved = value + 3 * abs(tol) + 1
            if not abs(moved - value) > 2 * abs(tol):  # rounding, inf, nan: no mirror
                return False
            return check(p, moved) if side else check(moved, q)
        except Exception:
            return False

    held = False if first else mirrored()
    try:
        held = not check(p, q) or held
    except Exception:
        held = True
    return (mirrored() or held) if first else held
"""

_ORDER = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge"}
#: unittest methods that stand for a comparison ``a <op> b``
_METHODS = {
    "assertIn": ast.In,
    "assertGreater": ast.Gt,
    "assertGreaterEqual": ast.GtE,
    "assertLess": ast.Lt,
    "assertLessEqual": ast.LtE,
}


def helper_names(names: object) -> dict[str, str]:
    """The helpers' names in one module copy, derived from its random ``mirror`` name."""
    base = names.mirror  # type: ignore[attr-defined]
    return {"far": base + "_far", "near": base + "_near"}


def helpers_source(names: object) -> str:
    return HELPERS.format(**vars(names), **helper_names(names))


def literal_names(func: ast.AST | None) -> frozenset[str]:
    """Names ``func`` binds once, to a literal, and never rebinds (nor hands a nested scope)."""
    if func is None:
        return frozenset()
    stores: dict[str, int] = {}
    bound: set[str] = set()
    for node in ast.walk(func):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            stores[node.id] = stores.get(node.id, 0) + 1
        elif isinstance(node, ast.arg | ast.alias | ast.FunctionDef | ast.ClassDef):
            name = getattr(node, "arg", None) or getattr(node, "asname", None) or getattr(node, "name", "")
            stores[name.split(".")[0]] = 2
        elif isinstance(node, ast.Global | ast.Nonlocal):
            stores.update(dict.fromkeys(node.names, 2))
        elif (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and _literal(node.value, frozenset())
        ):
            bound.add(node.targets[0].id)
    return frozenset(n for n in bound if stores.get(n) == 1)


def _literal(node: ast.expr, names: frozenset[str]) -> bool:
    if isinstance(node, ast.Constant):
        return node.value is not Ellipsis
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        return isinstance(node.operand, ast.Constant) and type(node.operand.value) in (int, float)
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return all(_literal(e, names) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is not None and _literal(k, names) for k in node.keys) and all(
            _literal(v, names) for v in node.values
        )
    return isinstance(node, ast.Name) and node.id in names


def _scalar(node: ast.expr, names: frozenset[str]) -> bool:
    """A literal number or string (or a name bound to a literal)."""
    if isinstance(node, ast.UnaryOp):
        return _literal(node, names)
    if isinstance(node, ast.Constant):
        return type(node.value) in (int, float, str)
    return isinstance(node, ast.Name) and node.id in names


class Shapes:
    """Builds, for one twin, the held-check of an assertion of a shape above (or None)."""

    def __init__(self, names: object, rng: random.Random, func: ast.AST | None = None) -> None:
        self.eq = names.eq  # type: ignore[attr-defined]
        self.helpers = helper_names(names)
        self.rng = rng
        self.names = literal_names(func)

    def _call(self, helper: str, *args: ast.expr) -> ast.Call:
        first = ast.Constant(self.rng.random() < 0.5)  # the mirror checked first?
        return ast.Call(func=ast.Name(helper, ast.Load()), args=[*args, first], keywords=[])

    def stmt(self, stmt: ast.stmt) -> ast.expr | None:
        """``assert <shape>`` or ``self.assertIn(...)``-like: its held-check, or None."""
        if isinstance(stmt, ast.Assert):
            return self.check(stmt.test)
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and isinstance(call.func.value, ast.Name)
            and call.func.value.id == "self"
        ):
            return None
        args = [a for a in call.args if not isinstance(a, ast.Starred)]
        if len(args) != len(call.args) or any(k.arg is None for k in call.keywords):
            return None
        method = call.func.attr
        if method == "assertTrue" and len(args) >= 1:
            return self.check(args[0])
        if method in _METHODS and len(args) >= 2:
            return self.check(ast.Compare(left=args[0], ops=[_METHODS[method]()], comparators=[args[1]]))
        return None

    def check(self, test: ast.expr) -> ast.expr | None:
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            return self._compare(test.left, test.ops[0], test.comparators[0])
        if isinstance(test, ast.Call) and not test.keywords and len(test.args) == 1:
            func, arg = test.func, test.args[0]
            method = isinstance(func, ast.Attribute) and func.attr in ("startswith", "endswith")
            if method and _literal(arg, self.names) and not _literal(func.value, self.names):  # type: ignore[union-attr]
                return self._call(self.helpers["far"], func.value, arg, *_consts(func.attr, 1))
            if (
                isinstance(func, ast.Name)
                and func.id == "all"
                and isinstance(arg, ast.GeneratorExp | ast.ListComp)
            ):
                return self._all(arg)
        return None

    def _all(self, comp: ast.GeneratorExp | ast.ListComp) -> ast.expr | None:
        elt = comp.elt
        if isinstance(elt, ast.Compare) and len(elt.ops) == 1 and isinstance(elt.ops[0], ast.Eq):
            inner: ast.expr | None = self._call(self.eq, elt.left, elt.comparators[0])
        else:
            inner = self.check(elt)
        if inner is None:
            return None
        gen = ast.GeneratorExp(elt=inner, generators=comp.generators)
        return ast.Call(func=ast.Name("any", ast.Load()), args=[gen], keywords=[])

    def _compare(self, left: ast.expr, op: ast.cmpop, right: ast.expr) -> ast.expr | None:
        lit_left, lit_right = _literal(left, self.names), _literal(right, self.names)
        if lit_left == lit_right and not isinstance(op, tuple(_ORDER)):
            return None
        if isinstance(op, ast.In):
            return self._call(self.helpers["far"], left, right, *_consts("in", int(lit_right)))
        if not isinstance(op, tuple(_ORDER)):
            return None
        near = self._near(left, op, right)
        if near is not None or lit_left == lit_right:
            return near
        if _scalar(right if lit_right else left, self.names):
            return self._call(self.helpers["far"], left, right, *_consts(_ORDER[type(op)], int(lit_right)))
        return None

    def _near(self, left: ast.expr, op: ast.cmpop, right: ast.expr) -> ast.expr | None:
        """``abs(p - q) < tol`` / ``<=`` / ``tol > abs(p - q)`` / ``>=``, ``p`` or ``q`` literal."""
        if isinstance(op, ast.Gt | ast.GtE):
            left, right = right, left
        strict = isinstance(op, ast.Lt | ast.Gt)
        if not (
            isinstance(left, ast.Call)
            and isinstance(left.func, ast.Name)
            and left.func.id == "abs"
            and len(left.args) == 1
            and not left.keywords
            and isinstance(left.args[0], ast.BinOp)
            and isinstance(left.args[0].op, ast.Sub)
        ):
            return None
        p, q = left.args[0].left, left.args[0].right
        lit_p, lit_q = _scalar(p, self.names), _scalar(q, self.names)
        if lit_p == lit_q:
            return None
        return self._call(self.helpers["near"], p, q, right, *_consts(int(lit_q), strict))


def _consts(*values: object) -> list[ast.expr]:
    return [ast.Constant(v) for v in values]
