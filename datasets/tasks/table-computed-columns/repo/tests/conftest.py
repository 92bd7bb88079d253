import pytest

from tablekit import Column, Table


@pytest.fixture
def items():
    t = Table([Column("name", "str"), Column("price", "float"), Column("qty", "int")])
    t.add_row({"name": "pen", "price": 1.5, "qty": 10})
    t.add_row({"name": "ink", "price": 7.25, "qty": 2})
    t.add_row({"name": "pad", "price": 3.0, "qty": None})
    return t
