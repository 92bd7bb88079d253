"""Import Exercism python-track exercises as kit tasks.

An exercise folder looks like::

    .docs/instructions.md           (+ optional .docs/instructions.append.md)
    .meta/config.json               optional: {"files": {"solution": [...], "test": [...], "example": [...]}}
    .meta/example.py                the reference solution
    <slug_underscored>.py           the stub the student edits
    <slug_underscored>_test.py      the tests (+ helpers they import, e.g. test_utils.py)

It becomes ``<dest>/exercism-<slug>/`` with ``task.yaml`` (prompt = the instructions plus a line naming
the file to edit), ``repo/`` (the stub, a README and a trivial test that the stub imports),
``acceptance/`` (the exercise's test files and every file they use: helper modules they import and
data files they name) and ``solution/`` (the example renamed to the stub's module name).

Each test gets a severity (:mod:`kit.importers.exercism.marks`: a built-in rule, or a mapping file). The tests
are then run on the stub: one that already passes there is marked ``@pytest.mark.baseline_pass`` (it
is not a requirement; kit.scoring.scorer leaves it out of the totals); an exercise where *no* test fails on
the stub (a refactoring exercise, whose stub already works) is skipped, with that reason. Finally
the task is validated (``kit tasks validate``) unless asked not to.
"""

from __future__ import annotations

import ast
import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from kit import pyast
from kit.errors import KitError
from kit.importers.exercism.marks import SeverityMap, load_severity_map, mark_source, test_functions
from kit.tasks.taskyaml import write_task_file

TAGS = ["exercism", "function"]
SKIP_NO_FAILING = "no test fails on the stub (a refactoring exercise: the stub already works)"


