"""Sealed checks whose expected value changes from case to case: a ``pytest.mark.parametrize``
argument, or the target of a ``for`` over literal data in the test, used only on the expected side of
checks the kit can seal (:mod:`kit.scoring.seal`)::

    @pytest.mark.parametrize("text, expected", [("a b", "a-b"), ("", "")])
    def test_slug(text, expected):
        assert slugify(text) == expected

    for text, expected in [("a b", "a-b"), ("", "")]:
        assert slugify(text) == expected

In the session's copy each case's expected value becomes the case's number (``("a b", 0), ("", 1)``;
pytest names the cases from those), and the check becomes ``<observe>("<site>", actual, expected)``:
the session sends the actual value's digest with the case number, the kit compares it with that case's
expected value. A case whose expected value the kit cannot evaluate leaves the whole check unsealed.
A check the test always reaches must have been sent for every case (a loop with ``break`` or
``continue``: not required).
"""

from __future__ import annotations

import ast
from collections import Counter

from kit.scoring.seal import Site, Unsealable, _Eval, _expects, _pair, _walk_sites
from kit.scoring.sealshapes import shape

Cases = list[dict[str, ast.expr]]  # per case: argument name -> the node holding its value


def seal_cases(
    func: ast.FunctionDef, key: str, names: dict[str, object], observe: str, next_site: list[int]
) -> dict[str, Site]:
    """Seal the case-bound checks of test ``func`` (rewritten in place); the sealed sites by id."""
    sealed: dict[str, Site] = {}
    stores = Counter(n.id for n in ast.walk(func) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    for decorator in func.decorator_list:
        found = _parametrize(decorator)
        if found is not None:
            args, cases = found
            candidates = {a for a in args if not stores[a]}
            sealed |= _seal_group(func, func.body, candidates, cases, True, key, names, observe, next_site)
    for loop in [n for n in ast.walk(func) if isinstance(n, ast.For)]:
        found = _loop(loop)
        if found is not None:
            targets, cases = found
            candidates = {t for t in targets if stores[t] == 1}
            # required: a loop the test always reaches (at its top level) that runs every case
            plain = loop in func.body and not any(
                isinstance(n, ast.Break | ast.Continue) for n in ast.walk(loop)
            )
            sealed |= _seal_group(func, loop.body, candidates, cases, plain, key, names, observe, next_site)
    return sealed


def _seal_group(
    func: ast.FunctionDef,
    body: list[ast.stmt],
    candidates: set[str],
    cases: Cases,
    plain: bool,
    key: str,
    names: dict[str, object],
    observe: str,
    next_site: list[int],
) -> dict[str, Site]:
    """Long because it plans, checks and rewrites one group of cases in one pass."""
    evaluate = _Eval(names, {})
    bound = set()
    for name in candidates:  # every case's value for it is one the kit evaluates alone
        try:
            for case in cases:
                evaluate(case[name])
            bound.add(name)
        except (Unsealable, RecursionError):
            pass
    sites: list[tuple[ast.stmt, bool]] = []
    _walk_sites(body, True, sites, evaluate)
    plans: dict[int, tuple[ast.stmt, ast.expr, ast.expr, bool, list[dict]]] = {}
    for stmt, required in sites:
        planned = _plan(stmt, bound, cases, names)
        if planned is not None:
            plans[id(stmt)] = (stmt, *planned[:2], required and plain, planned[2])
    loads = {
        name: [
            n
            for n in ast.walk(func)
            if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
        ]
        for name in bound
    }
    while True:  # a name may go only if every use of it is on a sealed expected side
        inside = {id(n) for _, _, e, _, _ in plans.values() for n in ast.walk(e)}
        removable = {name for name, uses in loads.items() if uses and all(id(n) in inside for n in uses)}
        drop = [k for k, (_, _, e, _, _) in plans.items() if _free(e) - removable]
        if not drop:
            break
        for k in drop:
            del plans[k]
    if not plans:
        return {}
    index = sorted(removable)[0]  # every removed argument holds the case number in the copy
    for number, case in enumerate(cases):
        for name in removable:
            node = case[name]
            _replace_node(case["<parent>"], node, ast.copy_location(ast.Constant(number), node))
    sealed: dict[str, Site] = {}
    replace: dict[int, ast.stmt] = {}
    for stmt, actual, _, required, checks in plans.values():
        next_site[0] += 1
        site = f"c{next_site[0]}"
        shown = "by case: " + ", ".join(f"{i}: {c['expected']}" for i, c in enumerate(checks))[:200]
        sealed[site] = Site(
            key,
            "",
            shown,
            required,
            kind="cases",
            cases=tuple(Site(key, required=required, **c) for c in checks),
        )
        call = ast.Call(
            ast.Name(observe, ast.Load()), [ast.Constant(site), actual, ast.Name(index, ast.Load())], []
        )
        replace[id(stmt)] = ast.copy_location(ast.Expr(call), stmt)
    _rewrite(func, replace)
    return sealed


def _plan(
    stmt: ast.stmt, bound: set[str], cases: Cases, names: dict[str, object]
) -> tuple[ast.expr, ast.expr, list[dict]] | None:
    """(actual, expected, each case's Site fields) of an assertion whose expected side uses only
    ``bound`` names and literals, or None."""
    other = shape(stmt)
    pair = _pair(stmt) or (other[:2] if other else None)
    if pair is None:
        return None
    kind, negated = other[2:] if other else ("eq", False)
    order = [pair] if other else [pair, pair[::-1]]
    for actual, expected in order:
        free = _free(expected)
        if not free or free - bound or _free(actual) & free:
            continue
        checks = []
        for case in cases:
            check = _expects(expected, _Eval(names, {n: case[n] for n in free}), kind, negated)
            if check is None:
                return None
            checks.append(check)
        return actual, expected, checks
    return None


def _free(node: ast.expr) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _parametrize(decorator: ast.expr) -> tuple[list[str], Cases] | None:
    """The argument names and cases of ``@pytest.mark.parametrize("a, b", [(1, 2), ...])`` (or
    ``mark.parametrize``), every case a literal tuple or list or ``pytest.param(...)``; None else."""
    if not isinstance(decorator, ast.Call) or not isinstance(func := decorator.func, ast.Attribute):
        return None
    mark = func.value
    if func.attr != "parametrize" or not (
        (isinstance(mark, ast.Name) and mark.id == "mark")
        or (isinstance(mark, ast.Attribute) and mark.attr == "mark" and isinstance(mark.value, ast.Name))
    ):
        return None
    if len(decorator.args) != 2 or any(k.arg not in ("ids", "scope") for k in decorator.keywords):
        return None  # (indirect: a fixture gets the values)
    if any(k.arg == "ids" and not isinstance(k.value, ast.List | ast.Tuple) for k in decorator.keywords):
        return None  # an ids function would be handed case numbers
    first, data = decorator.args
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        args = [a.strip() for a in first.value.split(",") if a.strip()]
    elif isinstance(first, ast.List | ast.Tuple) and all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in first.elts
    ):
        args = [e.value for e in first.elts]  # type: ignore[attr-defined]
    else:
        return None
    if not isinstance(data, ast.List | ast.Tuple) or not data.elts:
        return None
    cases: Cases = []
    for case in data.elts:
        if _is_param(case):
            holder, values = case, case.args  # type: ignore[attr-defined]
        elif len(args) == 1:
            holder, values = data, [case]
        elif isinstance(case, ast.Tuple | ast.List):
            holder, values = case, case.elts
        else:
            return None
        if len(values) != len(args) or any(isinstance(v, ast.Starred) for v in values):
            return None
        cases.append({"<parent>": holder, **dict(zip(args, values, strict=True))})
    return args, cases


