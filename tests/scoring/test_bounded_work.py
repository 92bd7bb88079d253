"""No parse, diff or redaction of agent files in the kit's process grows with what the agent wrote:
each is capped (``kit.agent.tools.MAX_PARSE_BYTES``, ``kit.scoring.testcount.MAX_PARSE_BYTES``,
``kit.tasks.patch``) and the diff lists what it left out. Memory is measured with tracemalloc (``ast``
and the patch's bytes are Python allocations): before the caps each case below cost hundreds of MB."""

from __future__ import annotations

import ast
import os
import tracemalloc

import pytest

from kit.agent.toolbox import Toolbox
from kit.tasks.task import load_task
from kit.tasks.workspace import create_workspace

MB = 2**20


def peak_mb(fn) -> tuple[object, float]:
    """``fn()`` and the peak of Python memory it allocated, in MB."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        out = fn()
        return out, (tracemalloc.get_traced_memory()[1] - before) / MB
    finally:
        tracemalloc.stop()


def _data_module(size: int) -> str:
    """A valid Python module of about ``size`` bytes that is one big literal (expensive to parse)."""
    row = "    (1, 'a', 2.5, None, [3, 4], {'k': 5}),\n"
    return "DATA = [\n" + row * (size // len(row)) + "]\n"


def test_replace_definitions_parses_only_the_file_that_defines_the_name(tmp_path):
    ws = create_workspace(load_task("micro-slugify"), tmp_path / "repo")
    (ws.root / "data_table.py").write_text(_data_module(2 * MB))  # the agent's 2 MB data file
    box = Toolbox(ws.root, ["read", "write"])
    code = "def slugify(text):\n    return '-'.join(text.lower().split())\n"
    res, peak = peak_mb(lambda: box.execute("replace_definitions", {"code": code}))
    assert res.ok, res.output
    assert "return '-'.join" in (ws.root / "textkit.py").read_text()
    assert peak < 64, f"replace_definitions took {peak:.0f} MB"
    refused = box.execute(
        "replace_definitions", {"code": "DATA = 1\ndef f():\n    pass\n", "path": "data_table.py"}
    )
    assert not refused.ok and "use edit_file" in refused.output


def test_replace_definitions_holds_one_parsed_file_at_a_time(tmp_path):
    """Many files that each define the name in one big body just under the parse cap: the kit's
    memory stays that of one parse (it kept every definition's tree: 12 files cost 770 MB, the scan's
    64 MB of such files would have cost over 10 GB and killed the kit)."""
    ws = create_workspace(load_task("micro-slugify"), tmp_path / "repo")
    body = "def slugify():\n    x = [" + "1," * 60_000 + "]\n"  # ~120 KB, under MAX_PARSE_BYTES
    for i in range(8):
        (ws.root / f"m{i}.py").write_text(body)
    box = Toolbox(ws.root, ["read", "write"])
    code = "def slugify(text):\n    return text\n"
    res, peak = peak_mb(lambda: box.execute("replace_definitions", {"code": code}))
    assert not res.ok and "m7.py" in res.output and "needs exactly one" in res.output
    _, one_peak = peak_mb(lambda: ast.parse(body))
    assert peak < 2.5 * one_peak, f"{peak:.0f} MB for 9 definitions, one parse takes {one_peak:.0f} MB"


def test_counting_the_agents_tests_parses_a_bounded_amount(tmp_path):
    from kit.scoring.testcount import count_test_functions

    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_small.py").write_text("def test_a():\n    pass\n\n\ndef test_b():\n    pass\n")
    body = _data_module(2 * MB - 4096) + "\n\ndef test_big():\n    assert DATA\n"
    for i in range(3):
        (tests / f"test_big_{i}.py").write_text(body)  # each just under the old 2 MiB parse cap
    count, peak = peak_mb(lambda: count_test_functions(tmp_path))
    assert count >= 2
    assert peak < 200, f"counting the tests took {peak:.0f} MB"


@pytest.mark.slow
def test_the_diff_is_capped_and_lists_what_it_left_out(tmp_path):
    """The attacker's 160 MB of random files gave a 206 MB diff.patch and +0.7 GB; here 48 MB."""
    from kit.records.recorder import RunRecorder
    from kit.records.schema import RunRecord
    from kit.run.single import _write_diff
    from kit.secrets import Redactor
    from kit.tasks.snapshot import snapshot

    ws = create_workspace(load_task("micro-slugify"), tmp_path / "run" / "repo")
    blobs = ws.root / "blobs"
    blobs.mkdir()
    for i in range(40):
        (blobs / f"r{i:02d}.bin").write_bytes(os.urandom(MB))  # each 1.3 MB of patch: 6 fit in 8 MB
    (blobs / "huge.bin").write_bytes(os.urandom(8 * MB))  # over the per-file cap
    (ws.root / "textkit.py").write_text((ws.root / "textkit.py").read_text() + "\n# changed\n")
    run_dir = tmp_path / "run"
    recorder = RunRecorder(run_dir, "r", Redactor([]))
    record = RunRecord(run_id="r", experiment="e", task="t", strategy="s", profile="p", repeat=1)
    with snapshot(ws.root, ws.sandbox) as snap:
        _, peak = peak_mb(lambda: _write_diff(record, ws, recorder, snap))
    recorder.close()
    patch = (run_dir / "diff.patch").read_bytes()
    assert len(patch) < 9 * MB, len(patch)
    assert b"+# changed" in patch  # small text changes are kept
    omitted = getattr(record, "diff_omitted", None)
    assert omitted and any("huge.bin" in o for o in omitted), omitted
    assert b"left out of this diff" in patch
    assert peak < 40, f"writing the diff took {peak:.0f} MB"


