from tablekit import Column, Table


def test_to_text(items):
    assert items.to_text() == (
        "name  price  qty\n"
        "----  -----  ---\n"
        "pen    1.50   10\n"
        "ink    7.25    2\n"
        "pad    3.00\n"
    )


def test_to_text_max_rows(items):
    assert items.to_text(max_rows=1).endswith("... (2 more rows)\n")


def test_to_csv(items):
    assert items.to_csv() == "name,price,qty\npen,1.5,10\nink,7.25,2\npad,3.0,\n"


def test_to_csv_quotes():
    t = Table([Column("text", "str")], [["a,b"], ['say "x"']])
    assert t.to_csv() == 'text\n"a,b"\n"say ""x"""\n'
