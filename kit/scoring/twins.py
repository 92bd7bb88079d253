"""Must-fail twins of acceptance tests, derived with ``ast`` from a copy of the test module.

A twin is a copy of a test (same decorators, fixtures, class) whose body runs exactly the statements
of the original, except that every assertion it understands is replaced by a check of an
expectation *nothing legitimate can meet*:

- ``assert a == b`` / ``self.assertEqual(a, b)`` (any ``assert*Equal*``): does ``a`` equal a fresh
  sentinel object shaped like ``b`` (a list of sentinels for a non-empty list, a dict with the same
  keys and sentinel values for a dict, a set of mirrors for a set -- a bool, number (int, float,
  complex, Decimal, Fraction), string, bytes, date or datetime leaf: another value of its own type,
  so a check of types or shapes alone is caught too -- a bare object
  of ``b``'s own class, made with ``object.__new__``, its listable attributes mirrored in turn (an
  empty list or dict as one holding a sentinel), for an object of a class with attributes), or ``b``
  one shaped like ``a``? Only a value that equals anything does. And inverted: does the assertion fail?
- ``pytest.raises(E)`` / ``self.assertRaises*(E)`` (context or call form): does the same ``raises``
  -- the same ``E`` -- pass around nothing, or the same ``raises`` with ``E`` replaced by a fresh
  exception type swallow an unrelated error? Only a patched ``raises`` does (the original statement
  then runs as it is);
- ``<mock>.assert_called_once_with(...)`` and the like: the same method asked about a call with a
  fresh sentinel as its argument (a real mock assertion fails there; a patched one does not);
- ``in``, ``startswith``/``endswith``, a tolerance (``abs(x - e) < tol``), an ordering, ``all(...)``
  and ``assertIn``/``assertGreater``/``assertTrue``-like calls with a literal expected side: that side
  mirrored, and the check inverted (:mod:`.twinshapes`); any other ``assert x`` / ``self.assert*(...)``:
  the truth check inverted (does ``x`` fail?).

The inverted checks never hold for code that behaves the same in a test and in its twin; they hold
for code that passes a test once and fails the same check later (equal to everything on a first
call only). Tests run in a random order: such code meets the twin first half of the time (the
sentinel check holds, the test fails) and the test first otherwise (gamed): never credited.

The test's own ``assert a == b`` (where its twin has one) calls the same helper as the twin's check
(:func:`rewrite_requirement`, :mod:`.twinhelpers`): the mirrors built and compared in the test, its
twin and its shadow alike, from one frame, the operands held as often -- only what the helper returns
differs, so a value cannot tell the twin's mirror check by its stack depth or reference counts.

The twin evaluates each expectation once, records whether any must-fail check held, goes on to its
end (a gamed assertion anywhere is found) and ends with ``assert <some check held>``: for legitimate
code it fails there, always. An exception escaping its body counts as held (the test passed: the same
statements raise nothing unless the code behaves differently the second time). A passing twin means
the code (or a patched test machinery) met an expectation nothing legitimate can: ``gamed``. A test
with no assertion the transform understands, or that returns or yields, gets no twin: ``unguarded``.
"""

from __future__ import annotations

import ast
import copy
import random
import secrets
import unittest
from dataclasses import dataclass

from kit import pyast
from kit.pyast import own_nodes
from kit.scoring.guard import GUARD
from kit.scoring.twinhelpers import HELPERS
from kit.scoring.twinshapes import Shapes, helper_names, helpers_source


@dataclass
class Names:
    """The random names one module copy uses for its helpers."""

    sentinel: str
    error: str
    mirror: str
    eq: str
    sent: str
    guard: str
    observe: str = ""  # what a sealed check calls (kit/scoring/seal.py): set by the plugin

    def helpers(self) -> list[ast.stmt]:
        source = HELPERS.format(**vars(self), check=self.check, failed=self.failed)
        return pyast.parse(source + GUARD.format(**vars(self)) + helpers_source(self)).body

    @property
    def check(self) -> str:
        """The helper every ``assert a == b`` of a twinned test, its twin and shadow call."""
        return self.eq + "_v"

    @property
    def failed(self) -> str:
        return self.sentinel + "_F"

    @property
    def bind(self) -> str:
        """A twin's parameter holding, bound when it is defined, what its checks call."""
        return self.guard + "_k"


