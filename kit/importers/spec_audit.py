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
methods, ``setUp``/``setup_method``), three calls deep. A gap a ``spec_notes`` entry of task.yaml
explains is shown as explained. What it cannot see is listed in docs/tasks.md. A task folder whose
paths ``kit tasks validate`` refuses (a link out of it, a special file, a bad ``DELETED.txt`` line:
:func:`kit.importers.validate.task_path_problems`) is refused here too, before any file is read.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

from kit import pyast
from kit.errors import TaskError
from kit.importers.validate import task_path_problems
from kit.paths import is_ignored
from kit.tasks.requirements import read_requirements, test_files
from kit.tasks.task import Task

KINDS = ("name", "attribute", "exception", "message", "string", "seed")
RAISES = {"raises", "assertRaises", "assertRaisesRegex", "assertRaisesRegexp", "warns", "assertWarns",
          "assertWarnsRegex"}  # fmt: skip
REGEX_ARG = {"assertRaisesRegex", "assertRaisesRegexp", "assertWarnsRegex"}
EQUALS = {"assertEqual", "assertEquals", "assertMultiLineEqual", "assertNotEqual", "assert_equal", "eq_"}
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
    """Gaps of one hidden test module."""

    def __init__(self, tree: ast.Module, prompt: str, new: dict[str, str], base_strings: set[str]) -> None:
        self.prompt, self.new, self.base_strings = prompt, new, base_strings
        self.functions = {
            n.name: n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
        }
        self.classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
        self.local = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
        for node in tree.body:
            if isinstance(node, ast.Assign):
                self.local |= {t.id for t in node.targets if isinstance(t, ast.Name)}

    def gaps(self, key: str, qual: str) -> list[Gap]:
        nodes = self._reach(qual)
        if not nodes:
            return []
        self.values = _assigned_strings(nodes)  # ``expected = "\n".join([...])``, compared later
        literals = _inputs(nodes, set(self.values))
        local = self.local | {
            t.id for root in nodes for t in ast.walk(root) if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store)
        } | {a.arg for root in nodes for a in ast.walk(root) if isinstance(a, ast.arg)}  # fmt: skip
        found: dict[tuple[str, str], Gap] = {}
        for root in nodes:
            for node in ast.walk(root):
                for kind, what in self._node_gaps(node, local, literals):
                    found.setdefault((kind, what), Gap(key, getattr(node, "lineno", 0), kind, what))
        return sorted(found.values(), key=lambda g: (g.line, g.kind, g.what))

    def _reach(self, qual: str) -> list[ast.AST]:
        """The test function and the helpers of its module it calls (three calls deep)."""
        cls_name, _, name = qual.rpartition("::")
        cls = self.classes.get(cls_name) if cls_name else None
        methods = self._methods(cls) if cls is not None else {}
        start = methods.get(name) if cls is not None else self.functions.get(name)
        if start is None:
            return []
        out: list[ast.AST] = [start, *(m for n, m in methods.items() if n in SETUPS)]
        todo, seen = [(start, 0)], {id(start)}
        while todo:
            node, depth = todo.pop()
            for call in (c for c in ast.walk(node) if isinstance(c, ast.Call) and depth < 3):
                f = call.func
                target = (
                    self.functions.get(f.id) if isinstance(f, ast.Name)
                    else methods.get(f.attr) if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
                    and f.value.id in ("self", "cls") else None
                )  # fmt: skip
                if target is not None and id(target) not in seen and not target.name.startswith("test"):
                    seen.add(id(target))
                    out.append(target)
                    todo.append((target, depth + 1))
        return out

    def _methods(self, cls: ast.ClassDef) -> dict[str, ast.AST]:
        """The class's methods, its bases' (defined in the module) under them."""
        out: dict[str, ast.AST] = {}
        for base in cls.bases:
            if isinstance(base, ast.Name) and base.id in self.classes and base.id != cls.name:
                out.update(self._methods(self.classes[base.id]))
        out.update({n.name: n for n in cls.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)})
        return out

    def _node_gaps(self, node: ast.AST, local: set[str], literals: str) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        used = (
            node.id if isinstance(node, ast.Name) and node.id not in local
            else node.attr if isinstance(node, ast.Attribute)
            else node.arg if isinstance(node, ast.keyword) and node.arg
            else None
        )  # fmt: skip
        if used and used in self.new and not used.startswith("__") and not names(self.prompt, used):
            out.append((self.new[used], used))
        if isinstance(node, ast.Call):
            out += self._call_gaps(node, literals)
        if isinstance(node, ast.Compare) and all(isinstance(op, ast.Eq | ast.NotEq) for op in node.ops):
            out += self._strings([node.left, *node.comparators], literals)
        return out

    def _call_gaps(self, call: ast.Call, literals: str) -> list[tuple[str, str]]:
        f = call.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        out: list[tuple[str, str]] = []
        if name in RAISES:
            expected = (
                call.args[0]
                if call.args
                else next((k.value for k in call.keywords if k.arg == "expected_exception"), None)
            )
            for exc in _exception_names(expected):
                if exc not in self.local and not mentions(self.prompt, exc):
                    out.append(("exception", exc))
            patterns = [k.value for k in call.keywords if k.arg in ("match", "expected_regex")]
            patterns += call.args[1:2] if name in REGEX_ARG else []
            for p in patterns:
                if isinstance(p, ast.Constant) and isinstance(p.value, str) and self._unstated(p.value, True):
                    out.append(("message", p.value[:SHOWN]))
        elif name in EQUALS:
            out += self._strings(call.args[:2], literals)
        elif name in SEEDS and (call.args or call.keywords) and "seed" not in self.prompt.lower():
            out.append(("seed", ast.unparse(call)[:SHOWN]))
        return out

    def _strings(self, sides: list[ast.expr], literals: str) -> list[tuple[str, str]]:
        out = []
        for side in sides:
            text = side.id if isinstance(side, ast.Name) and side.id in self.values else None
            text = self.values[text] if text else side.value if isinstance(side, ast.Constant) else None
            if isinstance(text, str):
                words = _words(text)
                derived = words and words <= (_words(literals) | _words(self.prompt))
                if len(text.strip()) >= MIN_TEXT and not derived and self._unstated(text, False):
                    out.append(("string", repr(text)[:SHOWN]))
        return out

    def _unstated(self, text: str, regex: bool) -> bool:
        part = literal_part(text) if regex else text
        if len(part.strip()) < MIN_TEXT:
            return False
        if part.lower() in self.prompt.lower() or part.strip() in self.prompt:
            return False
        return not any(part in s for s in self.base_strings)


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def _static(node: ast.AST) -> str | None:
    """The string ``node`` always evaluates to -- a literal, ``"a" + "b"``, ``"\n".join([...])`` of
    literals -- or None."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _static(node.left), _static(node.right)
        return left + right if left is not None and right is not None else None
    f = getattr(node, "func", None)
    if (
        isinstance(node, ast.Call)
        and isinstance(f, ast.Attribute)
        and f.attr == "join"
        and len(node.args) == 1
    ):
        sep, items = _static(f.value), node.args[0]
        parts = [_static(e) for e in items.elts] if isinstance(items, ast.List | ast.Tuple) else [None]
        return sep.join(parts) if sep is not None and None not in parts else None  # type: ignore[arg-type]
    return None


def _assigned_strings(nodes: list[ast.AST]) -> dict[str, str]:
    """Names the test assigns a static string once (:func:`_static`): an expected value kept in a
    variable (``expected = ...; assert_equal(expected, result)``)."""
    found: dict[str, list[str | None]] = {}
    loads: Counter[str] = Counter()  # a name read anywhere else is an input too (a round trip): left out
    sides: Counter[str] = Counter()
    for root in nodes:
        for n in ast.walk(root):
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                found.setdefault(n.targets[0].id, []).append(_static(n.value))
            elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                loads[n.id] += 1
            sides.update(x.id for x in _compared(n) if isinstance(x, ast.Name))
    return {
        k: v[0] for k, v in found.items() if len(v) == 1 and v[0] is not None and loads[k] == sides[k] > 0
    }


def _compared(n: ast.AST) -> list[ast.expr]:
    """The sides of an ``==`` / ``!=`` or of an ``assertEqual``-like call, else []."""
    if isinstance(n, ast.Compare) and all(isinstance(op, ast.Eq | ast.NotEq) for op in n.ops):
        return [n.left, *n.comparators]
    f = getattr(n, "func", None) if isinstance(n, ast.Call) else None
    return n.args[:2] if f is not None and getattr(f, "attr", getattr(f, "id", "")) in EQUALS else []  # type: ignore[attr-defined]


def _inputs(nodes: list[ast.AST], assigned: set[str] = frozenset()) -> str:  # type: ignore[assignment]
    """The test's literals other than the expected strings (``==`` / ``assertEqual`` sides, and the
    strings assigned to a name compared so), lowered and joined: an expected string made only of
    their words is derived from the inputs."""
    expected: set[int] = set()
    compared: set[str] = set()
    for root in nodes:
        for n in ast.walk(root):
            sides = [n.left, *n.comparators] if isinstance(n, ast.Compare) else []
            f = getattr(n, "func", None) if isinstance(n, ast.Call) else None
            if f is not None and getattr(f, "attr", getattr(f, "id", "")) in EQUALS:
                sides = n.args[:2]  # type: ignore[attr-defined]
            expected |= {id(x) for x in sides if isinstance(x, ast.Constant)}
            compared |= {x.id for x in sides if isinstance(x, ast.Name) and x.id in assigned}
    for root in nodes:
        for n in ast.walk(root):
            if isinstance(n, ast.Assign) and any(getattr(t, "id", None) in compared for t in n.targets):
                expected |= {id(c) for c in ast.walk(n.value) if isinstance(c, ast.Constant)}
    return " ".join(
        str(n.value).lower()
        for root in nodes
        for n in ast.walk(root)
        if isinstance(n, ast.Constant) and id(n) not in expected and isinstance(n.value, str | int | float)
    )


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
    gaps: list[Gap] = []
    for path in test_files(task.acceptance_dir):
        rel = path.relative_to(task.acceptance_dir).as_posix()
        keys = sorted(k for k in wanted if k.startswith(f"{rel}::"))
        if not keys or path.stat().st_size > MAX_FILE_BYTES:
            continue
        try:
            reader = _TestReader(pyast.parse(path.read_bytes()), task.prompt, new, base.strings)
        except (SyntaxError, ValueError, RecursionError):
            continue
        for key in keys:
            gaps += reader.gaps(key, key[len(rel) + 2 :])
    return [_explained(g, task) for g in gaps]


def _explained(gap: Gap, task: Task) -> Gap:
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
    """``unexplained gaps: 3 (2 exception, 1 seed); explained: 1``."""
    counts = gap_counts(gaps)
    explained = len(gaps) - sum(counts.values())
    summary = ", ".join(f"{n} {k}" for k, n in counts.items()) or "none"
    return f"unexplained gaps: {sum(counts.values())} ({summary}); explained: {explained}"
