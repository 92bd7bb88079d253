"""What the kit writes into its copy of the hidden acceptance tests before a scoring session: in
every test module, its **sealed checks** (:mod:`kit.scoring.seal`: equalities whose expected
value leaves the module, first), a must-fail **twin** of each test that still has an in-process
check (:mod:`kit.scoring.twins`; a twin only evaluates the value of a sealed check), beside each
twin its **shadow** (a must-pass canary running the twin's statements: :func:`.twins.make_shadow`) and
**canaries** -- one that must pass and one that must fail in every class of tests, and another pair
at module level where the module has tests of its own.

The canaries call the code under test the way the requirements do: each runs a copy of one of its
scope's tests (picked at random among the cheaper half: :mod:`.testcost`; in the own tests, a scope
whose tests are all slow gets its pair within a budget) with its assertions turned into plain
evaluations, inside
``try/except BaseException``, then asserts something whose outcome is known whatever the code does:
the value last checked ``is not`` / ``is`` a fresh sentinel class. The failing canary is a copy in the
test's own scope (same class, decorators and fixtures); the passing one takes only the test's marks
and no fixture. A passing canary that fails in a class whose every test failed is excused by the
session (:mod:`.session`): an honest solution whose ``setUp`` breaks gets nothing credited from that
class anyway. Twins and canaries get names made of the module's own test-name words, sit in the
same classes as the requirements, at random positions after the test they come from: by name,
class or position nothing tells a canary from a twin or a requirement, so a forger that knows the
upstream test names and fails (or passes) every other test of a class meets a canary either way.
Only the kit knows which name is what (:class:`Injected`).

A forger inside the session (a patched ``TestReport``, a relayed report stream: RT40-2/3) that counts
how a test compares the values it returns can tell a requirement (one ``==`` per assertion) from a
twin (two or more), and a scope canary (none) from both. To credit a
requirement it fails, it must report it passed and its twin failed -- and the twin's shadow, which
makes the same calls and comparisons in the same order with the same operands, under a random name
at an independently random place, run in a random order, passed. Told apart from the twin by nothing
the code sees, each requirement it forges ends the session ``tampered`` (a must-pass canary
reported failed) with probability 1/2, independently: k forged requirements go
unnoticed with probability 2**-k -- where its values compare truthfully; the odds where they do not
are in docs/scoring.md ("What the shadows close"). The cost: one more run of each twinned test's
body. A test whose marks skip some of its cases (``pytest.param(..., marks=skip)``) gets no shadow: a
skipped case would fail it.

A test that holds an integer literal of 100 000 or more (say, 200k rows streamed) gets no twin -- it
would double the scoring time of the task -- and is counted ``unguarded``.

The original tests are left as they are but for a first statement that tells scoring's audit hook
who called the test (pytest, or the code under test running a hidden test to learn its expected
values). The module is re-written from its ``ast``: comments go.
"""

from __future__ import annotations

import ast
import math
import random
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from kit import pyast
from kit.scoring.naming import DEFAULT, Collecting, Namer, is_testcase
from kit.scoring.padding import TooLarge, unparse_padded
from kit.scoring.scopes import Scopes, Test, skipped, skips
from kit.scoring.seal import Site, module_names, seal_test
from kit.scoring.sealcases import seal_cases
from kit.scoring.testcost import canary_keys, left_bare
from kit.scoring.testcost import cheap as is_cheap
from kit.scoring.testcost import heavy as _heavy
from kit.scoring.twins import (
    Names,
    bind_check,
    bind_guard,
    capture_body,
    make_shadow,
    make_twin,
    no_args,
    rewrite_requirement,
    straight,
)
from kit.scoring.usednames import reported, used_test_names
from kit.tasks.requirements import test_files

MARKS = ("severity", "baseline_pass")


@dataclass
class Injected:
    """What the kit added to one acceptance folder, by test function name (unique per folder)."""

    twins: dict[str, str] = field(default_factory=dict)  # twin name -> requirement key
    sealed: dict[str, Site] = field(default_factory=dict)  # sealed check id -> what it expects
    observer: str = ""  # the name the sealed checks call (the plugin puts it in builtins)
    canaries: dict[str, tuple[str, bool]] = field(default_factory=dict)  # name -> (module, must pass)
    unguarded: list[str] = field(default_factory=list)  # requirement keys with neither twin nor seal
    #: requirement key -> the kinds of must-fail check its twin holds ("equal", "raises", "inverted"),
    #: and "sealed" when some of its checks are sealed
    kinds: dict[str, set[str]] = field(default_factory=dict)
    next_site: list[int] = field(default_factory=lambda: [0])
    shadows: dict[str, str] = field(default_factory=dict)  # shadow name -> its twin's requirement key
    too_large: list[str] = field(default_factory=list)  # own-test modules left as written (inject_own)
    bare: list[str] = field(default_factory=list)  # own-test scopes the canaries' budget left without


