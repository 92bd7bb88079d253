"""Sealed checks: equality assertions whose expected value never enters the scoring session.

An acceptance test's ``assert actual == expected`` (either side, or ``self.assertEqual`` and its
list/tuple/dict/set variants) whose expected side the kit can evaluate on its own -- literals,
containers of them, ``date``/``datetime``/``time``/``timedelta`` calls with literal arguments, and
local names assigned once from such an expression and used nowhere else -- is **sealed**: in the
module copy the session runs, the assertion becomes ``<observe>("<site>", actual)`` and the
expected value (with the assignments that held it) is gone. The plugin sends a digest of the
actual value's canonical form (:func:`kit.scoring.plugin.canonical`); the kit compares it
with the expected value's digest, outside the session.

So nothing inside the session -- no frame, no file, no patched report -- holds what a sealed check
expects: forging its outcome means computing the right value, which is doing the task. A forged
or missing observation, or one that does not match, fails the requirement whatever the session
says of the test itself. The canonical form follows ``==`` on the plain types (``1 == 1.0 ==
True``, sets and dicts unordered, a tuple never equal to a list); a subclass of a plain type counts
as its base's contents, whatever its own ``__eq__`` says (a tomlkit Table checked against a dict
literal; a str rigged to equal everything is judged by its characters); any other object has no
canonical form and meets no expectation. An expectation with no faithful canonical form (a complex number,
``pytest.approx``, an object of the code under test) is left as it was: an in-process check, twinned
as before (:mod:`kit.scoring.twins`).

Membership in a literal container (``x in (1, 2)``, ``assertIn``, their ``not`` forms) and identity
with ``None``/``True``/``False`` (``is``, ``assertIsNone``, ...) are sealed the same way, and an
expected value may use arithmetic, formatting and a few builtins on literals: :mod:`.sealshapes`.
An expected value that changes by ``parametrize`` case or literal loop iteration: :mod:`.sealcases`.

A sealed check after which the test always goes on (not inside a loop, ``if``, ``try`` or
``raises`` block) is **required**: a test that passed without sending it fails. Where the original
stopped at a failed assertion, a sealed test goes on to its end (nothing in the session knows the
check failed); the requirement still fails.
"""

from __future__ import annotations

import ast
import datetime
import hashlib
import json
from dataclasses import dataclass

from kit import pyast
from kit.scoring.observe import canonical, shown
from kit.scoring.sealshapes import (
    Unsealable,
    arith,
    builtin,
    identity_name,
    is_str_format,
    joined,
    members,
    method,
    shape,
    str_format,
)

#: ``self.assert*`` methods that hold exactly when ``first == second``
EQUAL_METHODS = frozenset(
    {
        "assertEqual",
        "assertEquals",
        "assertListEqual",
        "assertTupleEqual",
        "assertDictEqual",
        "assertSetEqual",
    }
)
_DATETIME = {
    "date": datetime.date,
    "datetime": datetime.datetime,
    "time": datetime.time,
    "timedelta": datetime.timedelta,
}
_BUILTINS = {"set": set, "frozenset": frozenset, "tuple": tuple, "list": list, "dict": dict}
_BUILTINS |= {"range": range, "sorted": sorted}
MAX_CANONICAL = 1_000_000  # characters of an expected value's canonical form


__all__ = ["Site", "Unsealable", "digest", "module_names", "seal_test"]


@dataclass
class Site:
    key: str  # the requirement (test function) it belongs to
    digest: str  # of the expected value's canonical form ("" for the other kinds)
    expected: str  # its short repr, for failure messages
    required: bool  # the test always reaches it
    #: "eq"; "in": membership in a literal container; "is": identity with None/True/False
    #: (:mod:`.sealshapes`)
    kind: str = "eq"
    among: frozenset[str] = frozenset()  # "in": the elements' digests; "is": the singleton's name
    negated: bool = False  # ``not in``, ``is not``
    #: "cases": the check of each case (:mod:`.sealcases`), by the case number the observation names
    cases: tuple[Site, ...] = ()

    def accepts(self, value: str, ident: str, case: object = None) -> bool:
        """Does an observation (its digest, its ``ident``: :func:`.observe.observer`; the case it is
        of, for a check by case) meet the check?"""
        if self.kind == "cases":
            return (
                type(case) is int and 0 <= case < len(self.cases) and self.cases[case].accepts(value, ident)
            )
        if case is not None:
            return False
        if self.kind == "is":
            return (ident in self.among) != self.negated
        if self.kind == "in":
            return ident != "-" and value not in self.among if self.negated else value in self.among
        return value == self.digest


