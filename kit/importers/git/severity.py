"""The severity of each hidden test, by rule from how it fails at the base (a mapping file overrides).

**How a test fails at the base** (:func:`failure_kind`, read from what the kit's scoring session
reports for it):

- ``hang``: it ran past the time limit; ``memory``: ``MemoryError`` (the sandbox's memory limit);
- ``missing``: a name the change adds is missing -- ``ImportError`` / ``ModuleNotFoundError``,
  ``NameError``, an ``AttributeError`` on a module, a class or an object of a class of the code under
  test (not ``'NoneType' object has no attribute``);
- ``wrong``: a wrong result -- an assertion (``assert``, ``self.assertEqual`` ..., a sealed check),
  ``pytest.raises`` / ``assertRaises`` that did not raise, ``pytest.fail``;
- ``crash``: any other exception.

**The rule** (:func:`rule_severity`): ``hang`` or ``memory`` -> critical; else a test whose checks
are only error-path checks (``pytest.raises`` / ``assertRaises`` and assertions about the raised
error alone: :func:`kit.importers.exercism.marks.default_severity`) -> minor; else ``crash`` -> critical;
``wrong`` or ``missing`` -> major.

**The mapping file** (``--severities FILE``) is the Exercism importer's format
(:mod:`kit.importers.exercism.marks`, e.g. ``datasets/severities/exercism-example.yaml``): the first rule
whose ``test`` regex is found in ``<file>::<Class>::<name>`` (the file repo-relative) -- and whose
``exercise`` glob matches the task id -- wins; then ``default``; then the rule above.
"""

from __future__ import annotations

import ast
import re

from kit.importers.exercism.marks import SeverityMap, default_severity

KINDS = ("hang", "memory", "crash", "missing", "wrong")

_MISSING = re.compile(
    r"^(E\s+)?(ImportError|ModuleNotFoundError|NameError)\b"
    r"|cannot import name|No module named"
    r"|AttributeError: (module|type object) '[^']*' has no attribute"
    r"|AttributeError: '(?!NoneType')[^']*' object has no attribute"
)
_WRONG = re.compile(
    r"^(assert\b|AssertionError\b|Failed: DID NOT RAISE|Failed:|sealed check failed|DID NOT RAISE)"
)


def failure_kind(message: str, timed_out: bool = False) -> str:
    """One of :data:`KINDS` for a test that failed at the base with ``message``."""
    text = message.strip()
    if timed_out or text.lower().startswith(("timeout", "timed out")):
        return "hang"
    if "MemoryError" in text:
        return "memory"
    if _MISSING.search(text):
        return "missing"
    if _WRONG.search(text) or text.startswith("AssertionError"):
        return "wrong"
    return "crash"


def rule_severity(kind: str, node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """The built-in rule (see the module docstring)."""
    if kind in ("hang", "memory"):
        return "critical"
    if default_severity(node) == "minor":
        return "minor"
    return "critical" if kind == "crash" else "major"


def severity(
    smap: SeverityMap, task_id: str, key: str, kind: str, node: ast.FunctionDef | ast.AsyncFunctionDef
) -> str:
    """The mapping file's severity for ``key`` if a rule (or its default) gives one, else the rule's."""
    return smap.match(task_id, key) or rule_severity(kind, node)