def _is_mark(dec: ast.expr) -> bool:
    target = dec.func if isinstance(dec, ast.Call) else dec
    return isinstance(target, ast.Attribute) and target.attr in MARKS


def _try_all(body: list[ast.stmt]) -> ast.Try:
    handler = ast.ExceptHandler(
        type=ast.Name(id="BaseException", ctx=ast.Load()), name=None, body=[ast.Pass()]
    )
    return ast.Try(body=body or [ast.Pass()], handlers=[handler], orelse=[], finalbody=[])


def _canary(
    source: ast.FunctionDef,
    home: ast.ClassDef | None,
    into: ast.ClassDef | None,
    name: str,
    names: Names,
    value: str,
    must_pass: bool,
    params: list[str] = (),  # type: ignore[assignment]
    home_name: str = "",
) -> ast.FunctionDef:
    """A canary running a copy of ``source`` (a test of class ``home``, or module-level), to sit in
    class ``into`` (or at module level). The failing canary in its test's own scope is the test's
    copy with its decorators and fixtures; any other takes only its marks and the plain signature of
    where it sits (a fixture it would have needed fails inside its ``try``, as does a method of
    another class). At module level a copy of a class's test runs on an instance made in its body."""
    start = pyast.parse(f"{value} = None").body
    body = capture_body(source, value, names.observe)
    if into is None and home is not None:  # module level: make the instance the test would run on
        home_name = home_name or home.name
        make = (
            f"self = {home_name}({source.name!r})\nself.setUp()"
            if is_testcase(home)
            else f"self = {home_name}()"
        )
        body = pyast.parse(make).body + body
    own = home is into and not must_pass
    args = pyast.clone(source.args) if own else _any_args(into, params, names)
    check = pyast.parse(f"assert {value} is {'not ' if must_pass else ''}{names.sentinel}").body
    return ast.FunctionDef(
        name=name,
        args=args,
        body=[*start, _try_all(body), *check],
        decorator_list=[
            pyast.clone(d) for d in source.decorator_list if (own or _is_mark(d)) and not skips(d)
        ],
        returns=None,
        type_comment=None,
    )


def _any_args(into: ast.ClassDef | None, params: list[str], names: Names) -> ast.arguments:
    """A canary's signature where it is not its test's copy: ``self`` in a class, the names its
    scope's ``parametrize`` marks hand every test, and ``*args, **kwargs`` -- a class decorator such
    as ``mock.patch`` passes extra arguments to every method whose name starts with ``test``."""
    args = no_args()
    args.args = [ast.arg(arg=a) for a in (["self"] if into is not None else []) + list(params)]
    args.vararg, args.kwarg = ast.arg(arg=names.mirror + "_args"), ast.arg(arg=names.mirror + "_kwargs")
    return args


def _plain_args(func: ast.FunctionDef, cls: ast.ClassDef | None) -> bool:
    args = func.args
    names = [a.arg for a in args.posonlyargs + args.args]
    wanted = ["self"] if cls is not None else []
    return names == wanted and not (args.vararg or args.kwarg or args.kwonlyargs)


def _place(body: list[ast.stmt], extra: list[tuple[int, ast.stmt]]) -> list[ast.stmt]:
    """``body`` with each extra statement inserted after the statement at its index."""
    out: list[ast.stmt] = []
    for i, stmt in enumerate(body):
        out.append(stmt)
        out.extend(node for at, node in extra if at == i)
    return out


