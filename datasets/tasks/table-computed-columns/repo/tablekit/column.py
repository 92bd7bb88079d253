"""Column definitions and value coercion."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tablekit.errors import TableError

DTYPES = ("int", "float", "str", "bool", "any")
_TRUE = ("true", "yes", "1")
_FALSE = ("false", "no", "0")


@dataclass(frozen=True)
class Column:
    name: str
    dtype: str = "any"
    nullable: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise TableError(f"invalid column name {self.name!r}: use letters, digits and _")
        if self.dtype not in DTYPES:
            raise TableError(f"column {self.name!r}: unknown dtype {self.dtype!r} (one of {', '.join(DTYPES)})")

    @property
    def numeric(self) -> bool:
        return self.dtype in ("int", "float")

    def coerce(self, value: Any) -> Any:
        """``value`` converted to this column's dtype (None stays None if the column is nullable)."""
        if value is None:
            if not self.nullable:
                raise TableError(f"column {self.name!r} does not accept None")
            return None
        if self.dtype == "any":
            return value
        if self.dtype == "bool":
            return self._to_bool(value)
        if self.dtype == "int" and isinstance(value, float) and not value.is_integer():
            raise TableError(f"column {self.name!r}: {value!r} is not a whole number")
        try:
            return {"int": int, "float": float, "str": str}[self.dtype](value)
        except (TypeError, ValueError):
            raise TableError(f"column {self.name!r}: cannot convert {value!r} to {self.dtype}") from None

    def _to_bool(self, value: Any) -> bool:
        if isinstance(value, str):
            low = value.strip().lower()
            if low in _TRUE:
                return True
            if low in _FALSE:
                return False
            raise TableError(f"column {self.name!r}: cannot convert {value!r} to bool")
        return bool(value)


def infer_dtype(values: list[Any]) -> str:
    """The narrowest dtype that fits every non-None value."""
    kinds = {type(v) for v in values if v is not None}
    if not kinds:
        return "any"
    if kinds == {bool}:
        return "bool"
    if kinds == {int}:
        return "int"
    if kinds <= {int, float}:
        return "float"
    if kinds == {str}:
        return "str"
    return "any"
