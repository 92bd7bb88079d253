"""From ``--commit SHA`` or ``--range BASE..HEAD`` to a plan: the base and head commits, the files of
the reference solution, the candidate hidden tests per test module, and the own tests the change
modified or removed (their base versions would count as regressions of the reference solution).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from kit.errors import TaskError
from kit.importers.git.gitread import Change, Commit, Repo
from kit.importers.git.testfiles import (
    FuncNode,
    changed_tests,
    is_test_module,
    is_test_side,
    parse,
    test_functions,
)
from kit.tasks.requirements import TEST_FILE_RE


@dataclass
class Plan:
    base: str
    head: str
    commits: list[Commit]
    solution: list[Change]  # the change's files that are not tests
    tests: list[Change]  # the change's test-side files
    candidates: dict[str, list[str]]  # test module -> keys (Class::name) the change added or changed
    nodes: dict[str, FuncNode] = field(default_factory=dict)  # "<module>::<key>" -> the head's node
    deselect: dict[str, str] = field(default_factory=dict)  # own test node id -> why it is left out
    ignore: dict[str, str] = field(default_factory=dict)  # own test module -> why it is not collected
    notes: list[str] = field(default_factory=list)


def resolve_change(repo: Repo, commit: str | None, span: str | None) -> tuple[str, str, list[Commit]]:
    """(base SHA, head SHA, the commits from base to head) for ``--commit`` or ``--range``."""
    if bool(commit) == bool(span):
        raise TaskError("give exactly one of --commit SHA and --range BASE..HEAD")
    if commit:
        head = repo.resolve(commit)
        info = repo.commit(head)
        if not info.parents:
            raise TaskError(
                f"{commit} is a root commit: it has no parent to start from", "pick a later commit"
            )
        return info.parents[0], head, [info]
    m = re.fullmatch(r"(.+?)\.\.(.+)", span or "")
    if not m or m.group(2).startswith("."):
        raise TaskError(f"--range {span!r} is not BASE..HEAD", "e.g. --range v1.2.0..v1.3.0")
    base, head = repo.resolve(m.group(1)), repo.resolve(m.group(2))
    if not repo.is_ancestor(base, head):
        raise TaskError(f"{m.group(1)} is not an ancestor of {m.group(2)}", "give BASE..HEAD with BASE older")
    commits = repo.range_commits(base, head)
    if not commits:
        raise TaskError(f"the range {span} holds no commit", "give BASE..HEAD with HEAD later than BASE")
    return base, head, commits


#: How deep a test module's syntax tree may nest (1,600 modules of the real-repos suite: at most 23).
#: Scoring copies each test's tree recursively: a 1,000-term expression was a RecursionError.
MAX_TEST_NESTING = 100
#: How many new or changed test functions a change may bring (far more than any real-repos span);
#: 5,000 took 84 s and 209 MB to import, 20,000 469 s and 896 MB (attack round 39c).
MAX_CANDIDATES = 5_000


def nesting(tree: ast.AST) -> int:
    """How many levels deep ``tree`` nests (walked without recursion)."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def make_plan(
    repo: Repo, base: str, head: str, commits: list[Commit], trees: dict[str, Path], globs: list[str] | None
) -> Plan:
    """The plan, from the change's files and the exported ``trees`` ("base", "head")."""
    changes = repo.changes(base, head)
    if not changes:
        raise TaskError(f"{base[:12]}..{head[:12]} changes no file")
    tests = [c for c in changes if is_test_side(c.path, globs)]
    plan = Plan(base, head, commits, [c for c in changes if c not in tests], tests, {})
    modules = [c for c in tests if is_test_module(c.path, globs)]
    if not any(c.status != "D" for c in modules):
        where = f"matching {' '.join(globs)}" if globs else "named test_*.py or *_test.py"
        raise TaskError(
            f"the change adds or changes no test module ({where})",
            "pick a commit or range that adds tests, or say where the tests are with --tests GLOB",
        )
    for change in modules:
        _plan_module(plan, change, trees)
    if not plan.candidates:
        raise TaskError(
            "the change adds or changes no test function (only other code in its test files)",
            "pick a commit or range that adds or changes tests",
        )
    count = sum(len(keys) for keys in plan.candidates.values())
    if count > MAX_CANDIDATES:  # each is probed on both sides: memory and time grow with the count
        raise TaskError(
            f"the change adds or changes {count:,} test functions (at most {MAX_CANDIDATES:,} are probed)",
            "pick a smaller range, or name the test files to use with --tests GLOB",
        )
    return plan


def _plan_module(plan: Plan, change: Change, trees: dict[str, Path]) -> None:
    path = change.path
    base_file, head_file = trees["base"] / path, trees["head"] / path
    base_tree = parse(base_file.read_bytes(), path) if base_file.is_file() else None
    if change.status == "D":
        plan.ignore[path] = "a test module the change deletes"
        return
    if not head_file.is_file():  # a link out of the tree or a submodule: the export left it out
        raise TaskError(
            f"the test module {path!r} is no file at the head (a symbolic link out of the tree, or a "
            "submodule, which the kit does not follow): refused",
            "import a commit whose test modules are plain files, or name the ones to use with --tests GLOB",
        )
    source = head_file.read_bytes()
    try:
        source.decode("utf-8")
    except UnicodeDecodeError as e:  # (every later step reads a test module as UTF-8, PEP 3120's default)
        raise TaskError(
            f"the test module {path!r} is not UTF-8 (byte {e.start:,}): the kit reads test modules as UTF-8",
            "re-encode it as UTF-8 in the repository, or name the test modules to use with --tests GLOB",
        ) from None
    head_tree = parse(source, path)
    if head_tree is None:
        plan.notes.append(f"{path}: does not parse at the head; its tests are left out")
        return
    if (depth := nesting(head_tree)) > MAX_TEST_NESTING:
        raise TaskError(  # (scoring copies a test's syntax tree recursively: a RecursionError, not a task)
            f"the test module {path!r} nests {depth} levels deep (at most {MAX_TEST_NESTING}; real test "
            "modules stay under 30): refused",
            "import a commit whose tests are plainer, or name the test modules to use with --tests GLOB",
        )
    if base_file.is_file() and base_tree is None:
        plan.ignore[path] = "a test module that does not parse at the base"
    added, changed, removed = changed_tests(base_tree, head_tree)
    for key in changed + removed:
        plan.deselect[f"{path}::{key}"] = (
            "changed by the change" if key in changed else "removed by the change"
        )
    keys = added + changed
    if keys and not TEST_FILE_RE.match(Path(path).name):
        plan.notes.append(
            f"{path}: its {len(keys)} new or changed tests are left out: the kit's scoring reads "
            "requirements only from files named test_*.py or *_test.py"
        )
        return
    if keys:
        plan.candidates[path] = keys
        nodes = test_functions(head_tree)
        plan.nodes.update({f"{path}::{k}": nodes[k] for k in keys})
