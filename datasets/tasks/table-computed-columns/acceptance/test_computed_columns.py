import pytest

import tablekit
from tablekit import Column, Table, col


def make_table():
    t = Table([Column("name", "str"), Column("price", "float"), Column("qty", "int")])
    t.add_row({"name": "pen", "price": 1.5, "qty": 10})
    t.add_row({"name": "ink", "price": 7.25, "qty": 2})
    t.add_row({"name": "pad", "price": 3.0, "qty": 4})
    return t


@pytest.mark.severity("critical")
def test_expression_column_appears_in_rows():
    t = make_table()
    t.add_computed("total", col("price") * col("qty"))
    assert [r["total"] for r in t.rows()] == [15.0, 14.5, 12.0]
    assert t.values("total") == [15.0, 14.5, 12.0]


@pytest.mark.severity("critical")
def test_computed_column_in_names_and_csv():
    t = make_table()
    t.add_computed("total", col("price") * col("qty"))
    assert t.column_names == ["name", "price", "qty", "total"]
    assert t.to_csv() == "name,price,qty,total\npen,1.5,10,15.0\nink,7.25,2,14.5\npad,3.0,4,12.0\n"


@pytest.mark.severity("major")
def test_select_computed_column():
    t = make_table()
    t.add_computed("total", col("price") * col("qty"))
    rows = t.query().select("name", "total").rows()
    assert rows == [
        {"name": "pen", "total": 15.0},
        {"name": "ink", "total": 14.5},
        {"name": "pad", "total": 12.0},
    ]


@pytest.mark.severity("major")
def test_where_on_computed_column():
    t = make_table()
    t.add_computed("total", col("price") * col("qty"))
    rows = t.query().where(col("total") > 13).select("name").rows()
    assert [r["name"] for r in rows] == ["pen", "ink"]
    rows = t.query().where(lambda r: r["total"] < 13).select("name").rows()
    assert [r["name"] for r in rows] == ["pad"]


@pytest.mark.severity("major")
def test_order_by_computed_column():
    t = make_table()
    t.add_computed("total", col("price") * col("qty"))
    assert [r["name"] for r in t.query().order_by("total").rows()] == ["pad", "ink", "pen"]
    assert [r["name"] for r in t.query().order_by("total", descending=True).limit(1).rows()] == ["pen"]


@pytest.mark.severity("major")
def test_function_column_with_depends_on():
    t = make_table()
    t.add_computed("label", lambda r: f"{r['name']} x{r['qty']}", depends_on=["name", "qty"])
    assert t.values("label") == ["pen x10", "ink x2", "pad x4"]


@pytest.mark.severity("major")
def test_computed_column_can_use_another_computed_column():
    t = make_table()
    t.add_computed("total", col("price") * col("qty"))
    t.add_computed("with_tax", col("total") * 1.2)
    assert [round(v, 2) for v in t.values("with_tax")] == [18.0, 17.4, 14.4]
    assert [r["name"] for r in t.query().where(col("with_tax") > 15).rows()] == ["pen", "ink"]


@pytest.mark.severity("major")
def test_unknown_columns_are_rejected():
    t = make_table()
    with pytest.raises(tablekit.UnknownColumnError):
        t.add_computed("bad", col("weight") * 2)
    with pytest.raises(tablekit.UnknownColumnError):
        t.add_computed("bad", lambda r: 1, depends_on=["weight"])
    assert "bad" not in t.column_names


@pytest.mark.severity("minor")
def test_cycles_are_rejected():
    t = make_table()
    t.add_computed("a", col("qty") + 1)
    t.add_computed("b", col("a") * 2)
    with pytest.raises(tablekit.errors.ColumnCycleError):
        t.add_computed("a", col("b") + 1, replace=True)
    with pytest.raises(tablekit.errors.ColumnCycleError):
        t.add_computed("c", col("c") + 1)
    assert t.values("b") == [22, 6, 10]


@pytest.mark.severity("minor")
def test_name_clash_is_rejected():
    t = make_table()
    with pytest.raises(tablekit.DuplicateColumnError):
        t.add_computed("price", col("qty") * 2)


@pytest.mark.severity("minor")
def test_to_text_shows_computed_column():
    t = make_table()
    t.add_computed("total", col("price") * col("qty"))
    lines = t.to_text().splitlines()
    assert lines[0].split() == ["name", "price", "qty", "total"]
    assert lines[2].split() == ["pen", "1.50", "10", "15.00"]


@pytest.mark.severity("minor")
def test_rows_added_later_get_computed_values():
    t = make_table()
    t.add_computed("total", col("price") * col("qty"))
    t.add_row({"name": "cap", "price": 2.0, "qty": 3})
    assert t.values("total")[-1] == 6.0