def _is_param(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "param"
        and isinstance(node.func.value, ast.Name)
    )


def _loop(loop: ast.For) -> tuple[list[str], Cases] | None:
    """The target names and cases of ``for a, b in [(1, 2), ...]`` (a literal list or tuple of tuples
    or lists, or of single values for one name), None else."""
    target, data = loop.target, loop.iter
    if not isinstance(data, ast.List | ast.Tuple) or not data.elts or loop.orelse:
        return None
    if isinstance(target, ast.Name):
        return [target.id], [{"<parent>": data, target.id: e} for e in data.elts]
    if not isinstance(target, ast.Tuple | ast.List) or not all(isinstance(t, ast.Name) for t in target.elts):
        return None
    names = [t.id for t in target.elts]  # type: ignore[attr-defined]
    if len(set(names)) != len(names):
        return None
    cases: Cases = []
    for case in data.elts:
        if not isinstance(case, ast.Tuple | ast.List) or len(case.elts) != len(names):
            return None
        if any(isinstance(e, ast.Starred) for e in case.elts):
            return None
        cases.append({"<parent>": case, **dict(zip(names, case.elts, strict=True))})
    return names, cases


def _replace_node(parent: ast.AST, old: ast.expr, new: ast.expr) -> None:
    for field in ("elts", "args"):
        items = getattr(parent, field, None)
        if isinstance(items, list):
            for i, item in enumerate(items):
                if item is old:
                    items[i] = new
                    return


def _rewrite(node: ast.AST, replace: dict[int, ast.stmt]) -> None:
    for field in ("body", "orelse", "finalbody"):
        block = getattr(node, field, None)
        if isinstance(block, list) and not isinstance(node, ast.Lambda):
            setattr(node, field, [replace.get(id(s), s) for s in block])
            for stmt in getattr(node, field):
                _rewrite(stmt, replace)
    for handler in getattr(node, "handlers", []):
        _rewrite(handler, replace)
