from exporter import export_csv, format_row, format_value


def test_header_and_rows():
    rows = [{"id": 1, "name": "Ada"}, {"id": 2, "name": "Grace"}]
    assert export_csv(rows, ["id", "name"]) == "id,name\n1,Ada\n2,Grace\n"


def test_empty_input_gives_header_only():
    assert export_csv([], ["a", "b"]) == "a,b\n"


def test_missing_and_none_values_are_empty():
    assert export_csv([{"a": None}], ["a", "b"]) == "a,b\n,\n"


def test_quoting():
    assert format_value('say "hi", please') == '"say ""hi"", please"'
    assert format_value("two\nlines") == '"two\nlines"'
    assert format_value("plain") == "plain"


def test_value_types():
    assert format_row([True, False, 1.5, 3, None]) == "true,false,1.5,3,"
