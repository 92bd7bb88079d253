import io

import pytest

from exporter import export as export_module

COLUMNS = ["id", "name", "score"]
AHEAD = 10  # rows the exporter may pull before it has written them


class Source:
    """Generated rows that count how many have been pulled."""

    def __init__(self, n):
        self.n = n
        self.pulled = 0

    def __iter__(self):
        for i in range(self.n):
            self.pulled += 1
            yield {"id": i, "name": f"row {i}", "score": i * 0.5}


class Sink:
    """A file-like object that checks, at every write, how far the exporter has read ahead."""

    def __init__(self, source, keep=False):
        self.source = source
        self.lines = 0  # complete lines written so far (header included)
        self.max_ahead = 0
        self.writes = 0
        self.keep = keep
        self.parts = []
        self.closed = False

    def write(self, text):
        self.writes += 1
        self.lines += text.count("\n")
        rows_written = max(self.lines - 1, 0)
        self.max_ahead = max(self.max_ahead, self.source.pulled - rows_written)
        assert self.source.pulled - rows_written <= AHEAD, (
            f"exporter pulled {self.source.pulled} rows but wrote only {rows_written}"
        )
        if self.keep:
            self.parts.append(text)
        return len(text)

    def close(self):
        self.closed = True


def _expected(rows):
    lines = [",".join(COLUMNS)]
    for r in rows:
        lines.append(export_module.format_row([r.get(c) for c in COLUMNS]))
    return "\n".join(lines) + "\n"


@pytest.mark.severity("critical")
def test_streams_200k_rows_with_bounded_read_ahead():
    source = Source(200_000)
    sink = Sink(source)
    n = export_module.write_csv(iter(source), COLUMNS, sink)
    assert n == 200_000
    assert source.pulled == 200_000
    assert sink.lines == 200_001
    assert sink.max_ahead <= AHEAD


@pytest.mark.severity("critical")
def test_output_matches_export_csv():
    rows = [{"id": i, "name": f"n{i}", "score": i / 4} for i in range(50)]
    out = io.StringIO()
    assert export_module.write_csv(rows, COLUMNS, out) == 50
    assert out.getvalue() == _expected(rows)
    assert export_module.export_csv(rows, COLUMNS) == out.getvalue()


@pytest.mark.severity("major")
def test_quoting_and_empty_values_are_preserved():
    rows = [
        {"id": 1, "name": 'say "hi", please', "score": None},
        {"id": 2, "name": "two\nlines"},
        {"id": True, "name": "", "score": 1.25},
    ]
    out = io.StringIO()
    export_module.write_csv(iter(rows), COLUMNS, out)
    assert out.getvalue() == (
        'id,name,score\n1,"say ""hi"", please",\n2,"two\nlines",\ntrue,,1.25\n'
    )


@pytest.mark.severity("major")
def test_empty_input_writes_header_only():
    out = io.StringIO()
    assert export_module.write_csv(iter([]), COLUMNS, out) == 0
    assert out.getvalue() == "id,name,score\n"


@pytest.mark.severity("minor")
def test_does_not_close_the_output():
    source = Source(3)
    sink = Sink(source, keep=True)
    export_module.write_csv(source, COLUMNS, sink)
    assert not sink.closed
    assert "".join(sink.parts) == _expected(list(Source(3)))


@pytest.mark.severity("minor")
@pytest.mark.baseline_pass
def test_export_csv_still_returns_the_text_for_a_generator():
    text = export_module.export_csv((r for r in Source(5)), COLUMNS)
    assert text == _expected(list(Source(5)))
    assert text.count("\n") == 6
