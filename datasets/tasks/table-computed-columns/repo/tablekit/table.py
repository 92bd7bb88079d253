"""The Table: named, typed columns and rows stored as dicts."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tablekit.column import Column, infer_dtype
from tablekit.errors import DuplicateColumnError, TableError, UnknownColumnError

if TYPE_CHECKING:
    from tablekit.query import Query


class Table:
    def __init__(self, columns: Iterable[Column], rows: Iterable[Mapping[str, Any] | Sequence[Any]] = ()) -> None:
        self._columns: dict[str, Column] = {}
        for column in columns:
            if column.name in self._columns:
                raise DuplicateColumnError(f"column {column.name!r} is defined twice")
            self._columns[column.name] = column
        self._rows: list[dict[str, Any]] = []
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
        return list(self._columns.values())

    @property
    def column_names(self) -> list[str]:
        return list(self._columns)

    def column(self, name: str) -> Column:
        try:
            return self._columns[name]
        except KeyError:
            raise UnknownColumnError(name, self._columns) from None

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
        """Each row as a new dict (changing it does not change the table)."""
        for row in self._rows:
            yield dict(row)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self.rows()

    def __len__(self) -> int:
        return len(self._rows)

    def values(self, name: str) -> list[Any]:
        self.column(name)
        return [row[name] for row in self._rows]

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
