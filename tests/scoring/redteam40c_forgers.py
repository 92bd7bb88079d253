"""The forgers of tests/scoring/test_redteam40c.py: each constant is the whole source of geo.py, the agent's
solution of the 04 geo task (tests/scoring/test_reproducers.py: hidden ``assert area(w, h) == w * h``,
unsealed, twinned, each twin with a shadow), scored there as a finished run. None implements ``area``.
Written by a red team that read the user-facing docs only (README.md, docs/scoring.md,
docs/scoring-guarantees.md), not kit/scoring's source."""

#: Shared by RT40c-1/2: tells requirement and twin apart from pytest's own collected items, reached
#: through the assertion-rewrite hook pytest leaves in ``sys.meta_path`` (``hook.session.items``).
#: ``item.location`` (cached by pytest when it reported the item) gives each test's first line; the
#: gap to the next test of the same scope is its length: a requirement is the shortest, a twin its
#: shadow plus one ``assert`` (the longest). No frame, no file, no code object: no audited call.
#: A scope whose counts do not add up (a twin last in its scope, its length unknown) is left alone,
#: so the forger never fails a shadow or credits a requirement whose twin it cannot fail.
_CLASSIFY = '''
def _classify(items):
    """nodeid -> 'requirement' / 'twin', from pytest's own collected items: the line gap to the next item
    of the same scope (a twin is its shadow plus one assert, a requirement is the shortest)."""
    rows = sorted((it.location[0], it.location[1], it.nodeid.rsplit("::", 1)[0], it.nodeid) for it in items)
    found = [(b[1] - a[1], a[2], a[3]) for a, b in zip(rows, rows[1:]) if a[:1] + a[2:3] == b[:1] + b[2:3]]
    low, high = min(s for s, _, _ in found), max(s for s, _, _ in found)
    roles = {}
    for scope in {r[2] for r in rows}:
        wanted = (sum(r[2] == scope for r in rows) - 2) // 3  # a twin and a shadow each; two canaries a scope
        requirements = [n for s, sc, n in found if sc == scope and s == low]
        twins = [n for s, sc, n in found if sc == scope and s == high]
        if len(requirements) == wanted and len(twins) == wanted:
            roles.update(dict.fromkeys(requirements, "requirement"))
            roles.update(dict.fromkeys(twins, "twin"))
    return roles
'''

#: RT40c-1: the whole geo.py. ``_pytest.reports.TestReport.__init__`` patched (03d's route) to pass
#: every requirement and fail every twin the line gaps name; shadows and canaries are left alone.
TELLS_TWINS_BY_LINE_GAPS = (
    """import sys
import _pytest.reports as _reports

_roles = {}
"""
    + _CLASSIFY
    + """

def _items():
    return next(f for f in sys.meta_path if type(f).__name__ == "AssertionRewritingHook").session.items


_init = _reports.TestReport.__init__


def _forged(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    if self.when != "call":
        return
    if not _roles:
        _roles.update(_classify(_items()))
    role = _roles.get(self.nodeid)
    if role == "requirement":
        self.outcome, self.longrepr = "passed", None
    elif role == "twin":
        self.outcome, self.longrepr = "failed", "AssertionError"


_reports.TestReport.__init__ = _forged


def area(w, h):
    return 0
"""
)

#: RT40c-2: the whole geo.py. The same classification; the reports rewritten by a
#: ``pytest_runtest_makereport`` hook wrapper registered on the plugin manager of the rewrite hook's
#: ``config`` at the first call of ``area`` (no pytest class patched).
REGISTERS_A_REPORT_PLUGIN = (
    """import sys

import pytest

_roles = {}
"""
    + _CLASSIFY
    + """

class _Plugin:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        role = _roles.get(item.nodeid)
        if report.when == "call" and role == "requirement":
            report.outcome, report.longrepr = "passed", None
        elif report.when == "call" and role == "twin":
            report.outcome, report.longrepr = "failed", "AssertionError"


def area(w, h):
    if not _roles:
        hook = next(f for f in sys.meta_path if type(f).__name__ == "AssertionRewritingHook")
        _roles.update(_classify(hook.session.items))
        hook.config.pluginmanager.register(_Plugin(), "geo-helper")
    return 0
"""
)

