"""The Table: named, typed columns and rows stored as dicts."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tablekit.column import Column, infer_dtype
from tablekit.errors import ColumnCycleError, DuplicateColumnError, TableError, UnknownColumnError
from tablekit.expressions import Expr

if TYPE_CHECKING:
    from tablekit.query import Query


@dataclass(frozen=True)
class Computed:
    column: Column
    compute: Callable[[Mapping[str, Any]], Any]
    depends_on: frozenset[str]


class Table:
    def __init__(self, columns: Iterable[Column], rows: Iterable[Mapping[str, Any] | Sequence[Any]] = ()) -> None:
        self._columns: dict[str, Column] = {}
        for column in columns:
            if column.name in self._columns:
                raise DuplicateColumnError(f"column {column.name!r} is defined twice")
            self._columns[column.name] = column
        self._rows: list[dict[str, Any]] = []
        self._computed: dict[str, Computed] = {}
        self._order: list[str] = []  # computed columns in evaluation order
        for row in rows:
            self.add_row(row)

    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]], columns: Sequence[str] | None = None) -> Table:
        """A table from dicts; column names from ``columns`` or the first record, dtypes inferred."""
        records = list(records)
        if columns is None:
            columns = list(records[0]) if records else []
        cols = [Column(name, infer_dtype([r.get(name) for r in records])) for name in columns]
        return cls(cols, records)

    # -- schema ------------------------------------------------------------------------------
    @property
    def columns(self) -> list[Column]:
        """Stored columns, then computed columns in the order they were added."""
        return [*self._columns.values(), *(c.column for c in self._computed.values())]

    @property
    def column_names(self) -> list[str]:
        return [*self._columns, *self._computed]

    def column(self, name: str) -> Column:
        if name in self._columns:
            return self._columns[name]
        if name in self._computed:
            return self._computed[name].column
        raise UnknownColumnError(name, self.column_names)

    def add_computed(
        self,
        name: str,
        expr: Expr | Callable[[Mapping[str, Any]], Any],
        *,
        depends_on: Iterable[str] | None = None,
        dtype: str = "any",
        replace: bool = False,
    ) -> None:
        """Add a column computed from other columns of the row, by an Expr or a function of the row.

        A function must name the columns it reads in ``depends_on``. Computed columns may read other
        computed columns; ``replace=True`` redefines an existing computed column.
        """
        if isinstance(expr, Expr):
            compute, deps = expr.evaluate, set(expr.columns())
            if depends_on is not None:
                deps |= set(depends_on)
        elif callable(expr):
            if depends_on is None:
                raise TableError(f"computed column {name!r}: a function needs depends_on=[...]")
            compute, deps = expr, set(depends_on)
        else:
            raise TableError(f"computed column {name!r}: give an expression or a function of the row")
        column = Column(name, dtype)
        if name in self._columns or (name in self._computed and not replace):
            raise DuplicateColumnError(f"column {name!r} already exists")
        known = set(self._columns) | set(self._computed) | {name}
        for dep in sorted(deps):
            if dep not in known:
                raise UnknownColumnError(dep, self.column_names)
        candidate = dict(self._computed)
        candidate[name] = Computed(column, compute, frozenset(deps))
        self._order = self._evaluation_order(candidate)
        self._computed = candidate

    @staticmethod
    def _evaluation_order(computed: dict[str, Computed]) -> list[str]:
        order: list[str] = []
        state: dict[str, str] = {}

        def visit(name: str, path: list[str]) -> None:
            if state.get(name) == "done":
                return
            if state.get(name) == "visiting":
                cycle = " -> ".join([*path[path.index(name) :], name])
                raise ColumnCycleError(f"computed columns depend on each other: {cycle}")
            state[name] = "visiting"
            for dep in sorted(computed[name].depends_on):
                if dep in computed:
                    visit(dep, [*path, name])
            state[name] = "done"
            order.append(name)

        for name in computed:
            visit(name, [])
        return order

    # -- rows --------------------------------------------------------------------------------
    def add_row(self, row: Mapping[str, Any] | Sequence[Any]) -> None:
        """Add a row given as a mapping (missing columns are None) or a sequence in column order."""
        if isinstance(row, Mapping):
            for key in row:
                if key not in self._columns:
                    raise UnknownColumnError(key, self._columns)
            values = {name: row.get(name) for name in self._columns}
        else:
            if len(row) != len(self._columns):
                raise TableError(f"row has {len(row)} values, the table has {len(self._columns)} columns")
            values = dict(zip(self._columns, row, strict=True))
        self._rows.append({name: self._columns[name].coerce(v) for name, v in values.items()})

    def rows(self) -> Iterator[dict[str, Any]]:
        """Each row as a new dict with its computed values (changing it does not change the table)."""
        for stored in self._rows:
            row = dict(stored)
            for name in self._order:
                computed = self._computed[name]
                row[name] = computed.column.coerce(computed.compute(row))
            yield row

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self.rows()

    def __len__(self) -> int:
        return len(self._rows)

    def values(self, name: str) -> list[Any]:
        self.column(name)
        return [row[name] for row in self.rows()]

    # -- queries and output ------------------------------------------------------------------
    def query(self) -> Query:
        from tablekit.query import Query

        return Query(self)

    def to_text(self, max_rows: int | None = None) -> str:
        from tablekit.formatting import to_text

        return to_text(self, max_rows=max_rows)

    def to_csv(self) -> str:
        from tablekit.formatting import to_csv

        return to_csv(self)

    def __repr__(self) -> str:
        return f"Table(columns={self.column_names}, rows={len(self)})"
