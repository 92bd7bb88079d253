"""A small in-memory table and query library."""

from tablekit.column import Column
from tablekit.errors import ColumnCycleError, DuplicateColumnError, TableError, UnknownColumnError
from tablekit.expressions import Expr, col, lit
from tablekit.formatting import to_csv, to_text
from tablekit.query import Query
from tablekit.table import Table

__all__ = [
    "Column",
    "ColumnCycleError",
    "DuplicateColumnError",
    "Expr",
    "Query",
    "Table",
    "TableError",
    "UnknownColumnError",
    "col",
    "lit",
    "to_csv",
    "to_text",
]