@dataclass
class ImportResult:
    """One exercise: ``status`` is imported, skipped or error; ``validated`` is None when not checked."""

    name: str
    status: str
    task_dir: Path | None = None
    error: str = ""  # why it was skipped, or what went wrong
    requirements: int = 0
    baseline_pass: int = 0
    helpers: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # tests the exercise itself skips
    validated: bool | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Imported, and valid if it was validated."""
        return self.status == "imported" and self.validated is not False


class _Malformed(Exception):
    pass


def _is_exercise(folder: Path) -> bool:
    return (folder / ".docs").is_dir() or (folder / ".meta").is_dir()


def find_exercises(path: Path) -> list[Path]:
    path = Path(path)
    if _is_exercise(path):
        return [path]
    if not path.is_dir():
        return []
    return sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith("."))


def _parse(path: Path, folder: Path) -> ast.Module:
    try:
        return pyast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (SyntaxError, UnicodeDecodeError) as e:
        raise _Malformed(f"{path.relative_to(folder)} does not parse: {e}") from None


def _files(folder: Path) -> tuple[Path, list[Path], Path]:
    """(stub, test files, example), from .meta/config.json when present, else by naming convention."""
    module = folder.name.replace("-", "_")
    stub, tests, example = f"{module}.py", [f"{module}_test.py"], ".meta/example.py"
    config = folder / ".meta" / "config.json"
    if config.is_file():
        try:
            files = json.loads(config.read_text(encoding="utf-8")).get("files", {})
        except (json.JSONDecodeError, AttributeError) as e:
            raise _Malformed(f".meta/config.json is not valid JSON: {e}") from None
        if not isinstance(files, dict):
            raise _Malformed(".meta/config.json: `files` is not a mapping")
        stub = (files.get("solution") or [stub])[0]
        tests = files.get("test") or tests
        example = (files.get("example") or [example])[0]
    stub_p, test_ps, example_p = folder / stub, [folder / t for t in tests], folder / example
    for p in (stub_p, *test_ps, example_p):
        if not p.is_file():
            raise _Malformed(f"missing file {p.relative_to(folder)}")
    for p in (stub_p, *test_ps, example_p):
        _parse(p, folder)
    return stub_p, test_ps, example_p


def _local_imports(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def _string_literals(tree: ast.Module) -> set[str]:
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def helper_files(folder: Path, tests: list[Path], stub: Path) -> list[Path]:
    """Files the tests use besides the stub: local modules they import (transitively, from the
    exercise folder) and files in the folder whose name appears as a string in a test or helper."""
    candidates = {
        p.name: p
        for p in folder.iterdir()
        if p.is_file() and not p.name.startswith(".") and p != stub and p not in tests
    }
    found: dict[str, Path] = {}
    todo = list(tests)
    while todo:
        tree = _parse(todo.pop(), folder)
        wanted = {f"{m}.py" for m in _local_imports(tree)} | _string_literals(tree)
        for name in sorted(wanted & set(candidates) - set(found)):
            found[name] = candidates[name]
            if name.endswith(".py"):
                todo.append(candidates[name])
    return sorted(found.values())


def _instructions(folder: Path) -> str:
    docs = folder / ".docs"
    main = docs / "instructions.md"
    if not main.is_file():
        raise _Malformed("missing file .docs/instructions.md")
    text = main.read_text(encoding="utf-8").strip()
    extra = docs / "instructions.append.md"
    if extra.is_file():
        text += "\n\n" + extra.read_text(encoding="utf-8").strip()
    return text


def _acceptance_name(test: Path) -> str:
    return test.name if test.name.startswith("test_") or test.stem.endswith("_test") else f"test_{test.name}"


def _title(folder: Path, slug: str) -> str:
    """The first heading of instructions.md unless it is the generic "Instructions"; else the slug in words."""
    main = (folder / ".docs" / "instructions.md").read_text(encoding="utf-8")
    for line in main.splitlines():
        if line.startswith("# "):
            if line[2:].strip().lower() != "instructions":
                return f"Exercism: {line[2:].strip()}"
            break
    return f"Exercism: {slug.replace('-', ' ').title()}"


def _severity_marks(
    slug: str, sources: dict[str, str], severities: SeverityMap
) -> dict[str, dict[str, list[str]]]:
    """Per acceptance file name: requirement key -> decorators (empty if the file declares its own)."""
    out: dict[str, dict[str, list[str]]] = {}
    for name, src in sources.items():
        if "mark.severity" in src:  # an author who declares severities keeps them
            out[name] = {}
            continue
        out[name] = {
            key: [f'pytest.mark.severity("{severities.severity(slug, key, node)}")']
            for key, node in test_functions(pyast.parse(src), name)
        }
    return out


def _write_acceptance(
    acceptance: Path,
    sources: dict[str, str],
    marks: dict[str, dict[str, list[str]]],
    baseline: set[str],
    drop: frozenset[str] = frozenset(),
) -> None:
    for name, src in sources.items():
        per_key = {k: list(v) for k, v in marks[name].items()}
        for key in baseline:
            if key.startswith(f"{name}::"):
                per_key.setdefault(key, []).append("pytest.mark.baseline_pass")
        mine = frozenset(k for k in drop if k.startswith(f"{name}::"))
        text = mark_source(src, name, per_key, mine) if any(per_key.values()) or mine else src
        (acceptance / name).write_text(text, encoding="utf-8")


def _passing_on_stub(task_dir: Path) -> tuple[list[str], set[str], set[str]]:
    """(requirement keys, those passing on the starting repo, those pytest skipped) by scoring the
    untouched stub. A test the exercise itself skips (``@unittest.skip("extra-credit")``) never runs,
    so it can be no requirement."""
    from kit.scoring.scorer import evaluate
    from kit.tasks.task import load_task
    from kit.tasks.workspace import create_workspace

    task = load_task(task_dir)
    with tempfile.TemporaryDirectory(prefix="orchbench-probe-") as tmp:
        ws = create_workspace(task, Path(tmp) / "repo")
        ev = evaluate(task, ws.root, ws)
    if ev.problems:
        raise _Malformed("; ".join(ev.problems))
    keys = [r.key for r in ev.requirements]
    skipped = {k for k in keys if ev.results[k][1].startswith("skipped")}
    return [k for k in keys if k not in skipped], {k for k in keys if ev.results[k][0]}, skipped


def import_exercise(
    folder: Path, dest: Path, severities: SeverityMap | None = None, validate: bool = True
) -> ImportResult:
    """Write one exercise as a task under ``dest`` (or skip it, saying why). Raises _Malformed."""
    folder = Path(folder)
    slug = folder.name
    severities = severities or SeverityMap()
    instructions = _instructions(folder)
    stub, tests, example = _files(folder)
    helpers = helper_files(folder, tests, stub)
    task_id = f"exercism-{slug}"
    target = Path(dest) / task_id
    # build in a temporary folder beside the target, then swap it in: no half-written task
    Path(dest).mkdir(parents=True, exist_ok=True)
    holder = Path(tempfile.mkdtemp(prefix=f".{task_id}-", dir=dest))
    tmp = holder / task_id  # named like the task: load_task checks the id against the folder name
    try:
        (tmp / "repo" / "tests").mkdir(parents=True)
        (tmp / "acceptance").mkdir()
        (tmp / "solution").mkdir()
        shutil.copy2(stub, tmp / "repo" / stub.name)
        (tmp / "repo" / "pytest.ini").write_text("[pytest]\ntestpaths = tests\n", encoding="utf-8")
        (tmp / "repo" / "README.md").write_text(
            f"# {slug}\n\nAn Exercism python-track exercise. Implement `{stub.name}`.\n\n"
            "Run the tests with `python -m pytest -q`.\n",
            encoding="utf-8",
        )
        (tmp / "repo" / "tests" / f"test_{stub.stem}_imports.py").write_text(
            f"def test_module_imports():\n    import {stub.stem}  # noqa: F401\n", encoding="utf-8"
        )
        sources = {_acceptance_name(t): t.read_text(encoding="utf-8") for t in tests}
        marks = _severity_marks(slug, sources, severities)
        _write_acceptance(tmp / "acceptance", sources, marks, set())
        for h in helpers:
            shutil.copy2(h, tmp / "acceptance" / h.name)
        shutil.copy2(example, tmp / "solution" / stub.name)
        spec = {
            "id": task_id,
            "title": _title(folder, slug),
            "prompt": f"{instructions}\n\nWrite your solution in `{stub.name}`.\n",
            "language": "python",
            "test_command": "python -m pytest -q",
            "long": False,
            "tags": TAGS,
        }
        write_task_file(tmp, spec)
        keys, passing, skipped = _passing_on_stub(tmp)
        result = ImportResult(slug, "imported", helpers=[h.name for h in helpers], dropped=sorted(skipped))
        if len(passing) == len(keys):
            result.status, result.error = "skipped", SKIP_NO_FAILING
            return result
        if passing or skipped:
            _write_acceptance(tmp / "acceptance", sources, marks, passing, frozenset(skipped))
        result.requirements, result.baseline_pass = len(keys) - len(passing), len(passing)
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
        result.task_dir = target
    finally:
        shutil.rmtree(holder, ignore_errors=True)
    if validate:
        from kit.importers.validate import validate_task
        from kit.tasks.task import load_task

        report = validate_task(load_task(target))
        result.validated, result.problems = report.ok, report.problems
    return result


def import_exercism(
    path: Path,
    dest: Path,
    severities: str | Path | SeverityMap | None = None,
    validate: bool = True,
    progress: bool = False,
) -> list[ImportResult]:
    """Import one exercise folder or every exercise in a folder; a malformed one does not stop the rest.
    ``severities`` is a mapping file (see :mod:`kit.importers.exercism.marks`) or a loaded map."""
    smap = severities if isinstance(severities, SeverityMap) else load_severity_map(severities)
    results = []
    for folder in find_exercises(path):
        try:
            r = import_exercise(folder, dest, smap, validate)
        except (_Malformed, KitError, OSError) as e:
            r = ImportResult(folder.name, "error", error=str(e))
        results.append(r)
        if progress:
            print(f"  {summary_line(r)}", flush=True)
    return results


def summary_line(r: ImportResult) -> str:
    """One exercise as one line: ✓ imported (and valid), – skipped (why), ✗ error or invalid."""
    if r.status == "skipped":
        return f"– {r.name}: skipped: {r.error}"
    if r.status == "error":
        return f"✗ {r.name}: {r.error}"
    valid = {True: "validated", False: "INVALID", None: "not validated"}[r.validated]
    extra = f", {r.baseline_pass} baseline-pass" if r.baseline_pass else ""
    extra += f", helpers: {', '.join(r.helpers)}" if r.helpers else ""
    extra += f", {len(r.dropped)} skipped test(s) dropped" if r.dropped else ""
    line = f"{'✗' if r.validated is False else '✓'} {r.name}: {r.requirements} requirements{extra}; {valid}"
    return line + "".join(f"\n    - {p}" for p in r.problems)


def summary_table(results: list[ImportResult]) -> str:
    """The per-exercise lines, then the counts: imported (validated / invalid), skipped by reason, errors."""
    lines = [summary_line(r) for r in results]
    imported = [r for r in results if r.status == "imported"]
    skipped = [r for r in results if r.status == "skipped"]
    errors = [r for r in results if r.status == "error"]
    valid = sum(r.validated is True for r in imported)
    invalid = sum(r.validated is False for r in imported)
    unchecked = len(imported) - valid - invalid
    lines += [
        "",
        f"{len(results)} exercises: {len(imported)} imported "
        f"({valid} validated, {invalid} invalid{f', {unchecked} not validated' if unchecked else ''}), "
        f"{len(skipped)} skipped, {len(errors)} errors",
    ]
    reasons: dict[str, list[str]] = {}
    for r in skipped:
        reasons.setdefault(r.error, []).append(r.name)
    lines += [f"  skipped ({len(v)}): {k}: {', '.join(v)}" for k, v in reasons.items()]
    return "\n".join(lines)
