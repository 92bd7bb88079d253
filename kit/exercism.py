"""Import Exercism python-track exercises as kit tasks.

An exercise folder looks like::

    .docs/instructions.md           (+ optional .docs/instructions.append.md)
    .meta/config.json               optional: {"files": {"solution": [...], "test": [...], "example": [...]}}
    .meta/example.py                the reference solution
    <slug_underscored>.py           the stub the student edits
    <slug_underscored>_test.py      the tests

It becomes ``<dest>/exercism-<slug>/`` with ``task.yaml`` (prompt = the instructions plus a line naming
the file to edit), ``repo/`` (the stub, a README and a trivial test that the stub imports),
``acceptance/`` (the exercise's tests, every test severity "major" through a module-level
``pytestmark``) and ``solution/`` (the example renamed to the stub's module name).
"""

from __future__ import annotations

import ast
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

TAGS = ["exercism", "function"]


@dataclass
class ImportResult:
    name: str
    ok: bool
    task_dir: Path | None = None
    error: str = ""


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


def _files(folder: Path) -> tuple[Path, Path, Path]:
    """(stub, test file, example), from .meta/config.json when present, else by naming convention."""
    slug = folder.name
    module = slug.replace("-", "_")
    stub, test, example = f"{module}.py", f"{module}_test.py", ".meta/example.py"
    config = folder / ".meta" / "config.json"
    if config.is_file():
        try:
            files = json.loads(config.read_text(encoding="utf-8")).get("files", {})
        except (json.JSONDecodeError, AttributeError) as e:
            raise _Malformed(f".meta/config.json is not valid JSON: {e}") from None
        if not isinstance(files, dict):
            raise _Malformed(".meta/config.json: `files` is not a mapping")
        stub = (files.get("solution") or [stub])[0]
        test = (files.get("test") or [test])[0]
        example = (files.get("example") or [example])[0]
    paths = folder / stub, folder / test, folder / example
    for p in paths:
        if not p.is_file():
            raise _Malformed(f"missing file {p.relative_to(folder)}")
    for p in paths:
        try:
            ast.parse(p.read_text(encoding="utf-8"), filename=str(p))
        except (SyntaxError, UnicodeDecodeError) as e:
            raise _Malformed(f"{p.relative_to(folder)} does not parse: {e}") from None
    return paths


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


def _acceptance_source(test_src: str) -> str:
    """The test file with a module-level severity marker (unless it declares severities itself)."""
    if "mark.severity" in test_src:
        return test_src
    header = 'import pytest\n\npytestmark = pytest.mark.severity("major")\n\n'
    tree = ast.parse(test_src)
    after = 0  # insert after a module docstring and __future__ imports, which must come first
    for node in tree.body:
        is_doc = (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        )
        if is_doc or (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
            after = node.end_lineno or after
        else:
            break
    lines = test_src.splitlines(keepends=True)
    return "".join(lines[:after]) + ("\n" if after else "") + header + "".join(lines[after:])


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings (the prompt) as readable literal blocks."""


def _str_presenter(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_BlockDumper.add_representer(str, _str_presenter)


def _title(instructions: str, slug: str) -> str:
    for line in instructions.splitlines():
        if line.startswith("# "):
            return f"Exercism: {line[2:].strip()}"
    return f"Exercism: {slug}"


def import_exercise(folder: Path, dest: Path) -> Path:
    """Write one exercise as a task under ``dest``; returns the task folder. Raises _Malformed."""
    folder = Path(folder)
    slug = folder.name
    instructions = _instructions(folder)
    stub, test, example = _files(folder)
    module = stub.stem
    task_id = f"exercism-{slug}"
    target = Path(dest) / task_id
    # build in a temporary folder beside the target, then swap it in: no half-written task
    Path(dest).mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{task_id}-", dir=dest))
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
        (tmp / "repo" / "tests" / f"test_{module}_imports.py").write_text(
            f"def test_module_imports():\n    import {module}  # noqa: F401\n", encoding="utf-8"
        )
        acceptance_name = (
            test.name if test.name.startswith("test_") or test.stem.endswith("_test") else f"test_{test.name}"
        )
        (tmp / "acceptance" / acceptance_name).write_text(
            _acceptance_source(test.read_text(encoding="utf-8")), encoding="utf-8"
        )
        shutil.copy2(example, tmp / "solution" / stub.name)
        spec = {
            "id": task_id,
            "title": _title(instructions, slug),
            "prompt": f"{instructions}\n\nWrite your solution in `{stub.name}`.\n",
            "language": "python",
            "test_command": "python -m pytest -q",
            "long": False,
            "tags": TAGS,
        }
        (tmp / "task.yaml").write_text(
            yaml.dump(spec, Dumper=_BlockDumper, sort_keys=False, allow_unicode=True, width=100),
            encoding="utf-8",
        )
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def import_exercism(path: Path, dest: Path) -> list[ImportResult]:
    """Import one exercise folder or every exercise in a folder; a malformed one does not stop the rest."""
    results = []
    for folder in find_exercises(path):
        try:
            task_dir = import_exercise(folder, dest)
            results.append(ImportResult(folder.name, True, task_dir))
        except (_Malformed, OSError) as e:
            results.append(ImportResult(folder.name, False, error=str(e)))
    return results
