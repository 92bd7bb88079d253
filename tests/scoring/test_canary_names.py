"""The names the kit gives canaries, twins and shadows are no test's of the session, wherever that
test is written: a session reads a canary's report by its name, and cachetools' test classes inherit
16 tests from a mixin in ``tests/__init__.py`` (no test module). One own-tests session in about 200
named a must-fail canary ``test_clear_empty`` and read the mixin's passing copies as its report: the
base's own tests "tampered", the task refused in CI (`.ci/real-repos`)."""

from __future__ import annotations

import itertools
import os
import random
import textwrap
from pathlib import Path

from kit.scoring.inject import inject_folder, inject_own
from kit.scoring.usednames import MAX_ADDED, names_to_avoid, reported
from kit.scoring.usednames import used_test_names as names_in

WORDS = ["red", "green", "blue", "cyan", "pink", "gold"]  # six: the namer draws from these alone
#: every name of two or three of the words: half of the namer's draws (two to five words)
MIXIN_NAMES = ["test_" + "_".join(p) for k in (2, 3) for p in itertools.permutations(WORDS, k)]


def _mixin() -> str:
    return "class Mixin:\n" + "".join(f"    def {n}(self):\n        assert 1\n\n" for n in MIXIN_NAMES)


def _module(base: str) -> str:
    tests = "".join(f"    def test_{w}(self):\n        assert len('{w}') > 2\n\n" for w in WORDS)
    return f"from {base} import Mixin\n\n\nclass TestColours(Mixin):\n{tests}"


def _named(found) -> set[str]:
    return set(found.canaries) | set(found.twins) | set(found.shadows)


def test_own_test_canaries_take_no_name_a_mixin_outside_the_test_modules_defines(tmp_path: Path) -> None:
    clashes = []
    for seed in range(40):
        root = tmp_path / str(seed)
        (root / "tests").mkdir(parents=True)
        (root / "tests" / "__init__.py").write_text(_mixin(), encoding="utf-8")
        (root / "tests" / "test_colours.py").write_text(_module("tests"), encoding="utf-8")
        found = inject_own(root, ["tests/test_colours.py"], rng=random.Random(seed))
        assert found.canaries, "no canary was injected: the test checks nothing"
        clashes += sorted(_named(found) & set(MIXIN_NAMES))
    assert clashes == []


def test_acceptance_canaries_and_twins_take_no_name_of_the_repo_they_run_in(tmp_path: Path) -> None:
    clashes = []
    (tmp_path / "copy").mkdir()
    for seed in range(40):
        repo, folder = tmp_path / f"repo{seed}", tmp_path / f"acc{seed}"
        (repo / "helpers").mkdir(parents=True)
        (repo / "helpers" / "__init__.py").write_text(_mixin(), encoding="utf-8")
        folder.mkdir()
        (folder / "test_colours.py").write_text(_module("helpers"), encoding="utf-8")
        found = inject_folder(folder, rng=random.Random(seed), avoid=names_to_avoid(repo, tmp_path / "copy"))
        assert found.canaries and found.twins
        clashes += sorted(_named(found) & set(MIXIN_NAMES))
    assert clashes == []


def test_the_names_are_read_from_every_python_file_but_through_no_link(tmp_path: Path) -> None:
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "sub" / "mixins.py").write_text(
        textwrap.dedent("""\
            class M:
                def test_in_a_helper(self): pass
                # test_in_a_comment, "test_in_a_string", mytest_not_one, test_
            """),
        encoding="utf-8",
    )
    (tmp_path / "conftest.py").write_text("test_from_conftest = 1\n", encoding="utf-8")
    (tmp_path / "notes.txt").write_text("def test_in_text(): pass\n", encoding="utf-8")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "hook.py").write_text("def test_in_git(): pass\n", encoding="utf-8")
    outside = tmp_path.parent / (tmp_path.name + "-outside.py")
    outside.write_text("def test_through_a_link(): pass\n", encoding="utf-8")
    os.symlink(outside, tmp_path / "linked.py")
    os.mkfifo(tmp_path / "pipe.py")  # (read, it would block the scoring)
    found = names_in(tmp_path)
    assert {"test_in_a_helper", "test_in_a_comment", "test_in_a_string", "test_from_conftest"} <= found
    assert {"test_mixins", "test_notes", "test_conftest"} <= found  # (file stems: see the next tests)
    assert not {"test_in_text", "test_in_git", "test_through_a_link", "test_", "test_hook"} & found


def _all_names() -> list[str]:
    """Every name the namer can make of :data:`WORDS` (two to five of them, in any order)."""
    return ["test_" + "_".join(p) for k in range(2, 6) for p in itertools.permutations(WORDS, k)]