def digest(form: object) -> str:
    text = json.dumps(form, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def module_names(tree: ast.Module) -> dict[str, object]:
    """Names the module binds to the callables an expected value may use (``from datetime import
    date``, ``import datetime``); the builtins only if the module never rebinds them."""
    bound: set[str] = set()
    imported: list[str] = []
    for n in pyast.nodes(tree):  # (once: a walk of a large test module is a tenth of its injection)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store | ast.Del):
            bound.add(n.id)
        elif isinstance(n, ast.FunctionDef | ast.ClassDef):
            bound.add(n.name)
        elif isinstance(n, ast.Import | ast.ImportFrom):
            imported += [a.asname or a.name for a in n.names]
    names: dict[str, object] = {k: v for k, v in _BUILTINS.items() if k not in bound}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "datetime" and not node.level:
            for alias in node.names:
                if alias.name in _DATETIME:
                    names[alias.asname or alias.name] = _DATETIME[alias.name]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "datetime":
                    names[alias.asname or "datetime"] = _DATETIME
    for name in imported:  # bound twice (another import, a nested one): not ours to trust
        if imported.count(name) > 1 or name in bound:
            names.pop(name, None)
    return names


class _Eval:
    """Evaluates an expected-value expression in the kit (never the code under test)."""

    def __init__(self, names: dict[str, object], env: dict[str, ast.expr]) -> None:
        self.names = names
        self.env = env
        self.depth = 0

    def __call__(self, node: ast.expr) -> object:
        self.depth += 1
        try:
            if self.depth > 60:
                raise Unsealable
            return self.eval(node)
        finally:
            self.depth -= 1

    def eval(self, node: ast.expr) -> object:  # noqa: PLR0911 - one case per node kind
        if isinstance(node, ast.Constant):
            if isinstance(node.value, complex) or node.value is Ellipsis:
                raise Unsealable
            return node.value
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            if any(isinstance(e, ast.Starred) for e in node.elts):
                raise Unsealable
            items = [self(e) for e in node.elts]
            return (
                items
                if isinstance(node, ast.List)
                else tuple(items)
                if isinstance(node, ast.Tuple)
                else set(items)
            )
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                raise Unsealable
            return {self(k): self(v) for k, v in zip(node.keys, node.values, strict=True)}  # type: ignore[arg-type]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            value = self(node.operand)
            if type(value) not in (int, float):
                raise Unsealable
            return -value if isinstance(node.op, ast.USub) else +value
        if isinstance(node, ast.BinOp):
            left, right = self(node.left), self(node.right)
            if not isinstance(node.op, ast.Add | ast.Sub):  # * / // % **: bounded (sealshapes)
                return arith(node.op, left, right)
            plain = (type(left), type(right))
            if all(t in (int, float) for t in plain) or (
                plain in ((str, str), (bytes, bytes), (list, list), (tuple, tuple))
                and isinstance(node.op, ast.Add)
                and len(left) + len(right) <= MAX_CANONICAL  # type: ignore[arg-type]
            ):
                return left + right if isinstance(node.op, ast.Add) else left - right  # type: ignore[operator]
            raise Unsealable
        if isinstance(node, ast.JoinedStr):
            return joined(node, self)
        if isinstance(node, ast.Name) and node.id in self.env:
            return self(self.env[node.id])
        if isinstance(node, ast.Call):
            return self.call(node)
        raise Unsealable

    def call(self, node: ast.Call) -> object:
        if is_str_format(node):
            return str_format(node, self)
        func: object = None
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            raise Unsealable
        if isinstance(node.func, ast.Name):
            func = self.names.get(node.func.id)
        elif isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
            module = self.names.get(node.func.value.id)
            func = module.get(node.func.attr) if isinstance(module, dict) else None
        if func is None and isinstance(node.func, ast.Attribute) and not node.keywords:
            receiver = self(node.func.value)  # a literal string's method (sealshapes.method)
            return method(receiver, node.func.attr, [self(a) for a in node.args])
        if func is None or isinstance(func, dict):
            raise Unsealable
        if func in _BUILTINS.values():
            if node.keywords:
                raise Unsealable
            return builtin(func, [self(a) for a in node.args])
        args = [self(a) for a in node.args]
        kwargs = {k.arg: self(k.value) for k in node.keywords}
        if func in _DATETIME.values() and not all(type(a) in (int, float) for a in [*args, *kwargs.values()]):
            raise Unsealable
        try:
            return func(*args, **kwargs)  # type: ignore[operator]
        except Exception as exc:  # noqa: BLE001 - a bad literal date: not ours to seal
            raise Unsealable from exc


def _pair(stmt: ast.stmt) -> tuple[ast.expr, ast.expr] | None:
    """The two sides of an equality assertion statement, or None."""
    if isinstance(stmt, ast.Assert):
        test = stmt.test
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
            return test.left, test.comparators[0]
        return None
    if not isinstance(stmt, ast.Expr) or not isinstance(call := stmt.value, ast.Call):
        return None
    func = call.func
    if not (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id == "self"
        and func.attr in EQUAL_METHODS
    ):
        return None
    if len(call.args) not in (2, 3) or call.keywords or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    return call.args[0], call.args[1]


def _walk_sites(
    stmts: list[ast.stmt], required: bool, out: list[tuple[ast.stmt, bool]], evaluate: _Eval
) -> None:
    """Every assertion statement of a test body with: does the test always reach it? Not inside an
    ``if``, an ``except`` handler or a ``raises`` block, nor a loop over anything but literal data
    (a loop over the code's output may run zero times)."""
    from kit.scoring.twins import raises_call

    for stmt in stmts:
        if _pair(stmt) is not None or shape(stmt) is not None:
            out.append((stmt, required))
        elif isinstance(stmt, ast.With | ast.AsyncWith):
            plain = not any(raises_call(i.context_expr) for i in stmt.items)
            _walk_sites(stmt.body, required and plain, out, evaluate)
        elif isinstance(stmt, ast.For | ast.AsyncFor):
            _walk_sites(stmt.body, required and _literal_data(stmt.iter, evaluate), out, evaluate)
            _walk_sites(stmt.orelse, required, out, evaluate)
        elif isinstance(stmt, ast.While | ast.If):
            _walk_sites(stmt.body, False, out, evaluate)
            _walk_sites(stmt.orelse, False, out, evaluate)
        elif isinstance(stmt, ast.Try):
            for block in (stmt.body, stmt.orelse, stmt.finalbody):
                _walk_sites(block, required, out, evaluate)
            for handler in stmt.handlers:
                _walk_sites(handler.body, False, out, evaluate)


def _literal_data(node: ast.expr, evaluate: _Eval) -> bool:
    """Is ``node`` non-empty literal data (or ``range`` of literal numbers, not empty)?"""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "range"
        and node.args
        and not node.keywords
        and all(isinstance(a, ast.Constant) and type(a.value) is int for a in node.args)
    ):
        return len(range(*(a.value for a in node.args))) > 0  # type: ignore[misc]
    try:
        value = evaluate(node)
    except (Unsealable, RecursionError):
        return False
    return isinstance(value, list | tuple | set | dict | str | bytes) and len(value) > 0


