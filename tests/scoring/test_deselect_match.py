"""The own tests a task deselects are matched by set lookups at a node id's cut points, in the kit
(``excluded.deselected``) and in the session (``nodeids.under``): the same answers as matching
every id against every node id (the product of the two, which a suite of thousands of tests against
hundreds of ids made slow), on node ids and ids drawn to meet at every kind of cut."""

from __future__ import annotations

import random

from kit.scoring.excluded import deselected
from kit.scoring.nodeids import index, under

PARTS = ["tests", "tests/", "sub", "test_a.py", "test_b.py", "TestX", "test_f", "test_foo", "[1]", "[a/b]"]


def _node(rng: random.Random) -> str:
    path = "/".join(rng.choice(["tests", "sub", "tests/sub"]) for _ in range(rng.randint(0, 2)))
    module = rng.choice(["test_a.py", "test_b.py"])
    out = f"{path}/{module}" if path else module
    for _ in range(rng.randint(0, 2)):
        out += "::" + rng.choice(["TestX", "test_f", "test_foo", "Test_f"])
    return out + rng.choice(["", "", "[1]", "[a/b]", "[x::y]"])


def _id(rng: random.Random) -> str:
    node = _node(rng)
    cuts = [k for k in range(len(node) + 1) if node[k:].startswith(("::", "/", "[")) or k == len(node)]
    k = rng.choice(cuts)
    return node[:k] + rng.choice(["", "", "/"]) if rng.random() < 0.8 else node[: rng.randint(0, len(node))]


def _kit_reference(nodeid: str, ids: list[str]) -> bool:
    return any(nodeid == i or nodeid.startswith((i + "::", i.rstrip("/") + "/")) for i in ids)


def _session_reference(nodeid: str, ids: list[str]) -> bool:
    return any(nodeid == i or nodeid.startswith((i + "::", i + "[", i.rstrip("/") + "/")) for i in ids)


def test_the_cut_point_lookups_answer_as_matching_every_id():
    rng = random.Random(7)
    hits = [0, 0]
    for _ in range(3000):
        ids = [_id(rng) for _ in range(rng.randint(1, 6))]
        for _ in range(5):
            node = (
                _node(rng)
                if rng.random() < 0.6
                else rng.choice(ids) + rng.choice(["", "::t", "[2]", "/m.py"])
            )
            assert deselected(node, ids) == _kit_reference(node, ids), (node, ids)
            assert under(node, index(ids)) == _session_reference(node, ids), (node, ids)
            hits[_kit_reference(node, ids)] += 1
    assert min(hits) > 1000, hits  # (both answers drawn often)
