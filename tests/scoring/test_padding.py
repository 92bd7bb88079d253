"""Where an injected test starts tells nothing of its length (RT40c-1/2), and a twin cut at its time
limit credits nothing (RT40c-7/8)."""

import ast
import json
import os
import random
from pathlib import Path

import pytest

from kit import pyast
from kit.scoring import padding
from kit.scoring.inject import Injected, Namer, inject_module
from kit.scoring.padding import JITTER, TooLarge, unparse_padded

MODULE = '''
import pytest


def test_short():
    assert 1


@pytest.mark.parametrize("x", [1, 2])
def test_long(x):
    a = x
    b = a + 1
    assert b > a
    assert """two
lines""" != ""


class TestScope:
    def test_one(self):
        assert True

    def test_three(self):
        x = 1
        y = 2
        assert x < y

    def helper(self):
        return 1
'''


def _gaps(text):
    """name -> (line gap to the next function of its body, its own length)."""
    out = {}
    for body in [ast.parse(text).body] + [
        n.body for n in ast.walk(ast.parse(text)) if isinstance(n, ast.ClassDef)
    ]:
        funcs = [s for s in body if isinstance(s, ast.FunctionDef)]
        for f, nxt in zip(funcs, funcs[1:], strict=False):
            first = min([f.lineno, *(d.lineno for d in f.decorator_list)])
            nfirst = min([nxt.lineno, *(d.lineno for d in nxt.decorator_list)])
            out[f.name] = (nfirst - first, f.end_lineno - first + 1)
    return out


def test_the_gap_after_a_function_is_the_bodys_span_plus_chance_not_its_length():
    plain = _gaps(ast.unparse(ast.parse(MODULE)))
    assert plain["test_one"][0] < plain["test_three"][0]  # unpadded, the gap is the length (+1)
    one, three = set(), set()
    for seed in range(40):
        text = unparse_padded(ast.parse(MODULE), random.Random(seed))
        assert ast.dump(ast.parse(text)) == ast.dump(ast.parse(MODULE))  # the same module, strings too
        gaps = _gaps(text)
        span = max(gaps["test_one"][1], gaps["test_three"][1], 2) + 1  # the class body's longest + 1
        for name, seen in (("test_one", one), ("test_three", three)):
            assert span + 1 <= gaps[name][0] <= span + 7, (name, gaps)  # (+1: unparse's own blank line)
            seen.add(gaps[name][0])
    assert one == three and len(one) > 3  # the same draws for the short test and the long one


SHAPES = '''
"""Module docstring,
on two lines."""
from __future__ import annotations
import pytest
X = 1


def test_one_line():
    assert X


@pytest.mark.parametrize("a", [1, 2])
@pytest.mark.slow
def test_decorated_longer(a):
    """A docstring
    of three
    lines."""
    b = a + 1
    assert b > a


async def test_async():
    pass
Y = """a string
across lines"""


class TestOuter:
    """Class docstring."""
    attr = 2

    def test_short(self):
        assert 1

    def test_long(self):
        x = [
            1,
            2,
        ]
        if x:
            y = f"{x!r}\\n"
        else:
            y = None
        assert y

    class TestInner:

        def test_a(self):
            pass

        @staticmethod
        def test_b():
            return """two
lines"""
    z = 3


def test_last():
    def nested():
        pass
    class Local:
        def m(self):
            pass
    assert nested
'''


def _first(stmt):
    return min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", []))])


def _padded_bodies(tree):
    """The module's body and, recursively, its classes' (the bodies padding pads)."""
    todo, out = [tree.body], []
    while todo:
        body = todo.pop()
        out.append(body)
        todo += [s.body for s in body if isinstance(s, ast.ClassDef)]
    return out


def _check_layout(got, was):
    """``got`` (the padded text, parsed) against ``was`` (``ast.unparse``'s): each function as long as it was,
    followed by its body's span (its longest function + 1) plus 0 to JITTER blank lines; any other
    statement by 0 to JITTER; the blank line ``ast.unparse`` writes before a definition, kept.
    The gaps after the functions, by name."""
    gaps = {}
    for body, plain_body in zip(_padded_bodies(got), _padded_bodies(was), strict=True):
        funcs = [s for s in body if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef)]
        span = max((s.end_lineno - _first(s) + 1 for s in funcs), default=0) + 1
        for stmt, nxt, plain_stmt in zip(body, body[1:], plain_body, strict=False):
            length = stmt.end_lineno - _first(stmt) + 1
            if not isinstance(stmt, ast.ClassDef):  # (a class's own lines are padded inside)
                assert length == plain_stmt.end_lineno - _first(plain_stmt) + 1, ast.dump(stmt)[:80]
            own = 1 if isinstance(nxt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) else 0
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                gaps[stmt.name] = gap = _first(nxt) - _first(stmt) - own
                assert span <= gap <= span + JITTER, (stmt.name, span, gap)
            elif not isinstance(stmt, ast.ClassDef):
                assert 1 <= _first(nxt) - stmt.end_lineno - own <= 1 + JITTER
    return gaps