def _literal_locals(func: ast.FunctionDef, evaluate: _Eval) -> dict[str, ast.Assign]:
    """Names assigned exactly once in ``func``, by a plain ``name = <expression the kit evaluates>``."""
    stores: dict[str, int] = {}
    for node in ast.walk(func):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            stores[node.id] = stores.get(node.id, 0) + 1
        elif isinstance(node, ast.arg):
            stores[node.arg] = stores.get(node.arg, 0) + 2
    found: dict[str, ast.Assign] = {}
    for node in ast.walk(func):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(target := node.targets[0], ast.Name)
            and stores.get(target.id) == 1
        ):
            found[target.id] = node
    evaluate.env = {name: a.value for name, a in found.items()}
    good: dict[str, ast.Assign] = {}
    for name, assign in found.items():
        try:
            evaluate(assign.value)
            good[name] = assign
        except (Unsealable, RecursionError):
            pass
    evaluate.env = {name: a.value for name, a in good.items()}
    return good


def seal_test(
    func: ast.FunctionDef, key: str, names: dict[str, object], observe: str, next_site: list[int]
) -> dict[str, Site]:
    """Seal what can be sealed in test ``func`` (rewritten in place); the sealed sites by id."""
    evaluate = _Eval(names, {})
    local = _literal_locals(func, evaluate)
    sites: list[tuple[ast.stmt, bool]] = []
    _walk_sites(func.body, True, sites, evaluate)
    plans: dict[
        int, tuple[ast.stmt, ast.expr, ast.expr, bool]
    ] = {}  # id(stmt) -> (stmt, actual, expected, required)
    kinds: dict[int, tuple[str, bool]] = {}  # id(stmt) -> (kind, negated) of the other shapes
    for stmt, required in sites:
        other = shape(stmt)
        left, right = _pair(stmt) or other[:2]  # type: ignore[index,misc]
        sides = []
        for side in (left, right):
            try:
                evaluate(side)
                sides.append(True)
            except (Unsealable, RecursionError):
                sides.append(False)
        if other is not None and sides == [False, True]:  # (the actual side is always the first)
            plans[id(stmt)] = (stmt, left, right, required)
            kinds[id(stmt)] = other[2:]
        elif other is None and sides[0] != sides[1]:
            actual, expected = (right, left) if sides[0] else (left, right)
            plans[id(stmt)] = (stmt, actual, expected, required)
    # a local may go only if every use of it is inside a sealed expectation; drop sites until stable
    uses = {
        name: [
            n
            for n in ast.walk(func)
            if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
        ]
        for name in local
    }
    while True:
        inside = {id(n) for _, _, e, _ in plans.values() for n in ast.walk(e)}
        removable = {name for name, found in uses.items() if all(id(n) in inside for n in found)}
        drop = [
            k
            for k, (_, _, e, _) in plans.items()
            if any(isinstance(n, ast.Name) and n.id in local and n.id not in removable for n in ast.walk(e))
        ]
        if not drop:
            break
        for k in drop:
            del plans[k]
    sealed: dict[str, Site] = {}
    replace: dict[int, ast.stmt | None] = {}
    for stmt, actual, expected, required in plans.values():
        check = _expects(expected, evaluate, *kinds.get(id(stmt), ("eq", False)))
        if check is None:
            continue
        next_site[0] += 1
        site = f"c{next_site[0]}"
        sealed[site] = Site(key, required=required, **check)
        call = ast.Call(ast.Name(observe, ast.Load()), [ast.Constant(site), actual], [])
        replace[id(stmt)] = ast.copy_location(ast.Expr(call), stmt)
    removed = {
        name for name in local if uses[name] and all(_inside_sealed(n, plans, replace) for n in uses[name])
    }
    for name in removed:
        replace[id(local[name])] = None
    if replace:
        _rewrite(func, replace)
    return sealed


