"""Sealed checks by case (kit/scoring/sealcases.py): a ``parametrize`` argument or a literal loop's
target used only on the expected side. The session's copy holds case numbers, not expected values;
through a real scoring session the reference solution is credited every requirement, a wrong one
fails each sealed case with its value, and a report forger gets only what its code meets."""

import ast
import json
import shutil
import textwrap
from pathlib import Path

import pytest

from kit.scoring.inject import inject_folder
from kit.scoring.observe import observer
from kit.scoring.scorer import score
from kit.scoring.seal import module_names, seal_test
from kit.scoring.sealcases import seal_cases
from kit.scoring.session import Expect, read_stream
from kit.tasks.task import load_task
from kit.tasks.workspace import create_workspace

FORGER = Path(__file__).with_name("forger_textkit.py")
TASK = Path("datasets/tasks/micro-slugify")

HIDDEN = """
import pytest

from textkit import slugify


@pytest.mark.parametrize("text, expected", [("Hello World", "hello-world"), ("a  --  b", "a-b")])
def test_parametrized(text, expected):
    assert slugify(text) == expected


@pytest.mark.parametrize(
    "text, want",
    [pytest.param("Rock & Roll!", "rock-roll", id="named"), ("Python 3.12", "python-3-12")],
)
def test_parametrized_param_and_membership(text, want):
    assert slugify(text) in (want, want + "!")


def test_literal_loop():
    for text, expected in [("---", ""), ("C'est", "c-est"), ("A_B", "a-b")]:
        assert slugify(text) == expected


@pytest.mark.parametrize("text, expected", [("Hi there", "hi-there"), ("ok", "ok")])
def test_mixed_with_a_twinned_check(text, expected):
    assert isinstance(slugify(text), str)
    assert slugify(text) == expected


def test_loop_with_a_message_stays_in_process():
    for text, expected in [("X y", "x-y")]:
        assert slugify(text) == expected, expected
"""


def _seal(source: str) -> tuple[str, dict]:
    tree = ast.parse(textwrap.dedent(source))
    sites: dict = {}
    counter = [100]
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            sites |= seal_test(node, node.name, module_names(tree), "OBS", counter)
            sites |= seal_cases(node, node.name, module_names(tree), "OBS", counter)
    return ast.unparse(tree), sites


def test_the_cases_expected_values_leave_the_module_and_the_checks_name_the_case():
    out, sites = _seal(HIDDEN)
    for secret in ("hello-world", "a-b", "rock-roll", "python-3-12", "c-est", "'!'"):
        assert secret not in out, secret
    assert "x-y" in out  # (its loop's target is also the assertion's message)
    assert "OBS('c101', slugify(text), expected)" in out and "('Hello World', 0), ('a  --  b', 1)" in out
    assert "pytest.param('Rock & Roll!', 0, id='named')" in out
    assert "for text, expected in [('---', 0), (\"C'est\", 1), ('A_B', 2)]:" in out
    assert [len(s.cases) for s in sites.values()] == [2, 2, 3, 2] and all(s.required for s in sites.values())


def test_what_stays_unsealed_by_case():
    _, sites = _seal(
        """
        import pytest
        @pytest.mark.parametrize("n, e", [(1, 2), (2, 4)])
        def test_input_too(n, e):
            assert f(n) == e
            assert g(e)                 # e is an input of the code too
        @pytest.mark.parametrize("n", [1, 2])
        def test_from_the_input(n):
            assert f(n) == n * 2        # derived from an argument the session holds
        @pytest.mark.parametrize("n, e", [(1, 2), (2, g())])
        def test_a_case_not_evaluable(n, e):
            assert f(n) == e
        @pytest.mark.parametrize("n, e", [(1, 2)], ids=str)
        def test_an_ids_function(n, e):
            assert f(n) == e
        @pytest.mark.parametrize("n, e", [(1, 2)], indirect=True)
        def test_indirect(n, e):
            assert f(n) == e
        def test_loops():
            for n, e in cases():
                assert f(n) == e
            for n, e in [(1, 2)]:
                e = 3
                assert f(n) == e
        """
    )
    assert sites == {}


