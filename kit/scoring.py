"""Hidden acceptance tests -> :class:`kit.records.Score`.

Scoring never runs inside the clone. It copies the clone's working tree (not ``.git``) to a temporary
folder, puts the task's ``acceptance/`` folder in it as ``_acceptance/`` and runs pytest there with a
JUnit XML report; in a second copy it runs the repo's own tests (``task.test_command``) to count
regressions against the base commit. Both runs use the kit's interpreter, a timeout and the same
scrubbed environment as the agent's commands.

**Requirements.** Each test function in ``acceptance/`` is one requirement (a parametrized test is
one requirement that fails if any case fails). Its severity is declared with the pytest marker
``@pytest.mark.severity("critical" | "major" | "minor")`` on the function, its class, or the module
(``pytestmark = pytest.mark.severity("major")``). The kit reads the markers from the source (so a
test file that does not even import still yields its requirements, all failed) and registers the
markers itself through a small pytest plugin, which also labels each JUnit test case with its node
id. ``@pytest.mark.baseline_pass`` marks a requirement that is allowed to pass on the starting code.
"""

from __future__ import annotations

import ast
import io
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from kit.commands import run_command, scrubbed_env
from kit.records import SEVERITIES, FailedRequirement, Score
from kit.workspace import COPY_IGNORE, Workspace, diff_stats, git_env

if TYPE_CHECKING:
    from kit.tasks import Task

ACCEPTANCE_DIRNAME = "_acceptance"
PLUGIN_NAME = "orchbench_scoring_plugin"
PLUGIN_SOURCE = '''\
"""Loaded by the kit's scorer with -p: registers the kit's markers, labels test cases with node ids."""


def pytest_configure(config):
    config.addinivalue_line("markers", "severity(level): requirement severity: critical, major or minor")
    config.addinivalue_line("markers", "baseline_pass: this acceptance test may pass on the starting code")


def pytest_collection_modifyitems(session, config, items):
    for item in items:
        item.user_properties.append(("nodeid", item.nodeid))
        mark = item.get_closest_marker("severity")
        if mark is not None and mark.args:
            item.user_properties.append(("severity", str(mark.args[0])))
'''
TEST_FILE_RE = re.compile(r"^(test_.*|.*_test)\.py$")


# --------------------------------------------------------------------------- reading requirements


@dataclass
class Requirement:
    key: str  # "<file relative to acceptance/>::[Class::]function"
    severity: str | None  # None = not declared (a task error)
    baseline_pass: bool = False


def _marks(node: ast.expr) -> list[ast.expr]:
    return list(node.elts) if isinstance(node, ast.List | ast.Tuple) else [node]


def _read_marks(exprs: list[ast.expr]) -> tuple[str | None, bool]:
    severity, baseline = None, False
    for expr in exprs:
        target = expr.func if isinstance(expr, ast.Call) else expr
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name == "severity" and isinstance(expr, ast.Call) and expr.args:
            arg = expr.args[0]
            severity = str(arg.value) if isinstance(arg, ast.Constant) else "<not a string literal>"
        elif name == "baseline_pass":
            baseline = True
    return severity, baseline


def _pytestmark(body: list[ast.stmt]) -> list[ast.expr]:
    out: list[ast.expr] = []
    for stmt in body:
        if isinstance(stmt, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in stmt.targets
        ):
            out.extend(_marks(stmt.value))
    return out


def _merge(*levels: tuple[str | None, bool]) -> tuple[str | None, bool]:
    """Closest level wins for severity (function > class > module); baseline_pass from any level."""
    severity = next((s for s, _ in levels if s is not None), None)
    return severity, any(b for _, b in levels)


def _is_test_class(node: ast.stmt) -> bool:
    """A ``Test*`` class, or a unittest.TestCase subclass (pytest collects those whatever their name)."""
    if not isinstance(node, ast.ClassDef):
        return False
    bases = [b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "") for b in node.bases]
    return node.name.startswith("Test") or any(b.endswith("TestCase") for b in bases)


def _is_test_func(node: ast.stmt) -> bool:
    return isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")


def test_files(folder: Path) -> list[Path]:
    """Test files under ``folder`` (pytest's default names), skipping .git and hidden folders."""
    out = []
    for p in sorted(Path(folder).rglob("*.py")):
        rel = p.relative_to(folder)
        if any(part.startswith(".") or part == "__pycache__" for part in rel.parts[:-1]):
            continue
        if TEST_FILE_RE.match(p.name):
            out.append(p)
    return out


