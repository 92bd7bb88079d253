"""What scoring keeps between scorings and how its work is ordered, for speed, without changing a
verdict: the base tree kept per process (kit/scoring/basetree.py), the sessions writing their tests
one at a time (kit/scoring/sessions.py ``Turns``) with the line count after them, and the line
counter's cut of long lines (kit/scoring/diffstats.py)."""

from __future__ import annotations

import random
import re
import threading
import time

from kit.scoring import basetree, diffstats
from kit.scoring.diffstats import _LONG, MAX_LINE_BYTES, as_lines
from kit.scoring.sessions import Turns


def _as_lines_before(data: bytes) -> bytes:
    """The line counter's text as it was made before (the pattern run over the whole text)."""
    data = data.replace(b"\x01", b"\x01\x01").replace(b"\0", b"\x01\x02")
    data = data.replace(b"\r\n", b"\x01\x03\n").replace(b"\r", b"\x01\x04\n")
    if re.search(b"[^\\n]{%d}" % (MAX_LINE_BYTES + 1), data):
        data = _LONG.sub(lambda m: m.group(0) + b"\x01\x05\n", data)
    return data


def test_long_lines_are_cut_as_before_and_short_lines_cost_no_pattern_search():
    rng = random.Random(7)
    alphabets = [b"ab\n", b"a\x00\x01\r\n", b"abc\x01", bytes(range(256)), b"x" * 50 + b"\n"]
    for _ in range(400):
        alphabet = rng.choice(alphabets)
        data = bytes(rng.choice(alphabet) for _ in range(rng.choice([0, 7, 300, 700, 3000])))
        if rng.random() < 0.4:
            data = b"\n".join([data, b"\x00y" * rng.randint(120, 400), data])
        assert as_lines(data) == _as_lines_before(data)


def test_the_cut_pattern_runs_over_long_lines_only(monkeypatch):
    """One long line among 20,000 short ones: the pattern was run over the whole text, tried from
    every byte of it (0.75 s here; a third of a second of each scoring of tomlkit-0-15-1)."""
    searched: list[int] = []

    class Spy:
        def sub(self, repl, text):
            searched.append(len(text))
            return _LONG.sub(repl, text)

    monkeypatch.setattr(diffstats, "_LONG", Spy())
    text = b"".join(b"%d = call(argument_%d)  # a comment of some length\n" % (i, i) for i in range(20_000))
    text += b"z" * (MAX_LINE_BYTES + 1)
    assert as_lines(text) == text[:-1] + b"\x01\x05\nz"
    assert searched == [MAX_LINE_BYTES + 1]


def test_turns_go_in_order_and_a_turn_that_fails_still_ends():
    turns = Turns(["own", "acceptance"])
    seen: list[str] = []

    def acceptance():
        with turns.turn("acceptance"):
            seen.append("acceptance")

    t = threading.Thread(target=acceptance)
    t.start()
    time.sleep(0.2)
    assert seen == []  # waits for the own tests' turn
    try:
        with turns.turn("own"):
            seen.append("own")
            raise RuntimeError("the own session failed while writing its tests")
    except RuntimeError:
        pass
    t.join(5)
    assert seen == ["own", "acceptance"]
    turns.wait_all()  # both ended: returns at once
    with turns.turn("base"):  # a name not in the order waits for nobody
        pass


def test_scorings_after_the_first_share_one_base_tree_and_the_base_run_never_writes_in_it(
    tmp_path, monkeypatch
):
    """The first scoring runs the base's own tests in a tree of its own (its sessions write there);
    the others read one kept tree, extracted once."""
    from kit.scoring.scorer import clear_base_cache, score
    from kit.tasks.task import apply_solution, load_task
    from kit.tasks.workspace import create_workspace

    extracted: list[str] = []
    real = basetree.extract_commit

    def spy(ws, dest):
        extracted.append(str(dest))
        return real(ws, dest)

    monkeypatch.setattr(basetree, "extract_commit", spy)
    task = load_task("table-computed-columns")
    ws = create_workspace(task, tmp_path / "ws")
    apply_solution(task, ws.root)
    clear_base_cache()
    for _ in range(3):
        s = score(task, ws, claimed_done=True)
        assert s.requirements_failed == 0 and not s.tampered and s.regressions == 0, s
    assert len(extracted) == 2, extracted  # the first scoring's own tree, then the kept one
    assert "orchbench-score-" in extracted[0] and basetree.PREFIX in extracted[1]
    kept = next(iter(basetree._KEPT.values()))
    assert kept.users == 0 and str(kept.path) == extracted[1]
    real(ws, tmp_path / "fresh")  # the kept tree is still the commit's, byte for byte (no canary in it)
    assert _files(kept.path) == _files(tmp_path / "fresh") != {}
    clear_base_cache()
    assert not kept.path.exists()