def inject_module(
    tree: ast.Module,
    rel: str,
    namer: Namer,
    found: Injected,
    twins: bool = True,
    left_out: tuple[str, ...] = (),
    timed: dict[str, float] | None = None,
    bare: frozenset[str] = frozenset(),
) -> bool:
    """Twins and canaries written into ``tree`` (acceptance file ``rel``); False if it has no tests.
    Tests of nested test classes are requirements too (``rel::Outer::Inner::test``). ``twins``
    False: canaries only (the repo's own tests: :func:`inject_own`); ``left_out``: node ids the
    session deselects -- their tests are as good as absent (no canary's source, no scope of one);
    ``timed``: seconds each test took at the base (:func:`.testcost.canary_keys`); ``bare``: scopes
    (:meth:`.Scopes.key`) left without canaries."""
    namer.use_module(tree)
    c = namer.collecting
    names = Names(
        namer.ident(cls=True), namer.ident(cls=True), *(namer.ident() for _ in range(4)), found.observer
    )
    imports = module_names(tree)
    module_extra: list[tuple[int, ast.stmt]] = []
    class_extra: dict[int, list[tuple[int, ast.stmt]]] = {}  # id(class) -> (index, statement)
    scopes = Scopes(tree, c)
    tests = scopes.tests(rel, left_out)
    if not tests:
        return False
    rng = namer.rng
    checked: list[tuple[ast.FunctionDef, list[tuple[ast.Assert, int]]]] = []  # tests, their own a == b
    for _top, cls, idx, test in tests if twins else []:
        key = f"{rel}::{scopes.node_id(cls)}{test.name}"
        kinds = found.kinds.setdefault(key, set())
        sealed = seal_test(test, key, imports, names.observe, found.next_site)
        sealed |= seal_cases(test, key, imports, names.observe, found.next_site)  # parametrize, loops
        found.sealed.update(sealed)
        if sealed:
            kinds.add("sealed")
        heavy = _heavy(test)  # its twin would double a long test's time: counted unguarded instead
        own: list[tuple[ast.Assert, int]] = []
        unittest = cls is not None and is_testcase(cls)
        name = None if heavy else namer.test_name(unittest)  # (None: the configuration collects none)
        twin = None if name is None else make_twin(test, name, names, namer.ident(), kinds, rng, own)
        if twin is not None and own:
            checked.append((test, own))
        if twin is None:
            if not sealed:
                found.unguarded.append(key)
            continue
        found.twins[twin.name] = key
        extras = [twin]
        if not any(skips(d) for d in test.decorator_list):  # (a skipped case would fail a shadow)
            shadow = make_shadow(twin, namer.test_name(unittest) or "")  # the twin's must-pass double
            found.canaries[shadow.name] = (rel + ("::" + scopes.node_id(cls)[:-2] if cls else ""), True)
            found.shadows[shadow.name] = key
            extras.append(shadow)
        scope = class_extra.setdefault(id(cls), []) if cls else module_extra
        for extra in rng.sample(extras, len(extras)):  # where each sits, and which comes first: random
            scope.append((rng.randint(idx, len(cls.body if cls else tree.body) - 1), extra))
    _add_canaries(tree, rel, tests, namer, names, found, module_extra, class_extra, scopes, timed, bare)
    for test, own in checked:  # (after the canaries: they evaluate the checked values only)
        for stmt, first in own:
            rewrite_requirement(stmt, first, names)
        bind_check(test, names)
    for cls_node in scopes.classes.values():
        cls_node.body = _place(cls_node.body, class_extra.get(id(cls_node), []))
    tree.body = _place(tree.body, module_extra)
    every = [n for n in tree.body if c.is_test_func(n)] + [sub for _, _, sub in c.class_tests(tree.body)]
    for test in every if twins else []:  # every test (original, twin, canary) tells who called it
        bind_guard(test, names)
    tree.body[pyast.after_header(tree.body) : pyast.after_header(tree.body)] = names.helpers()
    return True