def _expects(expected: ast.expr, evaluate: _Eval, kind: str, negated: bool) -> dict | None:
    """The :class:`Site` fields of a check whose expected side is ``expected``, or None (unsealable)."""
    if kind == "is":
        name = identity_name(expected)
        return {
            "digest": "",
            "expected": f"{'not ' if negated else ''}{name}",
            "kind": kind,
            "among": frozenset({name}),
            "negated": negated,
        }
    try:
        value = evaluate(expected)
        forms = [canonical(e) for e in members(value)] if kind == "in" else [canonical(value)]
    except (Unsealable, RecursionError):
        return None
    if any(f is None for f in forms) or sum(len(json.dumps(f)) for f in forms) > MAX_CANONICAL:
        return None
    if kind == "eq":
        return {"digest": digest(forms[0]), "expected": shown(value)}
    among = frozenset(digest(f) for f in forms)
    what = f"{'none' if negated else 'one'} of {shown(value)}"
    return {"digest": "", "expected": what, "kind": kind, "among": among, "negated": negated}


def _inside_sealed(name: ast.Name, plans: dict, replace: dict) -> bool:
    return any(
        id(stmt) in replace and any(n is name for n in ast.walk(e)) for stmt, _, e, _ in plans.values()
    )


def _rewrite(node: ast.AST, replace: dict[int, ast.stmt | None]) -> None:
    for field in ("body", "orelse", "finalbody"):
        block = getattr(node, field, None)
        if not isinstance(block, list) or isinstance(node, ast.Lambda):
            continue
        new: list[ast.stmt] = []
        for stmt in block:
            if id(stmt) in replace:
                if replace[id(stmt)] is not None:
                    new.append(replace[id(stmt)])  # type: ignore[arg-type]
                continue
            _rewrite(stmt, replace)
            new.append(stmt)
        setattr(node, field, new or ([ast.Pass()] if block else []))
    for handler in getattr(node, "handlers", []):
        _rewrite(handler, replace)
