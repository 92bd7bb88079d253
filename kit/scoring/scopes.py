"""The scopes of a test module the kit writes canaries into (:mod:`.inject`): its test classes (nested
ones included) and its module level, the tests each holds that the session runs, and the marks every
test of a scope gets."""

from __future__ import annotations

import ast

from kit.scoring.excluded import deselected
from kit.scoring.naming import DEFAULT, Collecting
from kit.tasks.requirements import pytestmark_of

#: A test as :meth:`Scopes.tests` gives it: (index of its top-level statement, its class or None,
#: its index in that class's body or the module's, the function)
Test = tuple[int, ast.ClassDef | None, int, ast.FunctionDef]


class Scopes:
    """The test classes of a module (nested ones included), by ``id``: each one's names from the
    module down and the marks every test in it gets; which functions and classes are tests is the
    session's configuration's (``collecting``: :mod:`.naming`)."""

    def __init__(self, tree: ast.Module, collecting: Collecting = DEFAULT) -> None:
        self.tree, self.collecting = tree, collecting
        self._module_marks: list[ast.expr] | None = None
        self.classes: dict[int, ast.ClassDef] = {}
        self.chains: dict[int, tuple[ast.ClassDef, ...]] = {}
        for _, chain, _ in collecting.class_tests(tree.body):
            self.classes[id(chain[-1])], self.chains[id(chain[-1])] = chain[-1], chain
        for chain in list(self.chains.values()):  # (a class whose tests are all in nested ones)
            for i in range(1, len(chain)):
                self.classes.setdefault(id(chain[i - 1]), chain[i - 1])
                self.chains.setdefault(id(chain[i - 1]), chain[:i])

    def node_id(self, cls: ast.ClassDef | None) -> str:
        """``Outer::Inner::`` (empty at module level)."""
        return "".join(c.name + "::" for c in self.chains[id(cls)]) if cls is not None else ""

    def key(self, rel: str, cls: ast.ClassDef | None) -> str:
        """The scope as the kit records it (a canary's ``Injected.canaries`` value): ``rel::Outer::Inner``,
        ``rel`` at module level."""
        return rel + ("::" + self.node_id(cls)[:-2] if cls is not None else "")

    def dotted(self, cls: ast.ClassDef) -> str:
        return ".".join(c.name for c in self.chains[id(cls)])

    def params(self, cls: ast.ClassDef | None) -> list[str]:
        if self._module_marks is None:  # (read once: a module of 5,000 classes asks 5,000 times)
            self._module_marks = pytestmark_of(self.tree.body)
        chain = self.chains[id(cls)] if cls is not None else ()
        return param_names(scope_marks(chain, self.tree, self._module_marks))

    def tests(self, rel: str, left_out: tuple[str, ...] = ()) -> list[Test]:
        """The module's tests (those of nested classes too) but those ``left_out`` deselects (node ids)."""
        tests: list[Test] = []
        c = self.collecting
        for top, node in enumerate(self.tree.body):
            if c.is_test_func(node):
                tests.append((top, None, top, node))  # type: ignore[arg-type]
            elif c.is_test_class(node):
                tests += [(top, k[-1], k[-1].body.index(sub), sub) for _, k, sub in c.class_tests([node])]
        return [t for t in tests if not deselected(f"{rel}::{self.node_id(t[1])}{t[3].name}", left_out)]


def param_names(marks: list[ast.expr]) -> list[str]:
    """The argument names ``parametrize`` marks among ``marks`` give every test they apply to."""
    out: list[str] = []
    for mark in marks:
        target = mark.func if isinstance(mark, ast.Call) else None
        if not (isinstance(target, ast.Attribute) and target.attr == "parametrize" and mark.args):  # type: ignore[union-attr]
            continue
        first = mark.args[0]  # type: ignore[union-attr]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            out += [n.strip() for n in first.value.split(",") if n.strip()]
        elif isinstance(first, ast.List | ast.Tuple):
            out += [e.value for e in first.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return list(dict.fromkeys(out))


def scope_marks(
    chain: tuple[ast.ClassDef, ...], module: ast.Module, module_marks: list[ast.expr] | None = None
) -> list[ast.expr]:
    """The marks every test of a scope gets: the module's ``pytestmark`` (``module_marks``, when read
    already), its classes' decorators and ``pytestmark``."""
    marks = list(pytestmark_of(module.body) if module_marks is None else module_marks)
    for cls in chain:
        marks += [*cls.decorator_list, *pytestmark_of(cls.body)]
    return marks


def skipped(node: ast.ClassDef | ast.FunctionDef) -> bool:
    """Is the class (or test) skipped or expected to fail by its marks -- ``@unittest.skipUnless(...)``,
    ``@pytest.mark.skipif(...)``, ``xfail``, a ``pytestmark`` with one -- so that a canary in it would
    never run (cachetools' threading tests)? A canary copying a test leaves such marks out (:func:`skips`)."""
    return any(skips(m) for m in [*node.decorator_list, *pytestmark_of(node.body)])


def skips(mark: ast.expr) -> bool:
    return any(w in ast.unparse(mark).lower() for w in ("skip", "xfail", "expectedfailure"))
