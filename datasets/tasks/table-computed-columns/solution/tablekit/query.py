"""Queries: ``table.query().where(...).order_by(...).select(...).limit(n).execute()``.

A Query is immutable: every method returns a new Query. ``execute`` returns a new Table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from tablekit.errors import TableError, UnknownColumnError
from tablekit.expressions import Expr
from tablekit.table import Table

Condition = Expr | Callable[[Mapping[str, Any]], Any]


@dataclass(frozen=True)
class Query:
    table: Table
    selected: tuple[str, ...] | None = None
    conditions: tuple[Condition, ...] = ()
    ordering: tuple[tuple[str, bool], ...] = ()
    max_rows: int | None = field(default=None)

    def _check(self, names: set[str] | tuple[str, ...]) -> None:
        for name in names:
            if name not in self.table.column_names:
                raise UnknownColumnError(name, self.table.column_names)

    def select(self, *names: str) -> Query:
        if not names:
            raise TableError("select() needs at least one column name")
        self._check(names)
        return replace(self, selected=tuple(names))

    def where(self, condition: Condition) -> Query:
        """Keep rows where ``condition`` (an Expr or a function of the row dict) is true."""
        if isinstance(condition, Expr):
            self._check(condition.columns())
        elif not callable(condition):
            raise TableError("where() needs an expression or a function of the row")
        return replace(self, conditions=(*self.conditions, condition))

    def order_by(self, name: str, descending: bool = False) -> Query:
        """Sort by ``name`` (later calls break ties of earlier ones); None values always go last."""
        self._check((name,))
        return replace(self, ordering=(*self.ordering, (name, descending)))

    def limit(self, n: int) -> Query:
        if n < 0:
            raise TableError("limit must be >= 0")
        return replace(self, max_rows=n)

    def _matches(self, row: Mapping[str, Any]) -> bool:
        for cond in self.conditions:
            value = cond.evaluate(row) if isinstance(cond, Expr) else cond(row)
            if not value:
                return False
        return True

    def execute(self) -> Table:
        rows = [r for r in self.table.rows() if self._matches(r)]
        for name, descending in reversed(self.ordering):
            present = [r for r in rows if r[name] is not None]
            missing = [r for r in rows if r[name] is None]
            rows = sorted(present, key=lambda r, n=name: r[n], reverse=descending) + missing
        if self.max_rows is not None:
            rows = rows[: self.max_rows]
        names = list(self.selected) if self.selected else self.table.column_names
        columns = [self.table.column(n) for n in names]  # computed values become stored columns
        return Table(columns, [{n: r[n] for n in names} for r in rows])

    def rows(self) -> list[dict[str, Any]]:
        return list(self.execute().rows())