def _files(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_test_functions_are_counted_once_per_content(tmp_path, monkeypatch):
    from kit import pyast
    from kit.scoring import testcount as requirements

    parses: list[int] = []
    real = pyast.parse

    def spy(source, *a, **k):
        parses.append(len(source))
        return real(source, *a, **k)

    monkeypatch.setattr(requirements.pyast, "parse", spy)
    (tmp_path / "tests").mkdir()
    module = tmp_path / "tests" / "test_m.py"
    module.write_text(
        "def test_a():\n    pass\n\n\nclass TestB:\n    def test_c(self):\n        pass\n# 7f3a\n"
    )
    assert requirements.count_test_functions(tmp_path) == 2
    assert requirements.count_test_functions(tmp_path) == 2
    assert len(parses) == 1  # the same bytes: counted once
    module.write_text(module.read_text() + "\n\ndef test_d():\n    pass\n")
    assert requirements.count_test_functions(tmp_path) == 3 and len(parses) == 2
    module.write_bytes(b"def test_\xff():\n    pass\n")  # not UTF-8: counts none, as before
    assert requirements.count_test_functions(tmp_path) == 0


def test_a_test_with_a_large_power_gets_no_twin(tmp_path):
    """more-itertools-10-6's hidden ``for i, n in enumerate(mi.sieve(10**5))`` (8 s) had a twin and a
    shadow, as ``10**5`` was not seen as a large number: its session took three times plain pytest's."""
    import ast

    from kit.scoring.inject import inject_folder
    from kit.scoring.testcost import heavy

    def test_of(expr: str) -> ast.FunctionDef:
        return ast.parse(f"def test_x():\n    for n in range({expr}):\n        assert f(n) == n\n").body[0]

    assert all(heavy(test_of(e)) for e in ("10**5", "100_000", "2**20", "1000 * 1000", "1 << 17"))
    assert not any(heavy(test_of(e)) for e in ("10**3", "99_999", "2 * 3", "n ** 9"))
    for power, twinned in (("10**5", False), ("10**3", True)):
        folder = tmp_path / power
        folder.mkdir()
        (folder / "test_m.py").write_text(
            f"from m import f\n\n\ndef test_big():\n    for n in range({power}):\n        assert f(n) == n\n"
        )
        found = inject_folder(folder)
        assert ("test_m.py::test_big" in found.twins.values()) is twinned, found.twins
        assert found.unguarded == ([] if twinned else ["test_m.py::test_big"])


def test_the_sessions_load_the_kits_modules_from_bytecode_the_kit_wrote(tmp_path):
    """The kit's folder carries each module's bytecode (hash-checked), so a session started with
    ``-B`` compiles none of them again; the code keeps the folder's file names (the audit hook tells
    the kit's code from others' by them). Failed before: no bytecode, every module compiled."""
    import subprocess
    import sys

    from kit.scoring.session import KIT_FILES, LAUNCHER_FILE, prepare_kit_dir

    folder = prepare_kit_dir(tmp_path / "kit")
    modules = [name.removesuffix(".py") for name in KIT_FILES if name != LAUNCHER_FILE]
    got = subprocess.run(
        [sys.executable, "-I", "-B", "-c", _NO_COMPILING, str(folder), *modules],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert got.stdout.strip() == "ok", got.stdout + got.stderr
    # a source changed after its bytecode was written is compiled again, not run stale
    (folder / "observe.py").write_text((folder / "observe.py").read_text() + "\nSTALE_CHECK = 1\n")
    check = (
        "import importlib.util; s = importlib.util.spec_from_file_location('o', "
        f"{str(folder / 'observe.py')!r}); m = importlib.util.module_from_spec(s); "
        "s.loader.exec_module(m); print(m.STALE_CHECK)"
    )
    got = subprocess.run(
        [sys.executable, "-I", "-B", "-c", check], capture_output=True, text=True, timeout=60
    )
    assert got.stdout.strip() == "1", got.stderr


#: loads each named kit module from the folder (argv) with compiling from source refused
_NO_COMPILING = """
import importlib.machinery, importlib.util, sys, types
def refuse(*a, **k):
    raise SystemExit("compiled from source: %r" % (a[2:3] or k.get("path"),))
importlib.machinery.SourceFileLoader.source_to_code = refuse
for name in sys.argv[2:]:
    path = sys.argv[1] + "/" + name + ".py"
    spec = importlib.util.spec_from_file_location("probe_" + name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    funcs = [f for f in vars(module).values() if isinstance(f, types.FunctionType) and f.__module__ == module.__name__]
    names = {f.__code__.co_filename for f in funcs}  # (a few are named "<...>" on purpose)
    assert path in names and all(n == path or n.startswith("<") for n in names), (name, names)
print("ok")
"""
