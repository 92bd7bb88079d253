"""The specification audit (``python -m kit tasks audit``): for each hidden test, what it relies on
that the task's prompt never states. A strong agent that does exactly what it was asked fails such a
test, so a comparison of strategies on it measures the prompt. A heuristic read of the sources with
``ast`` -- nothing is imported or run. Its rules (docs/tasks.md, "The specification audit"):

* **name** / **attribute**: an identifier the test uses (a name, an ``obj.attr``, a keyword argument)
  that the reference change defines and the base does not -- a function, class or parameter (name);
  a constant, class attribute or ``self.x`` attribute (attribute) -- and that the prompt never names
  (a plain lowercase word such as ``lock`` counts as named only as code: in backticks, as ``.lock``,
  or followed by ``(`` or ``=``).
* **exception**: the type a ``pytest.raises`` / ``raises`` / ``assertRaises[Regex]`` /
  ``[pytest.]warns`` / ``assertWarns[Regex]`` expects, when the prompt never names it.
* **message**: a ``match=`` pattern or an ``assert*Regex`` pattern whose longest literal part (3+
  characters) is in neither the prompt nor any string of the base.
* **string**: an exact expected string (``==`` / ``!=`` / ``assertEqual`` / ``assert_equal`` against a
  string literal of 3+ characters, or against a name the test assigns one such string -- a literal,
  ``+`` of literals, ``"\n".join([...])`` of literals -- and reads only there) found in neither the
  prompt, nor the test's own other literals (its inputs), nor the base's strings.
* **seed**: a ``seed(...)``, ``Random(...)`` or ``default_rng(...)`` call with arguments, when the
  prompt never says "seed": such a test pins the exact sequence of random draws.

The test's own body is read, with the helpers it calls in its module (module functions, ``self.``
methods, ``setUp``/``setup_method``), three calls deep; each function is read once, however many
tests reach it. The work is bounded (a hidden test module is hostile input): over a budget of
500,000 steps -- 100 times what any shipped task takes -- the audit stops with one **incomplete**
gap, ``audit incomplete: ...`` naming how many tests were not audited; no note explains it. A gap a
``spec_notes`` entry of task.yaml explains is shown as explained. What it cannot see is listed in docs/tasks.md. A task folder whose
paths ``kit tasks validate`` refuses (a link out of it, a special file, a bad ``DELETED.txt`` line:
:func:`kit.importers.validate.task_path_problems`) is refused here too, before any file is read.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from kit import pyast
from kit.errors import TaskError
from kit.importers.spec_nodes import (
    EQUALS,
    Budget,
    FunctionFacts,
    OverBudget,
    assigned_strings,
    read_function,
    words,
)
from kit.importers.validate import task_path_problems
from kit.paths import is_ignored
from kit.tasks.requirements import read_requirements, test_files
from kit.tasks.task import Task

KINDS = ("name", "attribute", "exception", "message", "string", "seed", "incomplete")
RAISES = {"raises", "assertRaises", "assertRaisesRegex", "assertRaisesRegexp", "warns", "assertWarns",
          "assertWarnsRegex"}  # fmt: skip
REGEX_ARG = {"assertRaisesRegex", "assertRaisesRegexp", "assertWarnsRegex"}
SEEDS = {"seed", "Random", "default_rng", "RandomState"}
SETUPS = {"setUp", "setUpClass", "setup_method", "setup_class", "setup"}
#: What the audit cannot see (docs/tasks.md): it is a heuristic read of the sources.
CANNOT_SEE = (
    "behaviour the prompt states wrongly or not at all when the test names nothing new (an order, "
    "laziness, when an error is raised, thread safety, a contradiction such as 'IndexError for r > n' "
    "where the test wants a result); an exception type the prompt names for another case (any mention "
    "counts); expected values that are not strings (numbers, lists, objects); a name or string built at "
    "run time (getattr, f-strings, data files, parametrize tables read outside the test); helpers in "
    "other modules (conftest fixtures, shared mixins of another file); names the base already defines "
    "anywhere (a new meaning of an old name); checks outside the test functions (module-level code)"
)
MAX_FILE_BYTES = 1024 * 1024  # a larger Python file of the tree is not read (the tree is hostile input)
MIN_TEXT = 3
SHOWN = 80


@dataclass(frozen=True)
class Gap:
    test: str  # the requirement key (node id)
    line: int
    kind: str
    what: str
    note: str | None = None  # the spec note that explains it

    def row(self) -> str:
        tail = f"  (explained: {self.note})" if self.note is not None else ""
        return f"{self.test}  {self.line}  {self.kind}  {self.what}{tail}"


@dataclass
class Facts:
    """What a tree defines (identifiers by kind) and the strings it holds."""

    defined: dict[str, str]  # identifier -> "name" | "attribute" | "import"
    strings: set[str]


def tree_facts(paths: list[Path]) -> Facts:
    facts = Facts({}, set())
    for path in paths:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_FILE_BYTES:
            continue
        try:
            tree = pyast.parse(path.read_bytes())
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        _collect(tree, facts)
    return facts


def _collect(tree: ast.Module, facts: Facts) -> None:
    def define(name: str, kind: str) -> None:
        facts.defined.setdefault(name, kind)

    def targets(node: ast.AST, kind_level: bool) -> None:
        for t in ast.walk(node):
            if isinstance(t, ast.Attribute) and isinstance(t.ctx, ast.Store):
                define(t.attr, "attribute")
            elif isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store) and kind_level:
                define(t.id, "attribute")

    def body(stmts: list[ast.stmt], level: bool) -> None:
        for node in stmts:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                define(node.name, "name")
                if not isinstance(node, ast.ClassDef):
                    for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
                        define(arg.arg, "name")
                body(node.body, isinstance(node, ast.ClassDef))
            elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
                for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    targets(t, level)
            elif isinstance(node, ast.Import | ast.ImportFrom):
                for alias in node.names:
                    define((alias.asname or alias.name).split(".")[0], "import")
            else:
                for child in ast.iter_child_nodes(node):
                    if isinstance(child, ast.stmt):
                        body([child], level and isinstance(node, ast.If | ast.Try))
                    else:
                        targets(child, False)

    body(tree.body, True)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) >= MIN_TEXT:
            facts.strings.add(node.value)


def _py_files(root: Path) -> list[Path]:
    return (
        [p for p in sorted(root.rglob("*.py")) if not is_ignored(p.relative_to(root))]
        if root.is_dir()
        else []
    )


def mentions(prompt: str, word: str) -> bool:
    """Whether ``prompt`` names the identifier ``word`` (not as part of a longer identifier)."""
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(word)}(?![A-Za-z0-9_])", prompt) is not None


def names(prompt: str, name: str) -> bool:
    """Whether ``prompt`` names the identifier ``name``. A plain lowercase word (``lock``, ``once``)
    must appear as code -- inside backticks, as ``.name``, or followed by ``(`` or ``=`` -- since
    prose uses the word for other things ("one lock around ...")."""
    if not re.fullmatch(r"[a-z]+", name):
        return mentions(prompt, name)
    spans = " ".join(re.findall(r"`([^`]*)`", prompt))
    code = rf"\.{name}(?![A-Za-z0-9_])|(?<![A-Za-z0-9_]){name}\s*[(=]"
    return mentions(spans, name) or re.search(code, prompt) is not None


def literal_part(pattern: str) -> str:
    """The longest literal run of a regular expression (escapes undone, anchors and operators cut)."""
    parts = re.split(r"\\[dDsSwWbBAZ]|(?<!\\)[.*+?\[\](){}|^$]", pattern)
    return max((re.sub(r"\\(.)", r"\1", p) for p in parts), key=len, default="")


class _TestReader:
    """Gaps of one hidden test module. Each function is read once (:mod:`.spec_nodes`), whatever
    number of tests reach it; a test's work is counted against ``budget``."""

    def __init__(
        self, tree: ast.Module, prompt: str, new: dict[str, str], base_strings: set[str], budget: Budget
    ) -> None:
        self.prompt, self.new, self.base_strings, self.budget = prompt, new, base_strings, budget
        self.functions = {
            n.name: n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
        }
        self.classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
        self.local = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
        for node in tree.body:
            if isinstance(node, ast.Assign):
                self.local |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        self.read: dict[int, FunctionFacts] = {}
        self.memo: dict[tuple, object] = {}  # answers that are the same for every test
        self.bases_read: dict[str, dict[str, ast.AST]] = {}
        self.prompt_lower, self.prompt_words = prompt.lower(), _words(prompt)

    def facts(self, node: ast.AST) -> FunctionFacts:
        if id(node) not in self.read:
            self.read[id(node)] = read_function(node, self._interesting)
            self.budget.spend(self.read[id(node)].size)
        return self.read[id(node)]

    def _interesting(self, node: ast.AST) -> bool:
        used = _used(node)
        if used is not None:
            return used in self.new
        if isinstance(node, ast.Call):
            return _call_name(node) in RAISES | EQUALS | SEEDS
        return isinstance(node, ast.Compare)

    def gaps(self, key: str, qual: str) -> list[Gap]:
        nodes = self._reach(qual)
        if not nodes:
            return []
        read = [self.facts(n) for n in nodes]
        self.budget.spend(
            sum(len(f.candidates) + len(f.stores) + len(f.assigned) + len(f.loads) for f in read)
        )
        self.values = assigned_strings(read)  # ``expected = "\n".join([...])``, compared later
        compared = {n for f in read for n in f.input_sides if n in self.values}
        self.literal_words: set[str] | None = None
        self.inputs = lambda: [f.input_words(compared) for f in read]
        local = self.local.union(*(f.stores for f in read))
        found: dict[tuple[str, str], Gap] = {}
        for f in read:
            for node in f.candidates:
                for kind, what in self._node_gaps(node, local):
                    if (kind, what) not in found:
                        found[kind, what] = Gap(key, getattr(node, "lineno", 0), kind, what)
                        self.budget.spend(1)
        return sorted(found.values(), key=lambda g: (g.line, g.kind, g.what))

    def _words_of_inputs(self) -> set[str]:
        """The words of the test's literals other than the expected strings (the ``==`` /
        ``assertEqual`` sides, and the strings assigned to a name compared so): an expected string
        made only of them is derived from the inputs. Merged once per test, when a string needs it."""
        if self.literal_words is None:
            parts = self.inputs()
            self.budget.spend(sum(len(p) for p in parts))
            self.literal_words = set().union(*parts)
        return self.literal_words

    def _reach(self, qual: str) -> list[ast.AST]:
        """The test function and the helpers of its module it calls (three calls deep)."""
        cls_name, _, name = qual.rpartition("::")
        cls = self.classes.get(cls_name) if cls_name else None
        methods = self._methods(cls) if cls is not None else {}
        start = methods.get(name) if cls is not None else self.functions.get(name)
        if start is None:
            return []
        if ("setups", cls_name) not in self.memo:
            self.memo["setups", cls_name] = [m for n, m in methods.items() if n in SETUPS]
        out: list[ast.AST] = [start, *self.memo["setups", cls_name]]  # type: ignore[misc]
        todo, seen = [(start, 0)], {id(start)}
        while todo:
            node, depth = todo.pop()
            calls = self.facts(node).calls if depth < 3 else []
            self.budget.spend(len(calls) + 1)
            for how, called in calls:
                target = self.functions.get(called) if how == "name" else methods.get(called)
                if target is not None and id(target) not in seen and not target.name.startswith("test"):
                    seen.add(id(target))
                    out.append(target)
                    todo.append((target, depth + 1))
        return out

    def _methods(self, cls: ast.ClassDef, inside: frozenset[str] = frozenset()) -> dict[str, ast.AST]:
        """The class's methods, its bases' (defined in the module, a cycle cut) under them; once per
        class."""
        if cls.name in self.bases_read and not inside:
            return self.bases_read[cls.name]
        out: dict[str, ast.AST] = {}
        for base in cls.bases:
            if isinstance(base, ast.Name) and base.id in self.classes and base.id not in inside | {cls.name}:
                out.update(self._methods(self.classes[base.id], inside | {cls.name}))
        out.update({n.name: n for n in cls.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)})
        self.budget.spend(len(out) + 1)
        if not inside:
            self.bases_read[cls.name] = out
        return out

    def _node_gaps(self, node: ast.AST, local: set[str]) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        used = _used(node)
        if isinstance(node, ast.Name) and used in local:
            used = None
        if used and used in self.new and not used.startswith("__") and not self._asked(names, used):
            out.append((self.new[used], used))
        if isinstance(node, ast.Call):
            out += self._call_gaps(node)
        if isinstance(node, ast.Compare) and all(isinstance(op, ast.Eq | ast.NotEq) for op in node.ops):
            out += self._strings([node.left, *node.comparators])
        return out

    def _asked(self, how: Callable[[str, str], bool], word: str) -> bool:
        """``how(prompt, word)`` (:func:`names`, :func:`mentions`), asked once per word."""
        key = (how.__name__, word)
        if key not in self.memo:
            self.memo[key] = how(self.prompt, word)
        return self.memo[key]  # type: ignore[return-value]

    def _call_gaps(self, call: ast.Call) -> list[tuple[str, str]]:
        name = _call_name(call)
        out: list[tuple[str, str]] = []
        if name in RAISES:
            expected = (
                call.args[0]
                if call.args
                else next((k.value for k in call.keywords if k.arg == "expected_exception"), None)
            )
            excs = _exception_names(expected)
            self.budget.spend(len(excs))
            for exc in excs:
                if exc not in self.local and not self._asked(mentions, exc):
                    out.append(("exception", exc))
            patterns = [k.value for k in call.keywords if k.arg in ("match", "expected_regex")]
            patterns += call.args[1:2] if name in REGEX_ARG else []
            for p in patterns:
                if isinstance(p, ast.Constant) and isinstance(p.value, str) and self._unstated(p.value, True):
                    out.append(("message", p.value[:SHOWN]))
        elif name in EQUALS:
            out += self._strings(call.args[:2])
        elif name in SEEDS and (call.args or call.keywords) and "seed" not in self.prompt_lower:
            if ("seed", id(call)) not in self.memo:
                self.memo["seed", id(call)] = ast.unparse(call)[:SHOWN]
            out.append(("seed", self.memo["seed", id(call)]))  # type: ignore[arg-type]
        return out

    def _strings(self, sides: list[ast.expr]) -> list[tuple[str, str]]:
        out = []
        for side in sides:
            text = side.id if isinstance(side, ast.Name) and side.id in self.values else None
            text = self.values[text] if text else side.value if isinstance(side, ast.Constant) else None
            if isinstance(text, str):
                if ("text", text) not in self.memo:  # read once: a string may be long
                    self.memo["text", text] = (
                        _words(text),
                        len(text.strip()) >= MIN_TEXT,
                        repr(text)[:SHOWN],
                    )
                words, long_enough, shown = self.memo["text", text]  # type: ignore[misc]
                self.budget.spend(len(words))
                derived = words and words <= (self._words_of_inputs() | self.prompt_words)
                if long_enough and not derived and self._unstated(text, False):
                    out.append(("string", shown))
        return out

    def _unstated(self, text: str, regex: bool) -> bool:
        key = ("unstated", text, regex)
        if key not in self.memo:
            self.memo[key] = self._unstated_now(text, regex)
        return self.memo[key]  # type: ignore[return-value]

    def _unstated_now(self, text: str, regex: bool) -> bool:
        part = literal_part(text) if regex else text
        if len(part.strip()) < MIN_TEXT:
            return False
        if part.lower() in self.prompt_lower or part.strip() in self.prompt:
            return False
        return not any(part in s for s in self.base_strings)