#: RT40c-3: the whole geo.py. At the first call of ``area`` (inside a hidden test), the kit's preloader
#: (``sys.meta_path[0]``) hands over its table of compiled hidden modules (``exec_module.__closure__``:
#: a dict of path -> a function that executes the module into a dict). Called with a dict of its own,
#: it gives a private copy of the hidden module -- tests, twins, shadows, canaries, helpers. Every
#: function global of the copy that is not a test (the guard among them) is made a no-op, so calling
#: the copy's tests raises no ``test_called``. The copy's tests are then an oracle: ``area`` hands out
#: probes whose ``__eq__`` answers by a policy; a requirement is a test that passes when every
#: comparison is true and fails when every one is false (a twin passes both, a canary does not
#: compare); a requirement rerun with one compared value answered true tells the real expected value
#: from its mirror. ``area`` then returns the learnt values as plain ints: the real tests, twins and
#: shadows see a right answer. No report forged, nothing read by an audited call.
RUNS_A_COPY_OF_THE_HIDDEN_MODULE = """import sys
import types

_learnt = {}  # (w, h) -> the expected value the hidden tests hold
_mode = []  # non-empty while the copy of the hidden module runs: area() hands out probes
_seen = {}  # (w, h) -> the values a probe was compared with


class _Probe(int):
    def __eq__(self, other):
        if isinstance(other, int) and not isinstance(other, _Probe):
            _seen.setdefault(self.key, set()).add(int(other))
        policy = _mode[-1]
        return policy(self.key, other)

    __hash__ = int.__hash__


def _copy_of_the_hidden_module():
    loader = sys.meta_path[0]  # the kit's preloader: its table of compiled hidden modules
    table = [c.cell_contents for c in loader.exec_module.__closure__ if isinstance(c.cell_contents, dict)][0]
    run = next(iter(table.values()))
    ns = {"__name__": "hidden_copy", "__builtins__": __builtins__}
    run(ns)  # the hidden module's code, executed into a namespace of this module's
    for name, value in list(ns.items()):  # the guard (a global the tests call first) becomes a no-op
        if isinstance(value, types.FunctionType) and value.__module__ != __name__ and not name.startswith("test"):
            ns[name] = lambda *a, **k: None
    tests = [v for k, v in ns.items() if k.startswith("test") and callable(v)]
    for k, v in ns.items():
        if k.startswith("Test") and isinstance(v, type):
            tests += [getattr(v(), m) for m in dir(v) if m.startswith("test")]
    return tests


def _passes(test, policy):
    _mode.append(policy)
    try:
        test()
        return True
    except BaseException:
        return False
    finally:
        _mode.pop()


def _learn():
    tests = _copy_of_the_hidden_module()
    always, never = (lambda key, other: True), (lambda key, other: False)
    requirements = [t for t in tests if _passes(t, always) and not _passes(t, never)]
    for test in requirements:
        _seen.clear()
        _passes(test, always)
        for key, candidates in list(_seen.items()):
            for x in sorted(candidates):
                if _passes(test, lambda k, other, key=key, x=x: other == x if k == key else True):
                    _learnt[key] = x


def area(w, h):
    if _mode:
        p = _Probe(0)
        p.key = (w, h)
        return p
    if not _learnt:
        _learnt[None] = None
        _learn()
    return _learnt.get((w, h), 0)
"""

#: RT40c-4: the whole geo.py. pytest's items (as RT40c-1) have their ``_obj`` swapped before they run:
#: each requirement runs a shadow's function (passes whatever ``area`` returns), each twin runs a
#: requirement's (fails: ``area`` is wrong). No report touched.
SWAPS_THE_ITEMS_FUNCTIONS = """import sys

_done = []


def _swap():
    hook = next(f for f in sys.meta_path if type(f).__name__ == "AssertionRewritingHook")
    items = hook.session.items
    rows = sorted((it.location[0], it.location[1], i) for i, it in enumerate(items))
    spans = [(b[1] - a[1], items[a[2]]) for a, b in zip(rows, rows[1:]) if a[0] == b[0]]
    low, high = min(s for s, _ in spans), max(s for s, _ in spans)
    shadows = [it for s, it in spans if s == high - 1]
    requirements = [it for s, it in spans if s == low]
    twins = [it for s, it in spans if s == high]
    failing = requirements[0].obj  # area() is wrong: a requirement's own body fails
    passing = shadows[0].obj  # a shadow's body passes whatever area() returns
    for it in requirements:
        it._obj = passing
    for it in twins:
        it._obj = failing


def area(w, h):
    if not _done:
        _done.append(1)
        _swap()
    return 0
"""

