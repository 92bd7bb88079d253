"""The sealed checks' shapes besides plain equality (:mod:`kit.scoring.seal`), and the expected
values the kit computes from literals with arithmetic and string formatting.

- **membership** in a literal container: ``assert x in (1, 2)``, ``x not in [..]``,
  ``self.assertIn(x, {..})`` / ``assertNotIn`` (a list, tuple, set or dict -- a dict's keys --, never
  a string: that is a substring check). The session sends the digest of ``x``'s canonical form as
  for an equality; the kit holds the set of the elements' digests. ``in`` on the plain types is
  ``any(e == x)``, so it holds exactly when ``x``'s form is one of the elements' forms. A value with
  no canonical form is in no container and passes no ``not in`` either (it cannot be told apart
  from one of the elements by its contents).
- **identity** with a singleton: ``x is None``, ``is not None``, ``is True``, ``is False``,
  ``assertIsNone``, ``assertIsNotNone``, ``assertIs(x, None|True|False)``, ``assertIsNot``. Every
  sealed check's observation names which of ``None``/``True``/``False`` its value is (if any), so
  such a check looks like any other in the session's copy.
- **expected values with arithmetic** (``*``, ``/``, ``//``, ``%``, ``**`` with small operands), a
  string, bytes, list or tuple times a number, ``%``-formatting, f-strings and ``"...".format(...)``
  of literal scalars: computed by Python itself in the kit, so they are exactly what the test would
  have computed; bounded in size (else left unsealed).
"""

from __future__ import annotations

import ast
import operator
import string
from collections.abc import Callable

MAX_BITS = 4096  # of an integer the kit computes
MAX_LEN = 100_000  # of a string, bytes, list or tuple it computes
_SCALARS = (str, int, float, bool, type(None))
_OPS: dict[type, Callable[[object, object], object]] = {
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_SINGLETONS = {None: "None", True: "True", False: "False"}
_IS_METHODS = {"assertIsNone": (None, False), "assertIsNotNone": (None, True)}
_IN_METHODS = {"assertIn": False, "assertNotIn": True}


class Unsealable(Exception):
    """The expression is not one the kit evaluates on its own."""


def arith(op: ast.operator, left: object, right: object) -> object:
    """``left <op> right`` for ``*``, ``/``, ``//``, ``%`` and ``**`` on plain literals, bounded."""
    kinds = (type(left), type(right))
    func = _OPS.get(type(op))
    numbers = all(k in (int, float) for k in kinds)
    if func is None:
        raise Unsealable
    if isinstance(op, ast.Pow) and numbers:
        if kinds[1] is int and not -64 <= right <= 1024:  # type: ignore[operator]
            raise Unsealable
        if kinds == (int, int) and abs(left).bit_length() * abs(right) > MAX_BITS:  # type: ignore[arg-type]
            raise Unsealable
    elif isinstance(op, ast.Mult) and not numbers:
        seq, count = (left, right) if kinds[1] is int else (right, left)
        if type(seq) not in (str, bytes, list, tuple) or type(count) is not int:
            raise Unsealable
        if len(seq) * max(count, 0) > MAX_LEN:  # type: ignore[arg-type]
            raise Unsealable
    elif isinstance(op, ast.Mod) and kinds[0] is str:
        args = right if kinds[1] is tuple else (right,)
        if not all(type(a) in _SCALARS for a in args):  # type: ignore[union-attr]
            raise Unsealable
    elif not numbers:
        raise Unsealable
    try:
        value = func(left, right)
    except (ArithmeticError, ValueError, TypeError) as exc:
        raise Unsealable from exc
    if type(value) is int and value.bit_length() > MAX_BITS:
        raise Unsealable
    if isinstance(value, str | bytes | list | tuple) and len(value) > MAX_LEN:
        raise Unsealable
    return value


def _scalar(value: object) -> object:
    if type(value) not in _SCALARS:
        raise Unsealable
    return value


def joined(node: ast.JoinedStr, evaluate: Callable[[ast.expr], object]) -> str:
    """An f-string of literal scalars."""
    parts = []
    for part in node.values:
        if isinstance(part, ast.Constant) and type(part.value) is str:
            parts.append(part.value)
            continue
        if not isinstance(part, ast.FormattedValue):
            raise Unsealable
        value = _scalar(evaluate(part.value))
        if part.conversion in (ord("r"), ord("s"), ord("a")):
            value = {ord("r"): repr, ord("s"): str, ord("a"): ascii}[part.conversion](value)
        spec = joined(part.format_spec, evaluate) if isinstance(part.format_spec, ast.JoinedStr) else ""
        try:
            parts.append(format(value, spec))
        except (ValueError, TypeError) as exc:
            raise Unsealable from exc
    text = "".join(parts)
    if len(text) > MAX_LEN:
        raise Unsealable
    return text


def str_format(node: ast.Call, evaluate: Callable[[ast.expr], object]) -> str:
    """``"<literal>".format(<literal scalars>)``; fields by name or index only (no ``.attr``, ``[i]``)."""
    template = node.func.value.value  # type: ignore[attr-defined]
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f]
    except ValueError as exc:
        raise Unsealable from exc
    if any("." in f or "[" in f for f in fields) or any(k.arg is None for k in node.keywords):
        raise Unsealable
    if any(isinstance(a, ast.Starred) for a in node.args):
        raise Unsealable
    args = [_scalar(evaluate(a)) for a in node.args]
    kwargs = {k.arg: _scalar(evaluate(k.value)) for k in node.keywords}
    try:
        text = template.format(*args, **kwargs)
    except (ValueError, TypeError, IndexError, KeyError) as exc:
        raise Unsealable from exc
    if len(text) > MAX_LEN:
        raise Unsealable
    return text