def test_functions_of_any_length_in_classes_and_at_module_level_are_followed_by_their_bodys_span():
    plain = ast.unparse(ast.parse(SHAPES))
    seen: dict[str, set[int]] = {}
    for seed in range(60):
        text = unparse_padded(ast.parse(SHAPES), random.Random(seed))
        assert text.endswith("\n") and not text.endswith("\n\n")
        got, was = ast.parse(text), ast.parse(plain)
        assert ast.dump(got) == ast.dump(was)
        for name, gap in _check_layout(got, was).items():
            seen.setdefault(name, set()).add(gap)
    module = [seen["test_one_line"], seen["test_decorated_longer"], seen["test_async"]]
    assert module[0] == module[1] == module[2] and len(module[0]) == JITTER + 1  # whatever the length
    assert seen["test_short"] == seen["test_long"] and len(seen["test_short"]) == JITTER + 1
    assert len(seen["test_a"]) == JITTER + 1 and "test_b" not in seen  # (a body's last: no gap)


def test_it_never_parses_its_own_text_nor_gives_the_kits_nodes_positions(monkeypatch):
    """The text is written once: the re-parse that found the statements' lines (a third of
    ``unparse_padded``'s time) and the positions put on every node the kit made are gone (fails on the
    code before: it called pyast.parse, and left ``lineno`` on the kit's function)."""
    tree = ast.parse("def test_a():\n    assert f(1) == 2\n")
    made = ast.FunctionDef(
        name="test_b", args=ast.parse("def f(): pass").body[0].args, body=[ast.Pass()], decorator_list=[]
    )
    tree.body.append(made)
    calls = []
    monkeypatch.setattr(pyast, "parse", lambda *a, **k: calls.append(a))
    text = unparse_padded(tree, random.Random(1))
    monkeypatch.undo()
    assert calls == [] and "def test_b():" in text
    assert not hasattr(made, "lineno")
    assert ast.dump(ast.parse(text)) == ast.dump(ast.parse(ast.unparse(ast.fix_missing_locations(tree))))


def test_a_module_too_large_once_written_draws_nothing(monkeypatch):
    monkeypatch.setattr(pyast, "MAX_SOURCE_BYTES", 100)
    rng = random.Random(7)
    with pytest.raises(TooLarge):
        unparse_padded(ast.parse(SHAPES), rng)
    assert rng.random() == random.Random(7).random()  # (the next module's draws are as they were)
    assert padding.unparse_padded(ast.parse("x = 1\n"), rng) == "x = 1\n"


def _corpus():
    built = Path(os.environ.get("ORCHBENCH_BUILT_DIR") or "/tmp/built")
    files = sorted(Path(__file__).parents[1].rglob("*.py"))
    for task in sorted(built.glob("*/")) if built.is_dir() else []:
        files += sorted((task / "acceptance").rglob("*.py")) + sorted((task / "repo" / "tests").rglob("*.py"))
    return files


@pytest.mark.slow
def test_the_text_is_the_modules_as_ast_unparse_writes_it_with_its_kits_nodes_too():
    """Over the kit's own tests and the built tasks' hidden and own tests (those under
    ORCHBENCH_BUILT_DIR or /tmp/built, where built), as parsed and once injected (the kit's nodes
    have no position): the text parses back to ``ast.unparse``'s, laid out as padding promises."""
    files, checked = _corpus(), 0
    assert len(files) > 100
    for i, path in enumerate(files):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        trees = [tree]
        injected = pyast.clone(tree)
        found = Injected(observer="seen_value")
        if i % 3 == 0 and inject_module(injected, path.name, Namer(random.Random(i), set()), found):
            trees.append(injected)
        for one in trees:
            plain = ast.unparse(ast.fix_missing_locations(pyast.clone(one)))
            got, was = ast.parse(unparse_padded(one, random.Random(i))), ast.parse(plain)
            assert ast.dump(got) == ast.dump(was), path
            _check_layout(got, was)
            checked += 1
    assert checked > 100


def _line(seq, **msg):
    return (json.dumps({"seq": seq, **msg}) + "\n").encode()


def test_a_twin_cut_at_its_time_limit_fails_its_requirement():
    """A right answer's twin fails; one cut at its limit (a sleep in twins only, or the kit's timer
    handler called there: RT40c-7/8) failed too, but without being asked: not credited (fails on the
    code before, which took the cut twin for a failed one)."""
    from kit.scoring.session import Expect, read_stream
    from kit.scoring.stream import TIMED_OUT

    expect = Expect({}, twins={"test_twin_x": "test_a.py::test_x", "test_twin_y": "test_a.py::test_y"})
    lines = [
        _line(1, kind="start"),
        _line(2, kind="collected", count=4),
        _line(3, kind="test", nodeid="_acceptance/test_a.py::test_x", passed=True, message=""),
        _line(
            4,
            kind="test",
            nodeid="_acceptance/test_a.py::test_twin_x",
            passed=False,
            message=f"{TIMED_OUT} of 2 s",
        ),
        _line(5, kind="test", nodeid="_acceptance/test_a.py::test_y", passed=True, message=""),
        _line(
            6, kind="test", nodeid="_acceptance/test_a.py::test_twin_y", passed=False, message="assert False"
        ),
        _line(7, kind="end", exitstatus=1),
    ]
    got = read_stream(b"".join(lines), expect, exit_code=1, timed_out=False)
    assert got.tamper == [] and got.complete
    assert got.cut_shadows == {"test_a.py::test_x"}