def read_requirements(acceptance_dir: Path) -> tuple[list[Requirement], list[str]]:
    """The requirements declared in ``acceptance_dir`` and the problems found reading them."""
    reqs: list[Requirement] = []
    problems: list[str] = []
    for path in test_files(acceptance_dir):
        rel = path.relative_to(acceptance_dir).as_posix()
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except (SyntaxError, UnicodeDecodeError) as e:
            problems.append(f"acceptance/{rel}: cannot parse: {e}")
            continue
        module = _read_marks(_pytestmark(tree.body))
        for node in tree.body:
            if _is_test_func(node):
                own = _read_marks(node.decorator_list)  # type: ignore[union-attr]
                reqs.append(Requirement(f"{rel}::{node.name}", *_merge(own, module)))  # type: ignore[union-attr]
            elif _is_test_class(node):
                cls = _merge(_read_marks(node.decorator_list), _read_marks(_pytestmark(node.body)))
                for sub in node.body:
                    if _is_test_func(sub):
                        own = _read_marks(sub.decorator_list)  # type: ignore[union-attr]
                        key = f"{rel}::{node.name}::{sub.name}"  # type: ignore[union-attr]
                        reqs.append(Requirement(key, *_merge(own, cls, module)))
    for r in reqs:
        if r.severity is None:
            problems.append(f"acceptance test {r.key} has no @pytest.mark.severity(...)")
        elif r.severity not in SEVERITIES:
            problems.append(f"acceptance test {r.key}: severity {r.severity!r} is not one of {SEVERITIES}")
    if not reqs:
        problems.append(f"no acceptance tests found in {acceptance_dir}")
    return reqs, problems


def count_test_functions(folder: Path) -> int:
    """Test functions (``def test*``, module level or in ``Test*`` classes) in test files under folder."""
    n = 0
    for path in test_files(folder):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, OSError):
            continue
        for node in tree.body:
            if _is_test_func(node):
                n += 1
            elif _is_test_class(node):
                n += sum(1 for sub in node.body if _is_test_func(sub))
    return n


# --------------------------------------------------------------------------- running pytest


@dataclass
class PytestRun:
    outcomes: dict[str, tuple[bool, str]]  # nodeid -> (passed, message)
    exit_code: int | None
    output: str
    timed_out: bool
    errors: list[str] = field(default_factory=list)  # collection errors etc. (no node id)

    @property
    def passed(self) -> set[str]:
        return {k for k, (ok, _) in self.outcomes.items() if ok}


def _parse_junit(path: Path) -> tuple[dict[str, tuple[bool, str]], list[str]]:
    outcomes: dict[str, tuple[bool, str]] = {}
    errors: list[str] = []
    if not path.exists():
        return outcomes, ["pytest wrote no report"]
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        return outcomes, [f"unreadable pytest report: {e}"]
    for case in root.iter("testcase"):
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        nodeid = props.get("nodeid")
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        skipped = case.find("skipped")
        if bad is not None:
            msg = (bad.get("message") or bad.text or "failed").strip().splitlines()
            ok, message = False, (msg[0] if msg else "failed")[:300]
        elif skipped is not None:
            ok, message = False, f"skipped: {(skipped.get('message') or '').strip()[:200]}"
        else:
            ok, message = True, ""
        if nodeid is None:
            if not ok:
                errors.append(f"{case.get('classname', '')}.{case.get('name', '')}: {message}")
            continue
        prev = outcomes.get(nodeid)
        if prev is None or prev[0]:  # keep the first failure (e.g. call failed, then teardown error)
            outcomes[nodeid] = (ok, message)
    return outcomes, errors


