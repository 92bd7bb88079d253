"""A task's requirements: the acceptance tests it declares, read from their source with ``ast``
(nothing is imported), each with its severity (``@pytest.mark.severity("major")`` on the function, its
class or the module; the closest wins) and whether it is expected to pass on the starting code
(``@pytest.mark.baseline_pass``)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from kit import pyast
from kit.paths import is_ignored
from kit.records.schema import SEVERITIES

#: pytest's default test file names
TEST_FILE_RE = re.compile(r"^(test_.*|.*_test)\.py$")


@dataclass
class Requirement:
    key: str  # "<file relative to acceptance/>::[Class::]function"
    severity: str | None  # None = not declared (a task error)
    baseline_pass: bool = False
    #: "skip", "skipif" or "xfail" when so marked: it can never be credited (``tasks validate`` says so)
    skip_mark: str | None = None


#: Marks that keep a hidden test from ever being credited (only a plain pass is:
#: :func:`kit.tasks.transitions.credited`).
SKIP_MARKS = ("skip", "skipif", "xfail")


def _marks(node: ast.expr) -> list[ast.expr]:
    return list(node.elts) if isinstance(node, ast.List | ast.Tuple) else [node]


def _mark_name(expr: ast.expr) -> str:
    target = expr.func if isinstance(expr, ast.Call) else expr
    return target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")


def _read_marks(exprs: list[ast.expr]) -> tuple[str | None, bool]:
    severity, baseline = None, False
    for expr in exprs:
        name = _mark_name(expr)
        if name == "severity" and isinstance(expr, ast.Call) and expr.args:
            arg = expr.args[0]
            severity = str(arg.value) if isinstance(arg, ast.Constant) else "<not a string literal>"
        elif name == "baseline_pass":
            baseline = True
    return severity, baseline


def _skip_mark(*levels: list[ast.expr]) -> str | None:
    """The first skip / skipif / xfail mark among the decorators and ``pytestmark`` lists given that
    applies whatever the platform: a ``skipif`` / ``xfail`` whose condition is an expression (``sys.
    implementation.name != "cpython"``) is left to the sessions, which show whether the test ran."""
    return next(
        (_mark_name(e) for exprs in levels for e in exprs if _mark_name(e) in SKIP_MARKS and _always(e)), None
    )


def _always(mark: ast.expr) -> bool:
    """Whether a skip mark applies unconditionally: no condition, or a literal true one."""
    args = list(mark.args) if isinstance(mark, ast.Call) else []
    args += [k.value for k in mark.keywords if k.arg == "condition"] if isinstance(mark, ast.Call) else []
    if _mark_name(mark) == "skip" or not args:
        return True
    return all(isinstance(a, ast.Constant) and bool(a.value) for a in args)


def pytestmark_of(body: list[ast.stmt]) -> list[ast.expr]:
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


def is_test_class(node: ast.stmt) -> bool:
    """A ``Test*`` class, or a unittest.TestCase subclass (pytest collects those whatever their name)."""
    if not isinstance(node, ast.ClassDef):
        return False
    bases = [b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "") for b in node.bases]
    return node.name.startswith("Test") or any(b.endswith("TestCase") for b in bases)


def is_test_func(node: ast.stmt) -> bool:
    return isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")


def class_tests(
    body: list[ast.stmt], outer: tuple[ast.ClassDef, ...] = ()
) -> list[tuple[list[str], tuple[ast.ClassDef, ...], ast.FunctionDef]]:
    """The test methods of the test classes in ``body`` -- nested test classes included, as pytest
    collects them -- each with its classes' names and the classes themselves, outermost first."""
    out: list[tuple[list[str], tuple[ast.ClassDef, ...], ast.FunctionDef]] = []
    for node in body:
        if is_test_class(node):
            chain = (*outer, node)  # type: ignore[arg-type]
            for sub in node.body:  # type: ignore[attr-defined]
                if is_test_func(sub):
                    out.append(([c.name for c in chain], chain, sub))  # type: ignore[arg-type]
            out.extend(class_tests(node.body, chain))  # type: ignore[attr-defined]
    return out


def test_files(folder: Path) -> list[Path]:
    """Test files under ``folder`` (pytest's default names), skipping .git and hidden folders."""
    out = []
    for p in sorted(Path(folder).rglob("*.py")):
        rel = p.relative_to(folder)
        if any(part.startswith(".") for part in rel.parts[:-1]) or is_ignored(rel):
            continue
        if TEST_FILE_RE.match(p.name):
            out.append(p)
    return out


def read_requirements(
    acceptance_dir: Path, exclude: set[str] | frozenset[str] = frozenset()
) -> tuple[list[Requirement], list[str]]:
    """The requirements declared in ``acceptance_dir`` and the problems found reading them; the keys
    in ``exclude`` (a task's ``exclude_tests``) are no requirements."""
    reqs: list[Requirement] = []
    problems: list[str] = []
    for path in test_files(acceptance_dir):
        rel = path.relative_to(acceptance_dir).as_posix()
        try:  # (its size first: a hidden module is never read whole past what is parsed)
            if path.stat().st_size > pyast.MAX_SOURCE_BYTES:
                raise SyntaxError(f"{path.stat().st_size:,} bytes, over {pyast.MAX_SOURCE_BYTES:,}")
            tree = pyast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except (SyntaxError, UnicodeDecodeError) as e:
            problems.append(f"acceptance/{rel}: cannot parse: {e}")
            continue
        module_marks = pytestmark_of(tree.body)
        module = _read_marks(module_marks)
        found: list[tuple[int, Requirement]] = []  # (line, requirement): in the file's order
        for node in tree.body:
            if is_test_func(node):
                own = _read_marks(node.decorator_list)  # type: ignore[union-attr]
                skip = _skip_mark(node.decorator_list, module_marks)  # type: ignore[union-attr]
                found.append((node.lineno, Requirement(f"{rel}::{node.name}", *_merge(own, module), skip)))  # type: ignore[union-attr]
        for names, chain, sub in class_tests(tree.body):  # (nested classes: each's marks apply)
            marks = [[*c.decorator_list, *pytestmark_of(c.body)] for c in reversed(chain)]
            own = _read_marks(sub.decorator_list)
            levels = [_read_marks(m) for m in marks]
            skip = _skip_mark(sub.decorator_list, *marks, module_marks)
            key = f"{rel}::{'::'.join(names)}::{sub.name}"
            found.append((sub.lineno, Requirement(key, *_merge(own, *levels, module), skip)))
        reqs += [req for _, req in sorted(found, key=lambda lr: lr[0])]
    reqs = [r for r in reqs if r.key not in exclude]
    for r in reqs:
        if r.severity is None:
            problems.append(f"acceptance test {r.key} has no @pytest.mark.severity(...)")
        elif r.severity not in SEVERITIES:
            problems.append(f"acceptance test {r.key}: severity {r.severity!r} is not one of {SEVERITIES}")
    if not reqs:
        problems.append(f"no acceptance tests found in {acceptance_dir}")
    return reqs, problems