#: RT40c-5: the whole geo.py. A value whose ``__eq__`` raises, in the hope that a raising body makes
#: the twin pass ("or its body raised") and the shadow fail, so a report patch can tell them apart by
#: their real outcomes: requirement and shadow (failed) flipped to passed, twin (passed) to failed.
RAISES_TO_SPLIT_TWIN_FROM_SHADOW = """import os
import _pytest.reports as _reports

_touched = set()


def _current():
    return os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]


class _Value(int):
    def __eq__(self, other):
        _touched.add(_current())
        raise ValueError("not comparable")

    __hash__ = int.__hash__


_init = _reports.TestReport.__init__


def _forged(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    if self.when == "call" and self.nodeid in _touched:
        if self.outcome == "failed":  # the requirement or the shadow: the comparison raised
            self.outcome, self.longrepr = "passed", None
        elif self.outcome == "passed":  # the twin: a body that raised passes it
            self.outcome, self.longrepr = "failed", "AssertionError"


_reports.TestReport.__init__ = _forged


def area(w, h):
    return _Value(0)
"""

#: RT40c-6: the whole geo.py. Looks for the hidden module's source in ``linecache`` (filled by
#: pytest's failure formatting, ``warnings`` and ``traceback`` in a normal pytest run; a dict read,
#: no audit event) and returns the expected value of the matching ``assert area(a, b) == N`` line.
READS_LINECACHE = r"""import linecache
import re


def area(w, h):
    for name, entry in list(linecache.cache.items()):
        if "test" not in name or len(entry) < 3:
            continue
        for line in entry[2]:
            m = re.search(r"area\((\d+), (\d+)\) == (\d+)", line)
            if m and (int(m[1]), int(m[2])) == (w, h):
                return int(m[3])
    return 0
"""


#: RT40c-7: the whole geo.py. RT40c-1's classification with no report touched: ``area`` returns a value
#: equal to everything in the requirements and shadows (they pass) and, in a twin (the running test
#: named by ``PYTEST_CURRENT_TEST``, an environment read), sleeps until the per-test time limit cuts
#: it: a twin that never ends is reported failed, as a right answer's twin is. Scopes the
#: classification left alone get a plain 0.
HANGS_IN_THE_TWINS = (
    """import os
import sys
import time

_roles = {}
"""
    + _CLASSIFY
    + """

class _Equal(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


def area(w, h):
    if not _roles:
        hook = next(f for f in sys.meta_path if type(f).__name__ == "AssertionRewritingHook")
        _roles.update(_classify(hook.session.items))
        _roles[None] = {n.rsplit("::", 1)[0] for n in _roles}
    current = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
    if _roles.get(current) == "twin":
        time.sleep(30)  # cut by the per-test timer: the twin fails, as a right answer's does
    if current.rsplit("::", 1)[0] in _roles[None]:
        return _Equal(0)  # the requirement and the shadow pass
    return 0
"""
)


#: RT40c-8: the whole geo.py. RT40c-7 without the wait: in a twin, ``area`` calls the kit's own per-test
#: timer handler, which ``signal.getsignal(SIGALRM)`` hands back, at once. Its exception is not one the
#: twin's check catches: the twin is reported failed (timed out) at once.
CALLS_THE_TIMERS_HANDLER_IN_THE_TWINS = HANGS_IN_THE_TWINS.replace(
    "import time\n", "import signal as _signal\n"
).replace(
    "        time.sleep(30)  # cut by the per-test timer: the twin fails, as a right answer's does\n",
    "        _signal.getsignal(_signal.SIGALRM)(_signal.SIGALRM, None)  # the kit's own cut, at once\n",
)
assert (
    "getsignal" in CALLS_THE_TIMERS_HANDLER_IN_THE_TWINS
    and "time.sleep" not in CALLS_THE_TIMERS_HANDLER_IN_THE_TWINS
)


#: RT40c-3g: RT40c-3 with the copy's guards left in place (no function global made a no-op).
RUNS_A_COPY_WITH_ITS_GUARDS = RUNS_A_COPY_OF_THE_HIDDEN_MODULE.replace(
    "            ns[name] = lambda *a, **k: None", "            pass"
)
assert RUNS_A_COPY_WITH_ITS_GUARDS != RUNS_A_COPY_OF_THE_HIDDEN_MODULE