def test_names_the_agent_adds_are_avoided_unless_it_adds_enough_to_use_up_a_modules_names(
    tmp_path: Path,
) -> None:
    base, honest, flood = tmp_path / "base", tmp_path / "honest", tmp_path / "flood"
    for tree in (base, honest, flood):
        (tree / "tests").mkdir(parents=True)
        (tree / "tests" / "__init__.py").write_text(_mixin(), encoding="utf-8")
    (honest / "tests" / "more.py").write_text("def test_red_gold_pink_cyan(): pass\n", encoding="utf-8")
    names = _all_names()
    assert len(names) > MAX_ADDED
    (flood / "tests" / "names.py").write_text("".join(f"def {n}(): pass\n" for n in names), encoding="utf-8")
    assert names_to_avoid(base, honest) >= set(MIXIN_NAMES) | {"test_red_gold_pink_cyan"}
    assert names_to_avoid(base, flood) & set(names) == set(MIXIN_NAMES)
    # ... so the hidden session's names stay made of words: none falls back to a numbered one
    folder = tmp_path / "acc"
    folder.mkdir()
    (folder / "test_colours.py").write_text(_module("tests"), encoding="utf-8")
    found = inject_folder(folder, rng=random.Random(7), avoid=names_to_avoid(base, flood))
    made = _named(found)
    assert made and all(n in names for n in made), sorted(made - set(names))


def test_names_a_suite_makes_of_its_data_files_are_avoided(tmp_path: Path) -> None:
    """Python-Markdown makes ``test_raw_html`` of ``raw-html.txt`` while collecting: no such name is
    in any Python file."""
    clashes = []
    for seed in range(40):
        root = tmp_path / str(seed)
        (root / "tests" / "data").mkdir(parents=True)
        made = ["test_" + "_".join(p) for p in itertools.permutations(WORDS, 2)]
        for name in made:
            (root / "tests" / "data" / (name[5:].replace("_", "-") + ".txt")).write_text(
                "x\n", encoding="utf-8"
            )
        (root / "tests" / "test_colours.py").write_text(_module("tests.base"), encoding="utf-8")
        (root / "tests" / "base.py").write_text("class Mixin:\n    pass\n", encoding="utf-8")
        found = inject_own(root, ["tests/test_colours.py"], rng=random.Random(seed))
        assert found.canaries
        clashes += sorted(_named(found) & set(made))
    assert clashes == []
    assert {"test_red_gold", "test_gold_red"} <= names_in(tmp_path / "0")


def test_names_the_bases_run_reported_are_avoided_whatever_made_them(tmp_path: Path) -> None:
    """A name no file holds, made while collecting, is known once the base's own tests reported it."""
    made = ["test_" + "_".join(p) for k in (2, 3) for p in itertools.permutations(WORDS, k)]
    seconds = {f"tests/test_made.py::TestMade::{n}[case-{i}]": 0.01 for i, n in enumerate(made)}
    clashes = []
    for seed in range(40):
        root = tmp_path / str(seed)
        (root / "tests").mkdir(parents=True)
        (root / "tests" / "test_colours.py").write_text(_module("tests.base"), encoding="utf-8")
        (root / "tests" / "base.py").write_text("class Mixin:\n    pass\n", encoding="utf-8")
        found = inject_own(root, ["tests/test_colours.py"], rng=random.Random(seed), seconds=seconds)
        assert found.canaries
        clashes += sorted(_named(found) & set(made))
    assert clashes == []
    assert names_to_avoid(tmp_path / "0", tmp_path / "0", reported(seconds)) >= set(made)


def test_the_kits_names_keep_the_letters_case_of_the_modules_words(tmp_path: Path) -> None:
    """In a suite of ``test_parseURL`` names, all-lower-case names would tell the kit's tests apart."""
    words = ["parseURL", "readJSON", "toXML", "fromCSV", "dumpYAML", "loadINI"]
    body = "".join(f"    def test_{w}(self):\n        assert len('{w}') > 2\n\n" for w in words)
    (tmp_path / "test_camel.py").write_text(f"class TestCamel:\n{body}", encoding="utf-8")
    found = inject_folder(tmp_path, rng=random.Random(3))
    made = _named(found)
    assert made and all(any(c.isupper() for c in n) for n in made), sorted(made)


def test_a_module_that_uses_up_the_short_names_still_gets_names_of_its_words():
    """The own session's canaries of a module of 5,000 one-test classes (RT41-8) are 10,000 names and
    10,000 helper names from a module of few words: once the short names were used up, each name was
    tried 1,000 times (a minute of a scoring), then given a number (``when_order_3735928559``: no
    test of the module is named so). The names now grow a word longer instead: each is one of the
    module's words, none taken twice."""
    import ast

    from kit.scoring.naming import Namer

    tree = ast.parse("".join(f"class TestC{i}:\n    def test_a(self):\n        pass\n" for i in range(5000)))
    namer = Namer(random.Random(5), set())
    namer.use_module(tree)
    names = [namer.ident(cls=i % 2 == 0) for i in range(10_000)] + [namer.test_name() for _ in range(10_000)]
    assert len(set(names)) == len(names)
    words = set(namer.words) | {w.capitalize() for w in namer.words}
    for name in names:
        parts = name.removeprefix("test_").split("_") if "_" in name else _camel(name)
        assert all(p in words for p in parts), name


def _camel(name: str) -> list[str]:
    import re

    return re.findall(r"[A-Z][a-z0-9]*|[a-z0-9]+", name)