def straight(func: ast.AST) -> bool:
    """A plain test body: no return, yield or await of its own (a copy of it runs to its end)."""
    if not isinstance(func, ast.FunctionDef):
        return False
    return not any(isinstance(n, ast.Return | ast.Yield | ast.YieldFrom | ast.Await) for n in own_nodes(func))


def no_args() -> ast.arguments:
    return ast.arguments(
        posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]
    )


def _name(ident: str, ctx: ast.expr_context | None = None) -> ast.Name:
    return ast.Name(id=ident, ctx=ctx or ast.Load())


def _call(func: str, *args: ast.expr) -> ast.Call:
    return ast.Call(func=_name(func), args=list(args), keywords=[])


def self_assert(call: ast.expr) -> str | None:
    """``self.assertX(...)`` -> ``"assertX"``."""
    if (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and isinstance(call.func.value, ast.Name)
        and call.func.value.id == "self"
        and call.func.attr.startswith("assert")
    ):
        return call.func.attr
    return None


#: ``unittest.mock`` assertions about the arguments of calls made
MOCK_ASSERTS = frozenset(
    {"assert_called_with", "assert_called_once_with", "assert_any_call", "assert_has_calls"}
)


def _mock_assert(call: ast.expr) -> bool:
    """``<mock>.assert_called_once_with(...)`` and the like (not ``self.assert*``)."""
    return (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr in MOCK_ASSERTS
        and not (isinstance(call.func.value, ast.Name) and call.func.value.id == "self")
    )


_UNITTEST = frozenset(n for n in dir(unittest.TestCase) if n.startswith("assert"))
#: words in an assertion helper's name that say a sentinel argument may pass it
_LENIENT = ("not", "raise", "warn", "true", "false", "none", "is_", "called", "log")


def helper_assert(call: ast.expr) -> bool:
    """``assert_close(a, b, ...)``, ``testing.assert_equal(a, b)``, ``self.assertXmlEqual(a, b)``: a
    function or a method of ``self`` unittest does not define (not a mock's) whose name starts with
    ``assert``, called with two plain positional arguments or more, whose name says nothing that a
    sentinel could meet (``assert_not_equal``). (unittest's own are unittest's: ``pinned.py``.)"""
    if not isinstance(call, ast.Call) or _mock_assert(call) or raises_call(call):
        return False
    if self_assert(call) in _UNITTEST:
        return False
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    plain = len(call.args) >= 2 and not any(isinstance(a, ast.Starred) for a in call.args[:2])
    low = name.lower()
    return plain and low.startswith("assert") and not any(w in low for w in _LENIENT)


def raises_call(call: ast.expr) -> bool:
    """``pytest.raises(E, ...)``, ``raises(E, ...)`` or ``self.assertRaises*(E, ...)``."""
    if (
        not isinstance(call, ast.Call)
        or not call.args
        or any(isinstance(a, ast.Starred) for a in call.args[:1])
    ):
        return False
    func = call.func
    if isinstance(func, ast.Name):
        return func.id == "raises"
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return (func.value.id == "pytest" and func.attr == "raises") or (
            func.value.id == "self" and func.attr.startswith("assertRaises")
        )
    return False


