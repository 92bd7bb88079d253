import pytest

from tablekit import TableError, UnknownColumnError, col


def test_select(items):
    assert items.query().select("name").rows() == [{"name": "pen"}, {"name": "ink"}, {"name": "pad"}]


def test_select_unknown_column(items):
    with pytest.raises(UnknownColumnError):
        items.query().select("nope")


def test_where_expression(items):
    rows = items.query().where(col("price") > 2).select("name").rows()
    assert [r["name"] for r in rows] == ["ink", "pad"]


def test_where_arithmetic_and_logic(items):
    q = items.query().where((col("price") * col("qty") > 10) & ~(col("name") == "ink"))
    assert [r["name"] for r in q.rows()] == ["pen"]


def test_where_function(items):
    rows = items.query().where(lambda r: r["name"].startswith("p")).rows()
    assert [r["name"] for r in rows] == ["pen", "pad"]


def test_order_by_none_last(items):
    rows = items.query().order_by("qty", descending=True).rows()
    assert [r["name"] for r in rows] == ["pen", "ink", "pad"]
    rows = items.query().order_by("qty").rows()
    assert [r["name"] for r in rows] == ["ink", "pen", "pad"]


def test_limit(items):
    assert len(items.query().order_by("price").limit(2).execute()) == 2
    with pytest.raises(TableError):
        items.query().limit(-1)


def test_query_is_immutable(items):
    base = items.query()
    base.where(col("qty") > 5)
    assert len(base.execute()) == 3