def _add_canaries(
    tree: ast.Module,
    rel: str,
    tests: list[Test],
    namer: Namer,
    names: Names,
    found: Injected,
    module_extra: list[tuple[int, ast.stmt]],
    class_extra: dict[int, list[tuple[int, ast.stmt]]],
    classes: Scopes,
    timed: dict[str, float] | None = None,
    bare: frozenset[str] = frozenset(),
) -> None:
    """Both canaries -- one that must pass, one that must fail -- in every class of tests and at
    module level (where the module has tests of its own), each a copy of one of the cheaper tests of
    its scope (of the module's when its scope has none that fits), at a random place after it: where
    a canary sits tells nothing of what it is, nor of it from a twin. None in a scope of ``bare``."""
    rng = namer.rng
    first = min((t[0] for t in tests if t[1] is None or not skipped(t[1])), default=0)  # (after the imports)
    for into, wants in _pools(rel, tests, classes, timed)[0]:
        if classes.key(rel, into) in bare:
            continue
        scope_body = into.body if into is not None else tree.body
        for must_pass, own, half in wants:
            src_top, home, idx, source = rng.choice(half)  # which of the cheaper half: random
            name = namer.test_name(into is not None and is_testcase(into))
            if name is None:
                continue  # (the configuration collects no name the kit can make: Collecting.unnamed)
            found.canaries[name] = (classes.key(rel, into), must_pass)
            where = classes.dotted(home) if home is not None else ""
            params = classes.params(into)
            canary = _canary(source, home, into, name, names, namer.ident(), must_pass, params, where)
            after = (idx if into is not None else src_top) if own else (0 if into is not None else first)
            placed = (rng.randint(after, len(scope_body) - 1), canary)
            (class_extra.setdefault(id(into), []) if into is not None else module_extra).append(placed)


_Wants = list[tuple[bool, bool, list[Test]]]  # a scope's canaries: (must pass?, own scope's?, half)


