"""Where an injected test starts tells nothing of its length (RT40c-1/2), and a twin cut at its time
limit credits nothing (RT40c-7/8)."""

import ast
import json
import random

from kit.scoring.padding import unparse_padded

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
