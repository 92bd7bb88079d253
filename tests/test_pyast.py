"""kit.pyast's fast helpers against the ``ast`` functions they stand in for, on real test modules."""

from __future__ import annotations

import ast
import copy
from pathlib import Path

import pytest

from kit import pyast

SOURCES = sorted((Path(__file__).parent / "scoring").glob("test_*.py"))[:12]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_clone_is_a_deep_copy_as_deepcopy_makes_it(path):
    tree = ast.parse(path.read_text())
    copied = pyast.clone(tree)
    dump = ast.dump(tree, include_attributes=True)
    assert (
        ast.dump(copied, include_attributes=True)
        == dump
        == ast.dump(copy.deepcopy(tree), include_attributes=True)
    )
    mine = {id(n) for n in ast.walk(copied) if not isinstance(n, ast.expr_context)}
    assert not mine & {id(n) for n in ast.walk(tree)}  # no node shared (but the field-less contexts)
    for node in ast.walk(copied):  # changing the copy leaves the original as it was
        if isinstance(node, ast.Name):
            node.id = "changed"
        if isinstance(node, ast.FunctionDef):
            node.body.clear()
    assert ast.dump(tree, include_attributes=True) == dump


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_nodes_are_the_nodes_ast_walk_gives(path):
    tree = ast.parse(path.read_text())
    got = pyast.nodes(tree)
    assert got[0] is tree
    assert sorted(map(id, got)) == sorted(map(id, ast.walk(tree)))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_identifiers_are_every_name_attribute_of_every_node(path):
    tree = ast.parse(path.read_text())
    want: set[str] = set()
    for node in ast.walk(tree):  # (what inject._parse_all gathered, node by node, before)
        want |= {
            str(getattr(node, f)) for f in ("name", "id", "asname", "arg", "attr") if getattr(node, f, None)
        }
        want.update(getattr(node, "names", ()) if isinstance(node, ast.Global | ast.Nonlocal) else ())
    assert pyast.identifiers(tree) == want
    scoped = ast.parse("def f(x, *, y=z.w):\n    global g, h\n    nonlocal n\nimport a.b as c\n")
    assert pyast.identifiers(scoped) == {"f", "x", "y", "z", "w", "g", "h", "n", "a.b", "c"}


def test_gc_paused_restores_the_collector_as_it_was():
    import gc

    from kit.pyast import gc_paused

    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # (the inner block found it off: leaves it off)
    assert gc.isenabled()
    try:
        with gc_paused():
            raise ValueError
    except ValueError:
        pass
    assert gc.isenabled()
