"""The kit's own count of the lines changed (kit.scoring.diffstats): the same content gives the same
count however its lines end, no byte makes a file uncountable, and a huge side is never read whole."""

from __future__ import annotations

from kit.scoring import diffstats
from kit.scoring.diffstats import MAX_LINE_BYTES, as_lines, line_stats
from kit.tasks.snapshot import snapshot
from tests.importers.test_attack39f import _clone


def _stats(ws):
    with snapshot(ws.root, ws.sandbox) as snap:
        return line_stats(ws, snap)


def test_line_ends_and_nuls_are_spelled_out_and_no_two_inputs_look_alike():
    assert as_lines(b"a\rb\r\nc\n") == b"a\x01\x04\nb\x01\x03\nc\n"
    assert as_lines(b"\0") == b"\x01\x02" and as_lines(b"\x01\x02") == b"\x01\x01\x02"
    long = as_lines(b"x" * (2 * MAX_LINE_BYTES + 1))
    assert long.count(b"\n") == 2 and b"\0" not in as_lines(b"\0" * 5000)
    cut = as_lines(b"\0" * (MAX_LINE_BYTES + 1))  # a cut never splits an escaped pair
    assert cut.split(b"\n")[0] == b"\x01\x02" * MAX_LINE_BYTES + b"\x01\x05"


def test_a_file_without_line_ends_counts_by_its_size_and_a_line_end_change_counts(tmp_path):
    ws = _clone(tmp_path)
    (ws.root / "blob.bin").write_bytes(b"z" * (10 * MAX_LINE_BYTES))  # one "line" of 2.5 KB
    data = (ws.root / "data.txt").read_bytes()
    (ws.root / "data.txt").write_bytes(data.replace(b"\n", b"\r\n"))  # every line's end changed
    stats = _stats(ws)
    assert (stats.files, stats.added, stats.removed, stats.counted_whole) == (2, 10 + 50, 50, [])


def test_a_side_over_the_cap_is_counted_whole_and_listed(tmp_path, monkeypatch):
    ws = _clone(tmp_path)
    monkeypatch.setattr(diffstats, "MAX_SIDE_BYTES", 100)  # data.txt (50 lines, ~400 bytes) is over it
    (ws.root / "data.txt").write_bytes(b"line 0\ntail\n")
    stats = _stats(ws)
    assert stats.counted_whole == ["data.txt"]
    assert stats.removed >= 50 and stats.added == 2, stats  # the old side: all of it, an upper bound
