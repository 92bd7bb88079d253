"""No flaky requirement: the importer scores the reference solution three times in all (``kit tasks
validate``'s scoring and :data:`RUNS` - 1 more here, side by side, each on a fresh workspace); a hidden test or an
own test whose outcome is not the same every time is left out, with why -- as a test that runs away
at the base is (:mod:`.settle`). A test that passed by luck would otherwise decide a run.

The last of those scorings lays the reference solution with a comment line (:data:`NEUTRAL`) added
to each of its Python files -- at the end, and before the first statement of each function's body:
a change of the text that changes no behaviour. A test that passes with the solution as written and
fails so checks the source's text (a file's size, a hash of ``inspect.getsource`` of the module or
of one function, a line number) rather than what it does -- no agent that writes the same behaviour in other words can
pass it -- and is left out the same way, at no extra scoring. The specification audit, which reads
strings and names, does not see such a test when its expected value is a number. Not caught: a test
that expires (``time.time() < <a date>``) passes every scoring at import and fails every run after
its date (red-team round 45, ``tests/importers/test_redteam45.py``)."""

from __future__ import annotations

import ast
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kit import pyast
from kit.scoring.scorer import Evaluation, evaluate
from kit.tasks.task import Task, apply_solution, solution_files
from kit.tasks.transitions import outcome_of
from kit.tasks.workspace import create_workspace

#: How many times the reference solution is scored in all.
RUNS = 3

#: The comment line the last scoring adds to each Python file of the reference solution.
NEUTRAL = "# orchbench: a comment line added to the reference solution (no behaviour changes)\n"


def _states(ev: Evaluation) -> dict[str, str]:
    hidden = {k: "passed" if ok else "failed" for k, (ok, _) in ev.results.items()}
    own = {k: str(outcome_of(ok, msg)) for k, (ok, msg) in ev.own.outcomes.items()}
    return {**hidden, **own}


def _whys(ev: Evaluation) -> dict[str, str]:
    """Why each test that did not pass failed, and what else went wrong in the scoring (said in a
    flaky test's reason: a failure only one scoring saw is otherwise unexplained)."""
    hidden = {k: msg for k, (ok, msg) in ev.results.items() if not ok}
    own = {k: msg for k, (ok, msg) in ev.own.outcomes.items() if not ok}
    whole = [*ev.tampered, *ev.problems, *([ev.unscored_reason] if ev.unscored_reason else [])]
    return {**hidden, **own, "": "; ".join(whole)}


def neutral_text(text: bytes) -> bytes:
    """``text`` (a Python file) with :data:`NEUTRAL` at its end and before the first statement of
    each function body that starts on a line of its own (indented as that statement; not after a
    line ending in a backslash). A file that does not parse, or is over
    :data:`kit.pyast.MAX_SOURCE_BYTES`, gets the last line only."""
    lines = text.splitlines(keepends=True)
    try:  # (kit.pyast: a file past MAX_SOURCE_BYTES is a SyntaxError, never parsed)
        tree = pyast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        tree = None
    before: dict[int, int] = {}  # 0-based line index -> indentation of the statement there
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            at = first.lineno - 1
            if first.lineno > node.lineno and 0 < at < len(lines):
                line = lines[at]
                if line[: first.col_offset].strip() == b"" and not lines[at - 1].rstrip().endswith(b"\\"):
                    before[at] = first.col_offset
    comment = NEUTRAL.encode()
    out = [(lines[i][: before[i]] + comment if i in before else b"") + line for i, line in enumerate(lines)]
    end = b"" if not text or text.endswith((b"\n", b"\r")) else b"\n"
    return b"".join(out) + end + comment


def _add_neutral(task: Task, root: Path) -> None:
    """Lay :func:`neutral_text` over each Python file of the solution laid over ``root`` (regular
    files only: :func:`apply_solution` has just copied them there, through no link)."""
    for rel in solution_files(task):
        path = root / rel
        if rel.endswith(".py") and path.is_file() and not path.is_symlink():
            path.write_bytes(neutral_text(path.read_bytes()))


def _score(task: Task, sandbox: str | None, neutral: bool = False) -> tuple[dict[str, str], dict[str, str]]:
    """The reference solution scored once more, on a fresh workspace (``neutral``: with
    :data:`NEUTRAL` appended to its Python files)."""
    with tempfile.TemporaryDirectory(prefix="orchbench-flaky-") as tmp:
        ws = create_workspace(task, Path(tmp) / "repo")
        apply_solution(task, ws.root)
        if neutral:
            _add_neutral(task, ws.root)
        ev = evaluate(task, ws.root, ws, sandbox=sandbox)
        return _states(ev), _whys(ev)


def flaky_tests(task: Task, first: Evaluation, sandbox: str | None = None) -> dict[str, str]:
    """{hidden test key or own test node id: why} for the tests whose outcome with the reference
    solution differs between ``first`` (validation's scoring) and :data:`RUNS` - 1 more scorings,
    the last of them on :func:`neutral_text` of the solution's Python files."""
    last = RUNS - 2
    with ThreadPoolExecutor(RUNS - 1) as pool:  # side by side: each is a few sandboxed processes
        later = list(pool.map(lambda i: _score(task, sandbox, neutral=i == last), range(RUNS - 1)))
    seen = [_states(first), *(states for states, _ in later)]
    whys = [_whys(first), *(why for _, why in later)]
    out = {}
    for key in sorted(set().union(*seen)):
        states = [s.get(key, "not run") for s in seen]
        if len(set(states)) == 1:
            continue
        said = [_said(state, why, key) for state, why in zip(states, whys, strict=True)]
        why = f"flaky: with the reference solution its outcome differs between {RUNS} scorings ({', '.join(said)})"
        if len(set(states[:-1])) == 1 and states[0] == "passed":  # only the neutral one differs
            why += (
                " -- the last with a comment line added to the solution's Python files (at the end "
                "and in each function), which changes no behaviour: it checks the solution's text, "
                "or it is flaky"
            )
        out[key] = why
    return out


def _said(state: str, whys: dict[str, str], key: str) -> str:
    """``state``, with why when it is not a pass: the test's message, else the scoring's problems."""
    if state in ("passed", "not run"):
        return state
    why = whys.get(key) or whys.get("", "")
    return f"{state}: {why[:160]}" if why else state