def _run_pytest(cmd: str, cwd: Path, report: Path, plugin_dir: Path, timeout_s: float) -> PytestRun:
    # third-party plugins of the kit's venv are not needed by task tests and double pytest's start-up
    env = scrubbed_env({"PYTHONPATH": str(plugin_dir), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    full = f"{cmd} -p no:cacheprovider -p {PLUGIN_NAME} --junitxml={report}"
    res = run_command(full, cwd, timeout_s, env=env, max_output_chars=20_000)
    outcomes, errors = _parse_junit(report)
    if res.timed_out:
        errors.append(f"timed out after {timeout_s:g} s")
    return PytestRun(outcomes, res.exit_code, res.output, res.timed_out, errors)


def _run_own_tests(command: str, cwd: Path, report: Path, plugin_dir: Path, timeout_s: float) -> PytestRun:
    """The repo's own tests. A pytest command gets the JUnit report; anything else is one pass/fail."""
    if "pytest" in command:
        return _run_pytest(command, cwd, report, plugin_dir, timeout_s)
    env = scrubbed_env({"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    res = run_command(command, cwd, timeout_s, env=env, max_output_chars=20_000)
    ok = res.exit_code == 0 and not res.timed_out
    return PytestRun(
        {command: (ok, "" if ok else res.output[-300:])}, res.exit_code, res.output, res.timed_out
    )


def _copy_tree(src: Path, dest: Path) -> None:
    shutil.copytree(src, dest, symlinks=True, ignore=COPY_IGNORE)


def restore_conftests(tree: Path, base: Path) -> list[str]:
    """Put every conftest.py in ``tree`` back to its version in ``base`` (deleting ones the base does
    not have), so the strategy cannot change how the hidden acceptance tests run or are reported.
    Returns the relative paths that were restored or removed."""
    changed = []
    for path in sorted(tree.rglob("conftest.py")):
        rel = path.relative_to(tree)
        original = base / rel
        if original.is_file():
            if original.read_bytes() != path.read_bytes():
                shutil.copyfile(original, path)
                changed.append(rel.as_posix())
        else:
            path.unlink()
            changed.append(rel.as_posix())
    return changed


def _extract_commit(root: Path, commit: str, dest: Path) -> None:
    data = subprocess.run(
        ["git", "archive", "--format=tar", commit], cwd=root, env=git_env(), capture_output=True, check=True
    ).stdout
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")


@dataclass
class _Base:
    own_passed: set[str]
    tests: int


_BASE_CACHE: dict[tuple[str, str], _Base] = {}
_BASE_LOCK = threading.Lock()


# --------------------------------------------------------------------------- evaluation


@dataclass
class Evaluation:
    """Everything scoring found out; :func:`score` condenses it, ``tasks validate`` reads it all."""

    requirements: list[Requirement]
    results: dict[str, tuple[bool, str]]  # requirement key -> (passed, message)
    acceptance: PytestRun
    own: PytestRun
    own_passed_at_base: set[str]
    problems: list[str]
    tests_at_base: int
    tests_now: int

    @property
    def failed_requirements(self) -> list[Requirement]:
        return [r for r in self.requirements if not self.results[r.key][0]]

    @property
    def regressed(self) -> list[str]:
        return sorted(t for t in self.own_passed_at_base if t not in self.own.passed)

    @property
    def own_failed(self) -> list[str]:
        failed = sorted(k for k, (ok, _) in self.own.outcomes.items() if not ok)
        return failed + self.own.errors


def _requirement_key(nodeid: str) -> str | None:
    prefix = ACCEPTANCE_DIRNAME + "/"
    if not nodeid.startswith(prefix):
        return None
    return nodeid[len(prefix) :].split("[", 1)[0]


def _base_info(task: Task, ws: Workspace, plugin_dir: Path, tmp: Path, timeout_s: float) -> _Base:
    key = (ws.base_commit, task.test_command)
    with _BASE_LOCK:
        cached = _BASE_CACHE.get(key)
    if cached is not None:
        return cached
    base_dir = tmp / "base"
    _extract_commit(ws.root, ws.base_commit, base_dir)
    run = _run_own_tests(task.test_command, base_dir, tmp / "base.xml", plugin_dir, timeout_s)
    info = _Base(own_passed=run.passed, tests=count_test_functions(base_dir))
    with _BASE_LOCK:
        _BASE_CACHE[key] = info
    return info


def evaluate(task: Task, tree: Path, ws: Workspace, timeout_s: float | None = None) -> Evaluation:
    """Run acceptance and own tests on a copy of ``tree``; ``ws`` gives the base commit."""
    timeout = timeout_s or task.limits.scoring_timeout_s
    requirements, problems = read_requirements(task.acceptance_dir)
    with tempfile.TemporaryDirectory(prefix="orchbench-score-") as tmp_name:
        tmp = Path(tmp_name)
        plugin_dir = tmp / "plugin"
        plugin_dir.mkdir()
        (plugin_dir / f"{PLUGIN_NAME}.py").write_text(PLUGIN_SOURCE, encoding="utf-8")
        acc_dir, own_dir = tmp / "acc", tmp / "own"
        _copy_tree(tree, acc_dir)
        _copy_tree(tree, own_dir)
        restore_conftests(acc_dir, task.repo_dir)  # the acceptance run ignores conftests the agent wrote
        shutil.copytree(task.acceptance_dir, acc_dir / ACCEPTANCE_DIRNAME, ignore=COPY_IGNORE)
        acc_cmd = (
            f"{shlex.quote(sys.executable)} -m pytest -q -o addopts= -o 'python_files=test_*.py *_test.py' "
            f"--rootdir=. {ACCEPTANCE_DIRNAME}"
        )
        with ThreadPoolExecutor(3) as pool:
            f_acc = pool.submit(_run_pytest, acc_cmd, acc_dir, tmp / "acc.xml", plugin_dir, timeout)
            f_own = pool.submit(
                _run_own_tests, task.test_command, own_dir, tmp / "own.xml", plugin_dir, timeout
            )
            f_base = pool.submit(_base_info, task, ws, plugin_dir, tmp, timeout)
            acc, own, base = f_acc.result(), f_own.result(), f_base.result()
        tests_now = count_test_functions(own_dir)

    by_req: dict[str, list[tuple[bool, str]]] = {}
    for nodeid, outcome in acc.outcomes.items():
        key = _requirement_key(nodeid)
        if key is not None:
            by_req.setdefault(key, []).append(outcome)
    reason = "; ".join(acc.errors)[:300] or "not run"
    results: dict[str, tuple[bool, str]] = {}
    for req in requirements:
        outs = by_req.get(req.key)
        if not outs:
            results[req.key] = (False, f"not run ({reason})")
        else:
            bad = [m for ok, m in outs if not ok]
            results[req.key] = (not bad, bad[0] if bad else "")
    known = {r.key for r in requirements}
    for key in sorted(set(by_req) - known):
        problems.append(f"acceptance test {key} was run but not found in the source (generated?)")
    return Evaluation(
        requirements=requirements,
        results=results,
        acceptance=acc,
        own=own,
        own_passed_at_base=base.own_passed,
        problems=problems,
        tests_at_base=base.tests,
        tests_now=tests_now,
    )


def to_score(ev: Evaluation, ws: Workspace, claimed_done: bool, scoring_s: float) -> Score:
    defects = {s: 0 for s in SEVERITIES}
    failed = []
    # a baseline_pass test already passed on the starting code: not a requirement (not in the totals);
    # one that fails at the end is kept apart, in baseline_broken
    requirements = [r for r in ev.requirements if not r.baseline_pass]
    broken = [r.key for r in ev.failed_requirements if r.baseline_pass]
    for req in (r for r in ev.failed_requirements if not r.baseline_pass):
        sev = req.severity if req.severity in SEVERITIES else "major"
        defects[sev] += 1  # type: ignore[index]
        failed.append(FailedRequirement(test=req.key, severity=sev, message=ev.results[req.key][1]))  # type: ignore[arg-type]
    files, added, removed = diff_stats(ws)
    regressed = ev.regressed
    return Score(
        requirements_total=len(requirements),
        requirements_by_severity={
            sev: sum((r.severity if r.severity in SEVERITIES else "major") == sev for r in requirements)
            for sev in SEVERITIES
        },
        requirements_failed=len(failed),
        baseline_broken=broken,
        defects=defects,  # type: ignore[arg-type]
        failed=failed,
        own_tests_total=len(ev.own.outcomes),
        regressions=len(regressed),
        regressed_tests=regressed,
        tests_added=ev.tests_now - ev.tests_at_base,
        files_touched=files,
        lines_added=added,
        lines_removed=removed,
        claimed_done_but_failed=bool(claimed_done and (defects["critical"] or defects["major"])),
        scoring_s=round(scoring_s, 3),
    )


def score(task: Task, ws: Workspace, claimed_done: bool, timeout_s: float | None = None) -> Score:
    """Score the clone's working tree against the task's hidden acceptance tests."""
    started = time.monotonic()
    ev = evaluate(task, ws.root, ws, timeout_s)
    return to_score(ev, ws, claimed_done, time.monotonic() - started)