def _pools(
    rel: str, tests: list[Test], classes: Scopes, timed: dict[str, float] | None
) -> tuple[list[tuple[ast.ClassDef | None, _Wants]], dict[int, tuple[int, float]]]:
    """Each scope that gets canaries (a class's, module level's) with, for each of its canaries (must
    pass?, a copy of its own scope's test?, the cheaper half of the tests it may copy), and the
    :func:`.testcost.canary_keys` of the tests: a cheap test of its scope, else of the module, else any."""
    tests = [t for t in tests if t[1] is None or not skipped(t[1])]  # a skipped class's canary never runs
    simple = [t for t in tests if straight(t[3])]
    costs = canary_keys(((f"{rel}::{classes.node_id(t[1])}{t[3].name}", t[3]) for t in simple), timed)
    cheap = [t for t in simple if is_cheap(costs[id(t[3])])]
    scopes: dict[int | None, ast.ClassDef | None] = {id(c): c for _, c, _, _ in tests if c is not None}
    if any(cls is None for _, cls, _, _ in tests):
        scopes[None] = None
    out: list[tuple[ast.ClassDef | None, _Wants]] = []
    by_scope = [_by_scope(cheap), _by_scope(simple)]  # (not each scope through all: 5,000 classes)
    for into in scopes.values():
        wants: _Wants = []
        for must_pass in (False, True):
            own, pool = [], []
            for candidates, mine in zip(
                (cheap, simple), by_scope, strict=True
            ):  # a cheap test of its scope, else of the module's
                own = [t for t in mine.get(id(into), ()) if not must_pass or _plain(t[3], t[1])]
                pool = own or candidates
                if pool:
                    break
            if pool:
                pool = [t for t in pool if not skipped(t[3])] or pool  # its body runs: one meant to, if any
                pool.sort(key=lambda t: costs[id(t[3])])  # a canary re-runs its test: one of the cheaper half
                wants.append((must_pass, bool(own), pool[: max(1, (len(pool) + 1) // 2)]))
        out.append((into, wants))
    return out, costs


def _by_scope(tests: list[Test]) -> dict[int, list[Test]]:
    """``tests`` by the ``id`` of their class (of ``None`` at module level), in their order."""
    out: dict[int, list[Test]] = {}
    for t in tests:
        out.setdefault(id(t[1]), []).append(t)
    return out


def _pair_costs(
    tree: ast.Module,
    rel: str,
    left_out: tuple[str, ...],
    timed: dict[str, float],
    collecting: Collecting = DEFAULT,
) -> dict[str, float | None]:
    """Each scope of ``tree`` that gets canaries: None where every test its canaries may copy is cheap,
    else the most its pair of canaries can take (the costliest test of each canary's cheaper half, as
    measured at the base; infinite where the base did not measure one) -- for :func:`.testcost.left_bare`."""
    classes = Scopes(tree, collecting)
    pools, costs = _pools(rel, classes.tests(rel, left_out), classes, timed)
    out: dict[str, float | None] = {}
    for into, wants in (p for p in pools if p[1]):  # (a scope of no test a canary can copy gets none)
        keys = [max(costs[id(t[3])] for t in half) for _, _, half in wants]
        dear = not all(is_cheap(k) for k in keys)
        out[classes.key(rel, into)] = sum(k[1] if k[0] == 0 else math.inf for k in keys) if dear else None
    return out


def _plain(func: ast.FunctionDef, cls: ast.ClassDef | None) -> bool:
    """A test a passing canary can copy in its own scope: no fixture, no decorator but marks."""
    return _plain_args(func, cls) and all(_is_mark(d) for d in func.decorator_list)


def inject_own(
    root: Path,
    files: list[str],
    left_out: list[str] = (),
    rng: random.Random | None = None,  # type: ignore[assignment]
    seconds: dict[str, float] | None = None,
    collecting: Collecting = DEFAULT,
) -> Injected:
    """Both canaries in every class of tests and module of ``files`` (test modules of the repo copy
    ``root``, relative) that holds a test the session runs (``left_out``: the node ids it deselects):
    the own-tests sessions' canaries sit among the repo's tests, as the acceptance session's do -- a
    report patch or a code path that spares a separate canary file (03c, 03d) meets them. No twins.
    A scope whose every test is deselected gets none (a broken ``setUp`` there could not excuse its
    must-pass canary: Python-Markdown). ``seconds``: per test, at the base; with them, a scope whose
    canaries could copy only costly tests gets its pair within a budget (:func:`.testcost.left_bare`),
    ``bare`` lists those that get none. A module too large once injected stays as written, none of
    its canaries expected (``too_large``: RT41-8)."""
    rng = rng or random.Random(secrets.randbits(64))
    found = Injected()
    parsed, taken = _parse_all(root, files)
    used = used_test_names(root, forms=collecting.forms()) | reported(seconds or {})
    namer = Namer(rng, taken | used, collecting)  # no test's name
    out = tuple(left_out)
    if seconds is not None:  # (a task's first scoring has measured nothing: every scope gets its pair)
        measured = {n[: n.find(".py::") + 3] for n in seconds if ".py::" in n}
        pairs: dict[str, float | None] = {}
        added: list[str] = []  # (the scopes of modules the base did not run: RT45-4)
        for _, rel, tree in parsed:
            costs = _pair_costs(tree, rel, out, seconds, collecting)
            pairs |= costs
            added += [] if rel in measured else list(costs)
        found.bare = sorted(left_bare(pairs, seconds, added))
    bare = frozenset(found.bare)
    for path, rel, tree in parsed:
        try:  # (a tree nested too deep to walk or write: as one too large, RT45-1)
            if inject_module(tree, rel, namer, found, twins=False, left_out=out, timed=seconds, bare=bare):
                path.write_text(unparse_padded(tree, rng), encoding="utf-8")
        except (TooLarge, RecursionError):
            found.too_large.append(rel)
            found.canaries = {n: v for n, v in found.canaries.items() if v[0].split("::")[0] != rel}
    return found


def _parse_all(root: Path, files: list[str]) -> tuple[list[tuple[Path, str, ast.Module]], set[str]]:
    """Each of ``files`` (relative to ``root``) that parses, and every name any of them uses."""
    parsed: list[tuple[Path, str, ast.Module]] = []
    taken: set[str] = set()
    for rel in files:
        path = root / rel
        try:
            tree = pyast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except (SyntaxError, UnicodeDecodeError, ValueError, OSError):
            continue  # its requirements fail as not run; nothing to add
        parsed.append((path, rel, tree))
        # (attributes too: a guard named as a method a test calls made the test read as guarded --
        # and as unheard: table-computed-columns' ``to_text``)
        taken |= pyast.identifiers(tree)
    return parsed, taken


def inject_folder(
    folder: Path,
    rng: random.Random | None = None,
    avoid: set[str] = frozenset(),
    collecting: Collecting = DEFAULT,
) -> Injected:
    """Twins and canaries in every test module of ``folder`` (a kit copy), named as nothing in it or
    ``avoid``, as the session's configuration collects them (``collecting``: :mod:`.naming`)."""
    rng = rng or random.Random(secrets.randbits(64))
    found = Injected()
    parsed, taken = _parse_all(folder, [p.relative_to(folder).as_posix() for p in test_files(folder)])
    namer = Namer(rng, taken | used_test_names(folder, forms=collecting.forms()) | avoid, collecting)
    found.observer = namer.ident()
    for path, rel, tree in parsed:
        if inject_module(tree, rel, namer, found):
            path.write_text(unparse_padded(tree, rng), encoding="utf-8")
    return found