def test_telling_base_code_from_the_agents_parses_a_bounded_amount(tmp_path):
    """scoring's audit hook learns which units of changed base files are unchanged
    (kit/scoring/basecode.py): the agent changes every base file, each just under 2 MB."""
    from kit.scoring.basecode import base_code

    base, copy = tmp_path / "base", tmp_path / "copy"
    for folder in (base, copy):
        folder.mkdir()
    body = _data_module(2 * MB - 4096)
    for i in range(3):
        (base / f"mod{i}.py").write_text(body)
        (copy / f"mod{i}.py").write_text(body + "X = 1\n")
    found, peak = peak_mb(lambda: base_code(copy, base))
    assert set(found["changed"]) == {"mod0.py", "mod1.py", "mod2.py"}
    assert peak < 200, f"telling base code apart took {peak:.0f} MB"


def test_a_huge_code_argument_and_a_huge_listing_stay_bounded(tmp_path):
    """attack-iso-2 F1 and F5: replace_definitions parsed the model's own ``code`` whole in the kit's
    process (5 M characters: 2.8 GB), and list_files with ``max_entries: 10**9`` put every path in the
    conversation and the transcript (90,000 long paths: 340 MB a call)."""
    ws = create_workspace(load_task("micro-slugify"), tmp_path / "repo")
    box = Toolbox(ws.root, ["read", "write"])
    code = "def slugify():\n    x = [" + "1," * 400_000 + "]\n"
    res, peak = peak_mb(lambda: box.execute("replace_definitions", {"code": code}))
    assert not res.ok and "over 256 KB" in res.output
    assert peak < 16, f"replace_definitions took {peak:.0f} MB"
    deep = ws.root / ("d" * 200) / ("e" * 200)
    deep.mkdir(parents=True)
    for i in range(5000):
        (deep / f"{i:05d}{'f' * 200}").touch()
    res = box.execute("list_files", {"path": ".", "max_entries": 10**9})
    assert res.ok and len(res.output) < 2 * box.max_read_bytes + 200
    assert "more characters not shown" in res.output
