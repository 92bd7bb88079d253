"""Severities and baseline-pass marks for imported Exercism tests.

**The default severity rule.** A test that only checks error reporting -- it expects an exception
(``assertRaises`` / ``assertRaisesRegex`` / ``pytest.raises``) and asserts nothing else except about
that exception (its type or message) -- is ``minor``: it checks how bad input is refused, often the
exact wording of a message. Every other test is ``major``. Nothing is ``critical`` by default (there is
no general way to tell from a test's source that it is more important than its neighbours); a
mapping file can say so.

**The mapping file** (``--severities FILE``) overrides the rule, first matching rule wins::

    rules:
      - test: "zipper_test.py::ZipperTest::test_data_is_retained"   # regex, searched in the key
        severity: critical
      - exercise: "forth"                                           # glob on the exercise slug
        test: "error|undefined"
        severity: minor
    default: null      # null: the built-in rule above; or a severity for every unmatched test

A key is ``<test file>::<Class>::<test>`` (``<test file>::<test>`` for a module-level test).
"""

from __future__ import annotations

import ast
import fnmatch
import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from kit import pyast
from kit.config import load_yaml_model
from kit.errors import ConfigError
from kit.records.schema import SEVERITIES
from kit.tasks.requirements import is_test_class, is_test_func

RAISE_CHECKS = {"assertRaises", "assertRaisesRegex", "assertRaisesRegexp", "raises"}


class SeverityRule(BaseModel):
    model_config = ConfigDict(extra="forbid")

    exercise: str = Field("*", description="Glob on the exercise slug (e.g. 'zipper', 'forth*').")
    test: str = Field(".*", description="Regex searched in '<file>::<Class>::<test>'.")
    severity: str

    @field_validator("severity")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in SEVERITIES:
            raise ValueError(f"severity {v!r} is not one of {', '.join(SEVERITIES)}")
        return v

    @field_validator("test")
    @classmethod
    def _regex(cls, v: str) -> str:
        try:
            re.compile(v)
        except re.error as e:
            raise ValueError(f"not a regular expression: {e}") from None
        return v


class SeverityMap(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rules: list[SeverityRule] = Field(default_factory=list)
    default: str | None = Field(None, description="Severity of unmatched tests; null = the built-in rule.")

    @field_validator("default")
    @classmethod
    def _known(cls, v: str | None) -> str | None:
        if v is not None and v not in SEVERITIES:
            raise ValueError(f"severity {v!r} is not one of {', '.join(SEVERITIES)}")
        return v

    def match(self, exercise: str, key: str) -> str | None:
        """The severity the first matching rule gives (else ``default``), or None: the caller's rule."""
        for rule in self.rules:
            if fnmatch.fnmatchcase(exercise, rule.exercise) and re.search(rule.test, key):
                return rule.severity
        return self.default

    def severity(self, exercise: str, key: str, node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
        return self.match(exercise, key) or default_severity(node)


def load_severity_map(path: str | Path | None) -> SeverityMap:
    """The mapping file at ``path``, or the built-in rule alone when ``path`` is None."""
    if path is None:
        return SeverityMap()
    if not Path(path).is_file():
        raise ConfigError(f"severity mapping file not found: {path}", "give a YAML file with `rules:`")
    return load_yaml_model(Path(path), SeverityMap, "severity mapping")


def _call_name(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")


def default_severity(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """``minor`` for a test that only checks that an error is raised (and its message), else ``major``."""
    raise_names: set[str] = set()
    expects_error = False
    for sub in ast.walk(node):
        if isinstance(sub, ast.With | ast.AsyncWith):
            for item in sub.items:
                if isinstance(item.context_expr, ast.Call) and _call_name(item.context_expr) in RAISE_CHECKS:
                    expects_error = True
                    if isinstance(item.optional_vars, ast.Name):
                        raise_names.add(item.optional_vars.id)
        elif isinstance(sub, ast.Call) and _call_name(sub) in RAISE_CHECKS:
            expects_error = True
    if not expects_error:
        return "major"
    for sub in ast.walk(node):
        is_check = isinstance(sub, ast.Assert) or (
            isinstance(sub, ast.Call)
            and (_call_name(sub).startswith("assert") or _call_name(sub) == "fail")
            and _call_name(sub) not in RAISE_CHECKS
        )
        if not is_check:
            continue
        names = {n.id for n in ast.walk(sub) if isinstance(n, ast.Name)}
        if not names & raise_names:
            return "major"  # it asserts something about behaviour, not only about the error
    return "minor"


def test_functions(
    tree: ast.Module, filename: str
) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """(requirement key, node) for each test function, keyed as kit.scoring.scorer keys requirements."""
    out = []
    for node in tree.body:
        if is_test_func(node):
            out.append((f"{filename}::{node.name}", node))  # type: ignore[union-attr]
        elif is_test_class(node):
            for sub in node.body:  # type: ignore[union-attr]
                if is_test_func(sub):
                    out.append((f"{filename}::{node.name}::{sub.name}", sub))  # type: ignore[union-attr]
    return out


def _header_line(tree: ast.Module) -> int:
    """Line after a module docstring and ``from __future__`` imports (which must stay first)."""
    after = 0
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
    return after


def mark_source(
    source: str, filename: str, marks: dict[str, list[str]], drop: frozenset[str] = frozenset()
) -> str:
    """``source`` with decorators added above test functions: ``marks`` maps a key to decorator
    expressions (e.g. ``'pytest.mark.severity("major")'``); ``import pytest`` is added at the top.
    The test functions keyed in ``drop`` are replaced by a comment (and ``pass``, so a class body
    stays valid)."""
    tree = pyast.parse(source)
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int, str]] = []  # replace lines[start:end] with text
    for key, node in test_functions(tree, filename):
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
        indent = re.match(r"\s*", lines[node.lineno - 1]).group(0)  # type: ignore[union-attr]
        if key in drop:
            note = f"{indent}pass  # {node.name}: skipped by the exercise's authors, not a requirement\n"
            edits.append((first, node.end_lineno or node.lineno, note))
        elif marks.get(key):
            edits.append((first, first, "".join(f"{indent}@{m}\n" for m in marks[key])))
    for start, end, text in sorted(edits, reverse=True):
        lines[start:end] = [text]
    after = _header_line(tree)
    header = ("\n" if after else "") + "import pytest\n\n"
    return "".join(lines[:after]) + header + "".join(lines[after:])