def test_a_check_by_case_needs_every_case_and_the_right_value_for_each():
    _, sites = _seal(HIDDEN)
    site, check = next(iter(sites.items()))
    sent: list[dict] = []
    observe = observer(lambda **m: sent.append(m))
    observe(site, "hello-world", 0)
    observe(site, "a-b", 1)
    observe(site, "hello-world", 1)  # right value, wrong case
    observe(site, "a-b", True)  # not a case number
    lines = [b'{"seq": 1, "kind": "start"}'] + [
        json.dumps({"seq": i + 2, "kind": "obs", **m}).encode() for i, m in enumerate(sent)
    ]
    got = read_stream(b"\n".join(lines) + b"\n", Expect({}, {}, {site: check}), 1, False)
    assert got.observed[f"{site}[0]"] == (1, None) and got.observed[f"{site}[1]"] == (1, None)
    assert got.observed[site] == (2, "'hello-world' (case 1)")
    assert [c.accepts(m["digest"], m["ident"]) for c, m in zip(check.cases, sent, strict=False)] == [
        True,
        True,
    ]


def _task(tmp_path: Path):
    folder = tmp_path / "task"
    shutil.copytree(TASK, folder)
    for old in (folder / "acceptance").glob("*.py"):
        old.unlink()
    (folder / "acceptance" / "test_cases.py").write_text(HIDDEN, encoding="utf-8")
    return load_task(folder)


@pytest.mark.parametrize("code, failed", [("solution", 0), ("wrong", 3), ("forger", 4)])
def test_through_a_scoring_session(tmp_path, code, failed):
    task = _task(tmp_path)
    found = inject_folder(shutil.copytree(task.acceptance_dir, tmp_path / "copy"))
    assert len(found.sealed) == 4 and len(found.twins) == 2  # (the mixed test and the loop with a message)
    ws = create_workspace(task, tmp_path / "ws")
    if code == "solution":
        shutil.copyfile(task.path / "solution" / "textkit.py", ws.root / "textkit.py")
    elif code == "wrong":  # a trailing hyphen kept, "b" upper-cased: one case of each test wrong
        source = (task.path / "solution" / "textkit.py").read_text()
        (ws.root / "textkit.py").write_text(source.replace('.strip("-")', '.lstrip("-").replace("b", "B")'))
    else:
        shutil.copyfile(FORGER, ws.root / "textkit.py")
    s = score(task, ws, claimed_done=True)
    assert not s.tampered, s.tamper_evidence
    assert s.requirements_sealed == 4 and s.requirements_total == 5
    assert s.requirements_failed == failed, s.failed
    if code == "wrong":
        messages = sorted(f.message for f in s.failed)
        assert all(m.startswith("sealed check failed: got ") for m in messages), messages
        assert any("'a-B' (case 1), expected by case: 0: 'hello-world', 1: 'a-b'" in m for m in messages)
        assert any("'rock-roll-' (case 0)" in m for m in messages) and any(
            "'a-B' (case 2)" in m for m in messages
        )
        assert {f.test.split("::")[1] for f in s.failed} == {
            "test_parametrized",
            "test_parametrized_param_and_membership",
            "test_literal_loop",
        }


def test_a_passed_test_that_did_not_send_every_case_is_not_credited():
    from types import SimpleNamespace

    from kit.scoring.verdicts import sealed_checks

    _, sites = _seal(HIDDEN)
    site, check = next(iter(sites.items()))
    injected = SimpleNamespace(sealed={site: check})
    for observed, credited in (
        ({f"{site}[0]": (1, None), f"{site}[1]": (2, None)}, True),
        ({f"{site}[1]": (1, None)}, False),
    ):
        results = {check.key: (True, "")}
        sealed_checks(results, injected, SimpleNamespace(observed=observed))  # type: ignore[arg-type]
        assert results[check.key][0] is credited, results


def test_a_value_that_lies_in_eq_or_repr_meets_no_case():
    class Liar(str):
        def __eq__(self, other):
            return True

        __hash__ = str.__hash__

        def __repr__(self):
            return "'hello-world'"

    _, sites = _seal(HIDDEN)
    check = next(iter(sites.values()))
    sent: list[dict] = []
    observe = observer(lambda **m: sent.append(m))
    for case in (0, 1):
        observe("c1", Liar("x"), case)
        observe("c1", object(), case)
    assert not [m for m in sent if check.accepts(m["digest"], m["ident"], m["case"])]
