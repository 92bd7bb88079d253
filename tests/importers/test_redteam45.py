"""Red-team round 45: hostile repositories whose tasks validate while being unfair to every agent
(reproducers under /tmp/hostile-tools/). A hidden test that checks the reference solution's text
(its size in bytes, a hash of its source) fails before the change and passes with it -- the importer
keeps it -- yet no agent that writes the same behaviour in other words can pass it. The spec audit
reads only strings and names, so a number (a file size) goes through unflagged."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from kit.app.cli import main
from tests.importers.test_hostile_repo import BASE, FIX  # the calc repository the red teams use
from tests.support.gitrepos import make_repo

pytestmark = pytest.mark.slow  # each imports a repository (5-15 s)

FAIR = "from calc import double\n\n\ndef test_double():\n    assert double(2) == 4\n"


def _import(tmp_path: Path, hidden: str, capsys) -> tuple[int, str, dict]:
    """Import the calc fix with ``tests/test_double.py`` replaced by ``hidden``; (exit code, output,
    task.yaml or {})."""
    repo = tmp_path / "calc"
    shas = make_repo(repo, [("start", BASE), ("Fix double", {**FIX, "tests/test_double.py": hidden})])
    out = tmp_path / "tasks"
    code = main(["tasks", "import-git", str(repo), "--commit", shas[1], "--out", str(out), "--id", "calc-t"])
    text = "".join(capsys.readouterr())
    spec = out / "calc-t" / "task.yaml"
    return code, text, yaml.safe_load(spec.read_text()) if spec.is_file() else {}


def _kept(tmp_path: Path) -> str:
    """The hidden test modules the task ships, as one text."""
    acc = tmp_path / "tasks" / "calc-t" / "acceptance"
    return "".join(p.read_text() for p in sorted(acc.rglob("*.py"))) if acc.is_dir() else ""


def test_a_hidden_test_of_the_solutions_byte_size_is_not_kept(tmp_path, capsys):
    """``os.path.getsize(calc.__file__) == <the reference file's size>``: fails at the base (other
    size), passes with the change, and holds no string the audit reads. It decides the task against
    any agent that writes ``x + x`` as ``2 * x``. The importer must leave it out (saying why) and
    keep the honest test beside it."""
    size = len(FIX["calc.py"].encode())
    hidden = FAIR + (
        "\n\ndef test_double_as_written():\n    import os\n\n    import calc\n\n"
        f"    assert double(3) == 6\n    assert os.path.getsize(calc.__file__) == {size}\n"
    )
    code, text, _ = _import(tmp_path, hidden, capsys)
    assert code == 0, text
    kept = _kept(tmp_path)
    assert "def test_double(" in kept, text
    assert "test_double_as_written" not in kept, "a test of the solution's byte size was kept\n" + text
    assert "test_double_as_written" in text and "text" in text, text  # left out, saying why


def test_a_hidden_test_hashing_the_solutions_source_is_not_kept(tmp_path, capsys):
    """The same with a hash of ``inspect.getsource(calc)`` compared to a digest computed at run time
    from a number: no literal of the expected value anywhere the audit looks."""
    import hashlib

    digest = int(hashlib.sha256(FIX["calc.py"].encode()).hexdigest()[:12], 16)
    hidden = FAIR + (
        "\n\ndef test_double_source():\n    import hashlib\n    import inspect\n\n    import calc\n\n"
        "    got = int(hashlib.sha256(inspect.getsource(calc).encode()).hexdigest()[:12], 16)\n"
        f"    assert double(5) == 10 and got == {digest}\n"
    )
    code, text, _ = _import(tmp_path, hidden, capsys)
    assert code == 0, text
    assert "test_double_source" not in _kept(tmp_path), (
        "a test of the solution's source hash was kept\n" + text
    )


@pytest.mark.xfail(
    strict=True,
    reason="not fixed: a hidden test that expires (time.time() < import time + 1 h) validates now and "
    "fails every later run; the importer would need to score the solution under a shifted clock",
)
def test_a_hidden_test_with_an_expiry_date_is_not_kept(tmp_path, capsys):
    """A time bomb: the test passes with the change for an hour after the import, then fails for
    every agent and strategy. Nothing in validation can tell it from an honest test today."""
    hidden = FAIR.replace(
        "    assert double(2) == 4\n",
        f"    import time\n\n    assert double(2) == 4\n    assert time.time() < {int(time.time()) + 3600}\n",
    )
    code, text, _ = _import(tmp_path, hidden, capsys)
    assert code != 0 or "time.time()" not in _kept(tmp_path), text


def test_a_hidden_test_cannot_tell_which_strategy_ran(tmp_path, capsys):
    """``assert not os.path.exists('feature_list.json')``: validation (no strategy) and vibe passed it,
    every harness run failed it (the oracle run showed harness 0/1, linear 0/1 with PLAN.md, the others
    1/1). With a check that the source is the reference's, even the oracle run passed and only real
    harness runs failed: a repository could rig the comparison of strategies it is imported for. The
    scored copy now holds the strategies' working files as at the base (kit.paths.owned_paths)."""
    from kit.scoring.scorer import evaluate
    from kit.tasks.task import apply_solution, load_task
    from kit.tasks.workspace import create_workspace

    hidden = FAIR.replace(
        "    assert double(2) == 4\n",
        "    import os\n\n    assert double(2) == 4\n    assert not os.path.exists('feature_list.json')\n"
        "    assert not os.path.exists('PLAN.md')\n",
    )
    code, text, _ = _import(tmp_path, hidden, capsys)
    assert code == 0, text
    task = load_task(tmp_path / "tasks" / "calc-t")
    ws = create_workspace(task, tmp_path / "ws")
    apply_solution(task, ws.root)
    (ws.root / "feature_list.json").write_text('[{"id": "F1", "passes": true}]\n')  # harness's
    (ws.root / "PLAN.md").write_text("1. make the change\n")  # linear's
    ev = evaluate(task, ws.root, ws, sandbox="bwrap")
    assert all(ok for ok, _ in ev.results.values()), ev.results


