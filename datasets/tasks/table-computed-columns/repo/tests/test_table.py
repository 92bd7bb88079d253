import pytest

from tablekit import Column, DuplicateColumnError, Table, TableError, UnknownColumnError


def test_column_names_and_len(items):
    assert items.column_names == ["name", "price", "qty"]
    assert len(items) == 3


def test_add_row_from_sequence_coerces(items):
    items.add_row(["cap", "2", "4"])
    assert list(items.rows())[-1] == {"name": "cap", "price": 2.0, "qty": 4}


def test_add_row_unknown_column(items):
    with pytest.raises(UnknownColumnError) as err:
        items.add_row({"colour": "red"})
    assert "colour" in str(err.value)
    assert "price" in str(err.value)


def test_add_row_wrong_length(items):
    with pytest.raises(TableError):
        items.add_row(["only one"])


def test_duplicate_column():
    with pytest.raises(DuplicateColumnError):
        Table([Column("a"), Column("a")])


def test_rows_are_copies(items):
    row = next(items.rows())
    row["name"] = "changed"
    assert next(items.rows())["name"] == "pen"


def test_values(items):
    assert items.values("qty") == [10, 2, None]


def test_from_records_infers_dtypes():
    t = Table.from_records([{"a": 1, "b": "x", "c": 1.5}, {"a": 2, "b": "y", "c": 2}])
    assert [c.dtype for c in t.columns] == ["int", "str", "float"]


def test_column_coercion_errors():
    with pytest.raises(TableError):
        Column("n", "int").coerce("abc")
    with pytest.raises(TableError):
        Column("n", "int", nullable=False).coerce(None)
    assert Column("flag", "bool").coerce("yes") is True