_words = words


def _used(node: ast.AST) -> str | None:
    """The identifier a name, an ``obj.attr`` or a keyword argument uses, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.arg if isinstance(node, ast.keyword) and node.arg else None


def _call_name(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _exception_names(node: ast.expr | None) -> list[str]:
    if isinstance(node, ast.Tuple):
        return [n for e in node.elts for n in _exception_names(e)]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, ast.Name):
        return [node.id]
    return []


def audit_task(task: Task) -> list[Gap]:
    """Every gap of the task's hidden tests (see the module docstring), explained ones with their note.
    A task folder whose paths are refused raises TaskError naming why, before any file is read."""
    problems = task_path_problems(task)
    if problems:
        raise TaskError(
            "refused, not audited: " + "; ".join(problems),
            f"fix the task folder (python -m kit tasks validate {task.path} shows the same)",
        )
    base = tree_facts(_py_files(task.repo_dir))
    change = tree_facts(_py_files(task.solution_dir))
    new = {n: kind for n, kind in change.defined.items() if n not in base.defined and kind != "import"}
    reqs, _ = read_requirements(task.acceptance_dir, task.excluded)
    wanted = {r.key for r in reqs if not r.baseline_pass}
    todo = []
    for path in test_files(task.acceptance_dir):
        rel = path.relative_to(task.acceptance_dir).as_posix()
        keys = sorted(k for k in wanted if k.startswith(f"{rel}::"))
        if keys and path.stat().st_size <= MAX_FILE_BYTES:
            todo.append((path, rel, keys))
    return [_explained(g, task) for g in _audit_tests(todo, task.prompt, new, base.strings, Budget())]


def _audit_tests(
    todo: list[tuple[Path, str, list[str]]],
    prompt: str,
    new: dict[str, str],
    strings: set[str],
    budget: Budget,
) -> list[Gap]:
    """The gaps of each test of ``todo`` (path, its relative path, its keys) -- and, when the
    budget is spent, an ``incomplete`` gap naming how many tests were not audited."""
    gaps: list[Gap] = []
    done = 0
    total = sum(len(keys) for _, _, keys in todo)
    try:
        for path, rel, keys in todo:
            try:
                reader = _TestReader(pyast.parse(path.read_bytes()), prompt, new, strings, budget)
            except (SyntaxError, ValueError, RecursionError):
                done += len(keys)
                continue
            for key in keys:
                gaps += reader.gaps(key, key[len(rel) + 2 :])
                done += 1
    except OverBudget:
        what = (
            f"audit incomplete: its work budget ({budget.limit:,} steps) was spent here; "
            f"{total - done} of {total} hidden test(s) not audited -- read them by hand"
        )
        keys = [k for _, _, ks in todo for k in ks]  # the test it stopped at
        gaps.append(Gap(keys[min(done, len(keys) - 1)], 0, "incomplete", what))
    return gaps


def _explained(gap: Gap, task: Task) -> Gap:
    if gap.kind == "incomplete":  # no note explains an audit that did not finish
        return gap
    note = next((n.note for n in task.spec_notes if n.explains(gap.test, gap.what)), None)
    return replace(gap, note=note) if note is not None else gap


def gap_counts(gaps: list[Gap]) -> dict[str, int]:
    """Unexplained gaps per kind (task.yaml's ``spec_gaps``), kinds in :data:`KINDS` order."""
    counts = Counter(g.kind for g in gaps if g.note is None)
    return {k: counts[k] for k in KINDS if counts[k]}


def unexplained(gaps: list[Gap]) -> list[Gap]:
    return [g for g in gaps if g.note is None]


def report(gaps: list[Gap], limit: int | None = None) -> list[str]:
    """``test  line  kind  what`` rows, explained ones marked, then a count line."""
    rows = [g.row() for g in gaps]
    if limit is not None and len(rows) > limit:
        rows = [*rows[:limit], f"... and {len(rows) - limit} more"]
    return [*rows, report_line(gaps)]


def report_line(gaps: list[Gap]) -> str:
    """``unexplained gaps: 3 (2 exception, 1 seed); explained: 1`` -- after ``audit incomplete: ...;``
    when the audit spent its work budget."""
    counts = gap_counts(gaps)
    explained = len(gaps) - sum(counts.values())
    summary = ", ".join(f"{n} {k}" for k, n in counts.items()) or "none"
    stop = next((g.what.split(" -- ")[0] + "; " for g in gaps if g.kind == "incomplete"), "")
    return f"{stop}unexplained gaps: {sum(counts.values())} ({summary}); explained: {explained}"