#: methods of a literal string (or bytes) whose result is a plain value computed from their arguments
_STR_METHODS = frozenset(
    [
        "join",
        "split",
        "rsplit",
        "splitlines",
        "upper",
        "lower",
        "casefold",
        "title",
        "capitalize",
        "swapcase",
        "strip",
        "lstrip",
        "rstrip",
        "replace",
        "zfill",
        "center",
        "ljust",
        "rjust",
        "encode",
        "decode",
        "removeprefix",
        "removesuffix",
        "partition",
        "rpartition",
    ]
)
_CODECS = ("utf-8", "utf8", "ascii", "latin-1", "latin1")


def builtin(func: object, args: list[object]) -> object:
    """``range`` (bounded), ``sorted``, or ``list``/``tuple``/``set``/``frozenset``/``dict`` of literal data."""
    if func is range:
        if not 1 <= len(args) <= 3 or not all(type(a) is int for a in args):
            raise Unsealable
        value: object = range(*args)  # type: ignore[arg-type]
        if len(value) > MAX_LEN:  # type: ignore[arg-type]
            raise Unsealable
        return value
    if not all(type(a) in (list, tuple, set, frozenset, dict, str, bytes, range) for a in args):
        raise Unsealable
    if func is sorted and len(args) != 1:
        raise Unsealable
    try:
        return func(*args)  # type: ignore[operator]
    except (TypeError, ValueError) as exc:  # (sorted over mixed types, dict of bad pairs)
        raise Unsealable from exc


def method(receiver: object, name: str, args: list[object]) -> object:
    """``<literal str or bytes>.<method>(<literal arguments>)`` for a method of :data:`_STR_METHODS`."""
    kind = type(receiver)
    if kind not in (str, bytes) or name not in _STR_METHODS:
        raise Unsealable
    for arg in args:
        if type(arg) in (list, tuple):
            if name != "join" or not all(type(a) is kind for a in arg):  # type: ignore[attr-defined]
                raise Unsealable
        elif type(arg) not in (str, bytes, int) or (type(arg) is int and not -1 <= arg <= MAX_LEN):
            raise Unsealable
    if name in ("encode", "decode") and not all(a in _CODECS or a == "strict" for a in args):
        raise Unsealable
    grows = max([len(a) for a in args if type(a) in (str, bytes)] + [1])  # type: ignore[arg-type]
    parts = len(args[0]) if name == "join" and args else 1  # type: ignore[arg-type]
    if (len(receiver) + 1) * grows * parts > MAX_LEN:  # type: ignore[arg-type]
        raise Unsealable
    try:
        value = getattr(receiver, name)(*args)
    except (TypeError, ValueError, LookupError) as exc:
        raise Unsealable from exc
    if isinstance(value, str | bytes | list | tuple) and len(value) > MAX_LEN:
        raise Unsealable
    return value


def is_str_format(node: ast.Call) -> bool:
    func = node.func
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "format"
        and isinstance(func.value, ast.Constant)
        and type(func.value.value) is str
    )


def shape(stmt: ast.stmt) -> tuple[ast.expr, ast.expr, str, bool] | None:
    """(actual, expected, kind, negated) of a membership (``"in"``) or identity (``"is"``) assertion
    statement, or None. The expected side of an identity is the ``None``/``True``/``False`` constant."""
    if isinstance(stmt, ast.Assert):
        test = stmt.test
        if not isinstance(test, ast.Compare) or len(test.ops) != 1:
            return None
        op, left, right = test.ops[0], test.left, test.comparators[0]
        if isinstance(op, ast.In | ast.NotIn):
            return left, right, "in", isinstance(op, ast.NotIn)
        if isinstance(op, ast.Is | ast.IsNot):
            negated = isinstance(op, ast.IsNot)
            if _singleton(right):
                return left, right, "is", negated
            if _singleton(left):
                return right, left, "is", negated
        return None
    if not isinstance(stmt, ast.Expr) or not isinstance(call := stmt.value, ast.Call):
        return None
    func = call.func
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self"):
        return None
    if call.keywords or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    args = call.args
    if func.attr in _IS_METHODS and len(args) in (1, 2):
        value, negated = _IS_METHODS[func.attr]
        return args[0], ast.Constant(value), "is", negated
    if func.attr in ("assertIs", "assertIsNot") and len(args) in (2, 3):
        negated = func.attr == "assertIsNot"
        if _singleton(args[1]):
            return args[0], args[1], "is", negated
        if _singleton(args[0]):
            return args[1], args[0], "is", negated
        return None
    if func.attr in _IN_METHODS and len(args) in (2, 3):
        return args[0], args[1], "in", _IN_METHODS[func.attr]
    return None


def _singleton(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and any(node.value is s for s in _SINGLETONS)


def members(container: object) -> list[object]:
    """The elements a literal container's ``in`` compares with (a dict: its keys); not a string."""
    if type(container) not in (list, tuple, set, frozenset, dict) or not container:  # type: ignore[arg-type]
        raise Unsealable
    return list(container)  # type: ignore[call-overload]


def identity_name(node: ast.expr) -> str:
    return _SINGLETONS[node.value]  # type: ignore[attr-defined,index]