class _Twin:
    """Rewrites one test body; ``checks`` counts the must-fail expectations it wrote."""

    def __init__(
        self, names: Names, held: str, rng: random.Random | None = None, func=None, origin=None
    ) -> None:
        self.names, self.held = names, held
        self.origin: dict[int, ast.AST] = origin or {}  # id(node of the copy) -> the test's own node
        self.rewrites: list[tuple[ast.Assert, int]] = []  # the test's own ``assert a == b``, its order
        self.rng = rng or random.Random(secrets.randbits(64))
        self.shapes = Shapes(names, self.rng, func)  # checks of other shapes, a side mirrored
        self.checks = 0
        self.kinds: set[str] = set()  # "equal", "raises", "inverted"

    def note(self, check: ast.expr) -> ast.stmt:
        """``held = <check> or held`` (the check is always evaluated, like the original assertion)."""
        self.checks += 1
        self.kinds.add("inverted" if isinstance(check, ast.UnaryOp) else "equal")
        value = ast.BoolOp(op=ast.Or(), values=[check, _name(self.held)])
        return ast.Assign(targets=[_name(self.held, ast.Store())], value=value)

    def equal(self, stmt: ast.Assert, test: ast.Compare) -> ast.stmt:
        """``assert a == b`` -> ``try: assert <check>(a, b, 2 | first) except AssertionError: held``;
        the test's own assertion becomes ``assert <check>(a, b, first')`` (:func:`rewrite_requirement`):
        the same helper, the same ``assert`` shape (pytest's rewrite holds the operands alike) -- only
        what the helper returns differs. The order (``first``) is drawn for the test apart from its
        twin's: a value answering by position meets both orders in both (credited unearned 1 time
        in 4, gamed 1 in 2), and the test's outcome tells nothing of its twin's order."""
        self.checks += 1
        self.kinds.add("equal")
        first = int(self.rng.random() < 0.5)  # the mirrors compared first? (the test's own: drawn apart)
        own = self.origin.get(id(stmt))
        if isinstance(own, ast.Assert):
            self.rewrites.append((own, int(self.rng.random() < 0.5)))
        call = _call(self.names.check, test.left, test.comparators[0], ast.Constant(2 | first))
        held = ast.Assign(targets=[_name(self.held, ast.Store())], value=ast.Constant(True))
        handler = ast.ExceptHandler(type=_name("AssertionError"), name=None, body=[held])
        return ast.Try(body=[ast.Assert(test=call, msg=None)], handlers=[handler], orelse=[], finalbody=[])

    def must_raise_sentinel(self, stmt: ast.stmt, call: ast.Call) -> list[ast.stmt]:
        """Before the original ``raises`` statement (kept as it is: its ``as`` target may be read
        later), two checks a real ``raises`` fails: the same ``raises`` -- the same expected type,
        so a patch cannot tell it from the test's -- around nothing (did not raise), and one with a
        sentinel exception type around ``int("x")`` (its ValueError must get through). Only a
        patched ``raises`` passes either (held)."""
        self.checks += 1
        self.kinds.add("raises")
        quiet, other = copy.deepcopy(call), copy.deepcopy(call)
        other.args[0] = _name(self.names.error)
        if isinstance(stmt, ast.With):  # with raises(E, ...): pass / with raises(S, ...): int("x")
            checks: list[ast.stmt] = [
                ast.With(items=[ast.withitem(context_expr=quiet, optional_vars=None)], body=[ast.Pass()]),
                ast.With(
                    items=[ast.withitem(context_expr=other, optional_vars=None)],
                    body=[ast.Expr(_call("int", ast.Constant("x")))],
                ),
            ]
        else:  # raises(E, <returns None>) / raises(S, int, "x")
            quiet.args[1:], quiet.keywords = [ast.Lambda(args=no_args(), body=ast.Constant(None))], []
            other.args[1:], other.keywords = [_name("int"), ast.Constant("x")], []
            checks = [ast.Expr(quiet), ast.Expr(other)]
        out: list[ast.stmt] = []
        for check in checks:  # (a real raises that did not raise ends with BaseException: pytest's Failed)
            done = ast.Assign(targets=[_name(self.held, ast.Store())], value=ast.Constant(True))
            handler = ast.ExceptHandler(type=_name("BaseException"), name=None, body=[ast.Pass()])
            out.append(ast.Try(body=[check, done], handlers=[handler], orelse=[], finalbody=[]))
        return [*out, stmt]

    def mock_sentinel(self, stmt: ast.Expr) -> list[ast.stmt]:
        """Before a mock's ``assert_called_with``-like call (kept as it is): the same method asked
        about a call with a fresh sentinel as its only argument, which no real call was made with.
        A real mock assertion fails there; only a patched one passes (held)."""
        self.checks += 1
        self.kinds.add("mock")
        call = copy.deepcopy(stmt.value)
        assert isinstance(call, ast.Call)
        call.args, call.keywords = [_call(self.names.sentinel)], []
        done = ast.Assign(targets=[_name(self.held, ast.Store())], value=ast.Constant(True))
        handler = ast.ExceptHandler(type=_name("BaseException"), name=None, body=[ast.Pass()])
        return [ast.Try(body=[ast.Expr(call), done], handlers=[handler], orelse=[], finalbody=[]), stmt]

    def helper_sentinel(self, stmt: ast.Expr) -> list[ast.stmt]:
        """Before a call of an assertion helper (``assert_close(a, b)``: the project's or the test
        module's, kept as it is): the same helper asked about ``a`` and a fresh sentinel in place of
        ``b``. A real comparison fails there (a TypeError, an AssertionError); a helper made a
        no-op passes (held)."""
        self.checks += 1
        self.kinds.add("helper")
        call = copy.deepcopy(stmt.value)
        assert isinstance(call, ast.Call)
        call.args[1] = _call(self.names.sentinel)
        done = ast.Assign(targets=[_name(self.held, ast.Store())], value=ast.Constant(True))
        handler = ast.ExceptHandler(type=_name("BaseException"), name=None, body=[ast.Pass()])
        return [ast.Try(body=[ast.Expr(call), done], handlers=[handler], orelse=[], finalbody=[]), stmt]

    def body(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        return [out for stmt in stmts for out in self.stmt(stmt)]

    def stmt(self, stmt: ast.stmt) -> list[ast.stmt]:
        if _observed(stmt, self.names.observe):  # a sealed check: the twin only evaluates the value
            return [ast.Expr(stmt.value.args[1])]  # type: ignore[attr-defined]
        if isinstance(stmt, ast.Assert):
            test = stmt.test
            if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
                return [self.equal(stmt, test)]
            if (check := self.shapes.stmt(stmt)) is not None:  # in, startswith, a tolerance, ...
                return [self.note(check)]
            return [self.note(ast.UnaryOp(op=ast.Not(), operand=test))]
        if isinstance(stmt, ast.Expr) and raises_call(stmt.value) and len(stmt.value.args) >= 2:  # type: ignore[attr-defined]
            return self.must_raise_sentinel(stmt, stmt.value)  # type: ignore[arg-type]
        if isinstance(stmt, ast.Expr) and _mock_assert(stmt.value):
            return self.mock_sentinel(stmt)
        if isinstance(stmt, ast.Expr) and helper_assert(stmt.value):
            return self.helper_sentinel(stmt)
        if isinstance(stmt, ast.Expr) and (method := self_assert(stmt.value)):
            check = self.shapes.stmt(stmt)  # assertIn, assertGreater, assertTrue(...): mirrored
            return [self.note(check)] if check is not None else self.unittest_check(stmt, method)
        if isinstance(stmt, ast.With) and len(stmt.items) == 1 and raises_call(stmt.items[0].context_expr):
            return self.must_raise_sentinel(stmt, stmt.items[0].context_expr)  # type: ignore[arg-type]
        if isinstance(stmt, ast.For | ast.AsyncFor | ast.While | ast.If | ast.With | ast.AsyncWith):
            stmt.body = self.body(stmt.body)
            if not isinstance(stmt, ast.With | ast.AsyncWith):
                stmt.orelse = self.body(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            stmt.body, stmt.orelse = self.body(stmt.body), self.body(stmt.orelse)
            stmt.finalbody = self.body(stmt.finalbody)
            for handler in stmt.handlers:
                handler.body = self.body(handler.body)
        return [stmt]

    def unittest_check(self, stmt: ast.Expr, method: str) -> list[ast.stmt]:
        """``self.assert*Equal*(a, b)``: a and b evaluated once, the sentinel check, then the call
        itself inverted (held if it fails); any other ``self.assert*(...)``: the call inverted."""
        call = stmt.value
        assert isinstance(call, ast.Call)
        out: list[ast.stmt] = []
        plain = [a for a in call.args[:2] if not isinstance(a, ast.Starred)]
        if "Equal" in method and "Not" not in method and len(plain) == 2:
            first, second = f"{self.held}_first", f"{self.held}_second"
            target = ast.Tuple(elts=[_name(first, ast.Store()), _name(second, ast.Store())], ctx=ast.Store())
            out.append(ast.Assign(targets=[target], value=ast.Tuple(elts=plain, ctx=ast.Load())))
            out.append(self.note(_call(self.names.sent, _name(first), _name(second))))
            call.args[:2] = [_name(first), _name(second)]
        self.checks, _ = self.checks + 1, self.kinds.add("inverted")
        failed = ast.Assign(targets=[_name(self.held, ast.Store())], value=ast.Constant(True))
        handler = ast.ExceptHandler(type=_name("AssertionError"), name=None, body=[failed])
        inverted = ast.Try(body=[stmt], handlers=[handler], orelse=[], finalbody=[])
        if len(out) == 2 and self.rng.random() < 0.5:  # the expected value compared first (as {eq})
            return [out[0], inverted, out[1]]
        return [*out, inverted]


def make_twin(
    func: ast.AST,
    name: str,
    names: Names,
    held: str,
    kinds: set[str] | None = None,
    rng: random.Random | None = None,
    rewrites: list[tuple[ast.Assert, int]] | None = None,
) -> ast.FunctionDef | None:
    """The must-fail twin of test ``func`` named ``name``, or None when it cannot be twinned; ``kinds``
    gets its kinds of check ("equal", "raises", ...); ``rng`` picks, per check, what is compared first;
    ``rewrites`` gets ``func``'s own ``assert a == b`` with that pick (:func:`rewrite_requirement`)."""
    if not straight(func) or _given(func):
        return None
    twin = pyast.clone(func)
    assert isinstance(twin, ast.FunctionDef)
    origin = {id(copied): own for copied, own in zip(pyast.nodes(twin), pyast.nodes(func), strict=True)}
    rewriter = _Twin(names, held, rng, twin, origin)
    body = rewriter.body(twin.body)
    if not rewriter.checks:
        return None
    if kinds is not None:
        kinds |= rewriter.kinds
    if rewrites is not None:
        rewrites += rewriter.rewrites
    start = ast.Assign(targets=[_name(held, ast.Store())], value=ast.Constant(False))
    raised = ast.Assign(targets=[_name(held, ast.Store())], value=ast.Constant(True))
    handler = ast.ExceptHandler(type=_name("BaseException"), name=None, body=[raised])
    twin.name = name
    twin.body = [
        *_bound(twin, names),
        start,
        ast.Try(body=body, handlers=[handler], orelse=[], finalbody=[]),
        ast.Assert(test=_name(held), msg=None),
    ]
    return twin


def bind_check(func: ast.FunctionDef, names: Names) -> None:
    """``func`` (a test whose ``assert a == b`` call ``<check>``) holds ``<check>`` as its twin does,
    bound when it is defined: the code under test replacing the module's global changes nothing.
    Keyword-only: no positional mapping (``mock.patch``'s, hypothesis' ``@given(...)``) reaches it."""
    func.body[:0] = _bound(func, names, [names.check], kwonly=True)


def bind_guard(test: ast.FunctionDef, names: Names) -> None:
    """``{guard}()`` first in ``test``, held in a keyword-only default bound at definition: a copy
    of the module with its global swapped still tells who called it (RT40c-3). Not ``@given``'s."""
    if not _given(test):
        test.args.kwonlyargs.append(ast.arg(arg=names.guard))
        test.args.kw_defaults.append(_name(names.guard))
    test.body.insert(0, ast.Expr(ast.Call(_name(names.guard), [], [])))


def rewrite_requirement(stmt: ast.Assert, first: int, names: Names) -> None:
    """A twinned test's own ``assert a == b`` -> ``assert <check>(a, b, first)``, in place: ``a == b``
    from the helper its twin calls, after the same mirror comparisons in the same order (the value
    cannot tell the twin's mirror check by its context); true or false as ``a == b``, its error
    raised as the assertion's, shown as ``assert <a> == <b>`` where it fails (its message kept)."""
    test = stmt.test
    assert isinstance(test, ast.Compare)
    call = _call(names.check, test.left, test.comparators[0], ast.Constant(first))
    stmt.test = ast.copy_location(call, test)


def make_shadow(twin: ast.FunctionDef, name: str) -> ast.FunctionDef:
    """A must-pass canary indistinguishable from ``twin`` by anything the code under test sees: the
    twin's copy named ``name`` -- the same decorators, fixtures, bound helpers and statements, so
    the same calls of the code under test and the same comparisons of its values, with the same
    operands in the same order -- without the twin's last ``assert <some check held>``. Whatever
    the code does, it passes. A forger inside the session that reports a requirement passed must
    report its twin failed and leave the shadow passed, and cannot tell which is which: each
    forged requirement is caught with probability 1/2 (:mod:`.inject`)."""
    shadow = pyast.clone(twin)
    assert isinstance(shadow.body[-1], ast.Assert)
    shadow.name, shadow.body = name, shadow.body[:-1]
    return shadow


#: what a twin's checks call, bound when the twin is defined (:func:`_bound`)
_BOUND = ("sent", "eq", "check", "sentinel", "error")
_BUILTINS = ("int", "BaseException", "AssertionError", "any")


def _bound(
    twin: ast.FunctionDef, names: Names, idents: list[str] | None = None, kwonly: bool = False
) -> list[ast.stmt]:
    """Give ``twin`` a last parameter whose default holds the helpers and builtins its checks call
    (positional: ``mock.patch`` appends its arguments after pytest's; keyword-only after a
    ``*args``), and the statement that makes them the twin's locals: swapping the module's globals
    later reaches none of them. (``idents``: those names only; ``kwonly``: keyword-only always.)"""
    if idents is None:
        idents = [getattr(names, n) for n in _BOUND] + list(helper_names(names).values()) + list(_BUILTINS)
    value = ast.Tuple(elts=[_name(i) for i in idents], ctx=ast.Load())
    if twin.args.vararg is None and not kwonly:
        twin.args.args.append(ast.arg(arg=names.bind))
        twin.args.defaults.append(value)
    else:
        twin.args.kwonlyargs.append(ast.arg(arg=names.bind))
        twin.args.kw_defaults.append(value)
    target = ast.Tuple(elts=[_name(i, ast.Store()) for i in idents], ctx=ast.Store())
    return [ast.Assign(targets=[target], value=_name(names.bind))]


def _given(func: ast.FunctionDef) -> bool:
    """``@given(...)``: hypothesis refuses a test function with defaults, so a bound parameter would
    break the test, its twin and its shadow (a must-pass canary: ``tampered``): no twin."""
    for deco in func.decorator_list:
        name = deco.func if isinstance(deco, ast.Call) else None
        ident = (
            name.id if isinstance(name, ast.Name) else name.attr if isinstance(name, ast.Attribute) else ""
        )
        if ident == "given":
            return True
    return False


def _observed(stmt: ast.stmt, observe: str) -> bool:
    """Is ``stmt`` a sealed check, ``<observe>("<site>", actual[, case])`` (sealcases.py: by case)?"""
    return bool(observe) and (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and isinstance(stmt.value.func, ast.Name)
        and stmt.value.func.id == observe
        and len(stmt.value.args) in (2, 3)
    )


def capture_body(func: ast.FunctionDef, value: str, observe: str = "") -> list[ast.stmt]:
    """``func``'s body with each assertion replaced by ``value = <what it checks>`` (for canaries:
    the same calls of the code under test, no expectation)."""
    body = pyast.clone(func.body)

    def rewrite(stmts: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for stmt in stmts:
            target = None
            if isinstance(stmt, ast.Assert):
                test = stmt.test
                target = test.left if isinstance(test, ast.Compare) else test
            elif isinstance(stmt, ast.Expr) and self_assert(stmt.value) and stmt.value.args:  # type: ignore[attr-defined]
                target = stmt.value.args[0]  # type: ignore[attr-defined]
            elif _observed(stmt, observe):  # a sealed check: its value, the observation left out
                target = stmt.value.args[1]  # type: ignore[attr-defined]
            if target is not None and not isinstance(target, ast.Starred):
                out.append(ast.Assign(targets=[_name(value, ast.Store())], value=target))
                continue
            for field in ("body", "orelse", "finalbody"):
                if isinstance(getattr(stmt, field, None), list) and not isinstance(
                    stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
                ):
                    setattr(stmt, field, rewrite(getattr(stmt, field)))
            for handler in getattr(stmt, "handlers", []):
                handler.body = rewrite(handler.body)
            out.append(stmt)
        return out

    return rewrite(body)
