"""Node ids taken apart the same way everywhere in scoring: a ``[`` in a folder's name is no
parameter id (it made every canary of ``tests/v[1]/`` "missing", and folded an added folder's tests
into one in ``tests_added``), and ``::`` in a parameter id is no scope."""

from __future__ import annotations

import pytest

from kit.scoring.nodeids import split, without_case
from kit.scoring.testcost import canary_keys
from kit.scoring.usednames import reported
from kit.scoring.verdicts import requirement_key

CASES = [
    (
        "tests/test_x.py::TestA::test_b",
        "tests/test_x.py::TestA::test_b",
        ("tests/test_x.py::TestA", "test_b"),
    ),
    ("tests/test_x.py::test_b[1-2]", "tests/test_x.py::test_b", ("tests/test_x.py", "test_b")),
    (
        "tests/test_urls.py::test_parse[https://[::101.45.75.219]:80/]",
        "tests/test_urls.py::test_parse",
        ("tests/test_urls.py", "test_parse"),
    ),
    (
        "tests/v[1]/test_x.py::TestA::test_b[c]",
        "tests/v[1]/test_x.py::TestA::test_b",
        ("tests/v[1]/test_x.py::TestA", "test_b"),
    ),
    (
        "tests/test_x.py::TestA::Inner::test_b[x.py::y]",
        "tests/test_x.py::TestA::Inner::test_b",
        ("tests/test_x.py::TestA::Inner", "test_b"),
    ),
]


@pytest.mark.parametrize("nodeid, bare, parts", CASES)
def test_a_node_id_loses_its_case_and_splits_into_scope_and_name(nodeid, bare, parts):
    assert without_case(nodeid) == bare
    assert split(nodeid) == parts
    assert reported([nodeid]) == {parts[1]}


def test_every_reader_of_node_ids_agrees_on_a_bracketed_folder():
    assert requirement_key("_acceptance/v[1]/test_x.py::test_b[3]") == "v[1]/test_x.py::test_b"
    import ast

    func = ast.parse("def test_b():\n    pass\n").body[0]
    keys = canary_keys([("tests/v[1]/test_x.py::test_b", func)], {"tests/v[1]/test_x.py::test_b[1]": 0.25})
    assert keys[id(func)] == (0, 0.25)  # measured at the base, not judged from the source
