"""Expressions over the columns of a row: ``col("price") * col("qty") > 100``."""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

from tablekit.errors import UnknownColumnError

_ARITH: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
}
_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


class Expr:
    """Base class: ``evaluate(row)`` gives the value, ``columns()`` the column names it reads."""

    def evaluate(self, row: Mapping[str, Any]) -> Any:
        raise NotImplementedError

    def columns(self) -> set[str]:
        raise NotImplementedError

    # arithmetic
    def __add__(self, other: Any) -> Expr:
        return BinOp("+", self, as_expr(other))

    def __radd__(self, other: Any) -> Expr:
        return BinOp("+", as_expr(other), self)

    def __sub__(self, other: Any) -> Expr:
        return BinOp("-", self, as_expr(other))

    def __rsub__(self, other: Any) -> Expr:
        return BinOp("-", as_expr(other), self)

    def __mul__(self, other: Any) -> Expr:
        return BinOp("*", self, as_expr(other))

    def __rmul__(self, other: Any) -> Expr:
        return BinOp("*", as_expr(other), self)

    def __truediv__(self, other: Any) -> Expr:
        return BinOp("/", self, as_expr(other))

    def __rtruediv__(self, other: Any) -> Expr:
        return BinOp("/", as_expr(other), self)

    # comparisons
    def __eq__(self, other: Any) -> Expr:  # type: ignore[override]
        return BinOp("==", self, as_expr(other))

    def __ne__(self, other: Any) -> Expr:  # type: ignore[override]
        return BinOp("!=", self, as_expr(other))

    def __lt__(self, other: Any) -> Expr:
        return BinOp("<", self, as_expr(other))

    def __le__(self, other: Any) -> Expr:
        return BinOp("<=", self, as_expr(other))

    def __gt__(self, other: Any) -> Expr:
        return BinOp(">", self, as_expr(other))

    def __ge__(self, other: Any) -> Expr:
        return BinOp(">=", self, as_expr(other))

    # logic
    def __and__(self, other: Any) -> Expr:
        return BoolOp("and", self, as_expr(other))

    def __or__(self, other: Any) -> Expr:
        return BoolOp("or", self, as_expr(other))

    def __invert__(self) -> Expr:
        return Not(self)

    __hash__ = object.__hash__


class Col(Expr):
    def __init__(self, name: str) -> None:
        self.name = name

    def evaluate(self, row: Mapping[str, Any]) -> Any:
        try:
            return row[self.name]
        except KeyError:
            raise UnknownColumnError(self.name, row.keys()) from None

    def columns(self) -> set[str]:
        return {self.name}

    def __repr__(self) -> str:
        return f"col({self.name!r})"


class Const(Expr):
    def __init__(self, value: Any) -> None:
        self.value = value

    def evaluate(self, row: Mapping[str, Any]) -> Any:
        return self.value

    def columns(self) -> set[str]:
        return set()

    def __repr__(self) -> str:
        return repr(self.value)


class BinOp(Expr):
    """Arithmetic or comparison. A None operand gives None (arithmetic) or False (comparison)."""

    def __init__(self, op: str, left: Expr, right: Expr) -> None:
        self.op, self.left, self.right = op, left, right

    def evaluate(self, row: Mapping[str, Any]) -> Any:
        a, b = self.left.evaluate(row), self.right.evaluate(row)
        if self.op in _ARITH:
            if a is None or b is None:
                return None
            if self.op == "/" and b == 0:
                return None
            return _ARITH[self.op](a, b)
        if a is None or b is None:
            return self.op == "!=" and (a is None) != (b is None)
        return _COMPARE[self.op](a, b)

    def columns(self) -> set[str]:
        return self.left.columns() | self.right.columns()

    def __repr__(self) -> str:
        return f"({self.left!r} {self.op} {self.right!r})"


class BoolOp(Expr):
    def __init__(self, op: str, left: Expr, right: Expr) -> None:
        self.op, self.left, self.right = op, left, right

    def evaluate(self, row: Mapping[str, Any]) -> bool:
        if self.op == "and":
            return bool(self.left.evaluate(row)) and bool(self.right.evaluate(row))
        return bool(self.left.evaluate(row)) or bool(self.right.evaluate(row))

    def columns(self) -> set[str]:
        return self.left.columns() | self.right.columns()

    def __repr__(self) -> str:
        return f"({self.left!r} {self.op} {self.right!r})"


class Not(Expr):
    def __init__(self, inner: Expr) -> None:
        self.inner = inner

    def evaluate(self, row: Mapping[str, Any]) -> bool:
        return not self.inner.evaluate(row)

    def columns(self) -> set[str]:
        return self.inner.columns()

    def __repr__(self) -> str:
        return f"~{self.inner!r}"


def as_expr(value: Any) -> Expr:
    return value if isinstance(value, Expr) else Const(value)


def col(name: str) -> Col:
    """The value of column ``name`` in the row."""
    return Col(name)


def lit(value: Any) -> Const:
    """A constant."""
    return Const(value)