def test_a_hidden_test_of_one_functions_source_is_not_kept(tmp_path, capsys):
    """A comment line appended at the end of the file leaves ``inspect.getsource(double)`` as it was:
    a test comparing the length of one function's source still went through. The neutral change
    must reach into each function's text."""
    size = len(FIX["calc.py"].encode())
    hidden = FAIR + (
        "\n\ndef test_double_function_as_written():\n    import inspect\n\n"
        f"    assert double(4) == 8\n    assert len(inspect.getsource(double)) == {size}\n"
    )
    code, text, _ = _import(tmp_path, hidden, capsys)
    assert code == 0, text
    kept = _kept(tmp_path)
    assert "def test_double(" in kept, text
    assert "test_double_function_as_written" not in kept, "a test of a function's source was kept\n" + text


@pytest.mark.xfail(
    strict=True,
    reason="not fixed: a comment line changes no bytecode; a test comparing double.__code__.co_code "
    "with the reference's still validates (a neutral change of the code itself would be needed)",
)
def test_a_hidden_test_of_the_solutions_bytecode_is_not_kept(tmp_path, capsys):
    """``len(double.__code__.co_code)`` and its names pinned to the reference's: any agent whose
    ``double`` compiles otherwise (``2 * x``) fails it."""
    ns: dict = {}
    exec(compile(FIX["calc.py"], "calc.py", "exec"), ns)
    code_obj = ns["double"].__code__
    hidden = FAIR + (
        "\n\ndef test_double_compiled_as_written():\n"
        f"    assert double(4) == 8\n    assert double.__code__.co_code == {code_obj.co_code!r}\n"
    )
    code, text, _ = _import(tmp_path, hidden, capsys)
    assert code == 0, text
    assert "test_double_compiled_as_written" not in _kept(tmp_path), text


def test_the_report_counts_only_the_solution_files_written(tmp_path, capsys):
    """A fix that adds a symlink to a host file beside its real change: the link is left out (as
    before), and the report said "2 solution file(s)" with one written and no word of the link. It
    counts what ``solution/`` holds now and names what it left out."""
    import os

    from tests.support.gitrepos import git

    repo = tmp_path / "calc"
    shas = make_repo(repo, [("start", BASE)])
    for rel, text in {**FIX, "tests/test_double.py": FAIR}.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    os.symlink("/etc/hostname", repo / "host_link.py")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "Fix double")
    head = git(repo, "rev-parse", "HEAD").strip()
    assert head != shas[0]
    out = tmp_path / "tasks"
    code = main(["tasks", "import-git", str(repo), "--commit", head, "--out", str(out), "--id", "calc-t"])
    text = "".join(capsys.readouterr())
    assert code == 0, text
    written = sorted(p.name for p in (out / "calc-t" / "solution").rglob("*") if p.is_file())
    assert written == ["calc.py"], written
    assert "1 solution file(s)" in text and "host_link.py" in text, text
