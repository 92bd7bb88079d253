"""unittest's own assertion methods on the test classes of a scoring session. Runs INSIDE the scoring
sandbox, loaded by the plugin (``plugin.py``) before any code under test; imports nothing from the kit.

A test class may derive from a base class of the project (``class T(calc.testing.Base)`` where
``calc/testing.py`` has ``class Base(unittest.TestCase)``): package code, which the agent may edit.
There it could define ``assertTrue``, ``assertIn``, ``fail``, ``run``, ``subTest`` ... as no-ops, set
them on the instance in ``setUp``, or patch ``unittest.TestCase`` itself, and every ``self.assert*``
of the tests would hold (attack 39g; the twins could not tell: a no-op never fails their inverted
check). So, after collection, on every collected class that derives from ``unittest.TestCase``:

- each standard method of ``unittest.TestCase`` (:data:`PINNED`: every ``assert*``/``fail*``, the
  helpers they call, ``run``, ``__call__``, ``debug``, ``subTest``, ``_callTestMethod``) that the
  class resolves from anything but test code or a library is replaced on the class by a **pin**: a
  data descriptor handing out ``unittest.TestCase``'s own function, taken when the plugin loaded
  (and so is every such definition further up the MRO, ``unittest.TestCase``'s too: a ``super()``
  call from a test module's own override reaches unittest's). A
  data descriptor wins over the instance's ``__dict__`` (an assignment on ``self`` is refused), and
  the class's own entry wins over a patched ``unittest.TestCase``; a ``__getattribute__`` of such a
  base is replaced by ``object``'s;
- test code is a function whose code object the kit compiled from a test file before any code under
  test ran (``preload.py``): a project's own test helpers (``assertXmlEqual``) are not standard
  names and are never touched, and a test module or conftest that overrides a standard method keeps
  its override. A library's is a function defined in the library file of the class that holds it
  (stdlib, site-packages: ``IsolatedAsyncioTestCase``, a test framework's base), read-only to the
  agent. Everything else -- the project's base classes, agent-written or not -- gets unittest's own:
  a project whose base class overrides a standard method is scored with unittest's (rare; where a
  test relies on the override, ``kit tasks validate`` reports the reference solution failing);
- around each test's call: the instance must be of the collected class and run the collected
  method (a base's ``__init__`` or metaclass cannot swap in another test), and after it every pin
  must still be in place. Otherwise the test is reported failed with the reason and a ``seen`` line
  flags the run ``suspicious``.

Not covered: a base's ``setUp`` or ``__init__`` steering unittest's own methods through their data
(``addTypeEqualityFunc`` with a no-op for a type -- ``assertEqual`` checks are sealed where they can
be), an ``__init_subclass__`` or metaclass rewriting the test methods themselves, and a library's
class patched at run time by the code under test.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import types
import unittest

#: Standard names a base class may override: fixtures, cleanups, naming -- none decides a verdict.
OVERRIDABLE = frozenset(
    {
        "__init_subclass__", "__init__", "addTypeEqualityFunc", "addCleanup", "enterContext",
        "addClassCleanup", "enterClassContext", "setUp", "tearDown", "setUpClass", "tearDownClass",
        "countTestCases", "defaultTestResult", "shortDescription", "id", "__eq__", "__hash__", "__str__",
        "__repr__", "_callSetUp", "_callTearDown", "_callCleanup", "doCleanups", "doClassCleanups",
        "skipTest", "_deprecate",
    }
)  # fmt: skip
_CALLABLE = (types.FunctionType, classmethod, staticmethod)
#: unittest.TestCase's own members that decide whether a test passes: name -> the original, as the
#: plugin found them when it loaded (before any code under test)
PINNED = {
    name: value
    for name, value in vars(unittest.TestCase).items()
    if isinstance(value, _CALLABLE) and name not in OVERRIDABLE
}
_LIBRARY = tuple(
    {
        os.path.realpath(sysconfig.get_paths()[key]) + os.sep
        for key in ("stdlib", "platstdlib", "purelib", "platlib")
        if sysconfig.get_paths().get(key)
    }
)
_TestCase, _object_getattribute, _type_setattr, _realpath = (
    unittest.TestCase,
    object.__getattribute__,
    type.__setattr__,
    os.path.realpath,
)


class Pin:
    """A data descriptor handing out unittest's own ``value`` (assignment and deletion refused)."""

    def __init__(self, name: str, value: object) -> None:
        self.name, self.value = name, value

    def __get__(self, obj: object, owner: type | None = None) -> object:
        return self.value.__get__(obj, owner)  # type: ignore[attr-defined]

    def __set__(self, obj: object, value: object) -> None:
        raise AttributeError(f"{self.name} is unittest's own in a scoring session (kit pin)")

    def __delete__(self, obj: object) -> None:
        raise AttributeError(f"{self.name} is unittest's own in a scoring session (kit pin)")


def _function(value: object) -> types.FunctionType | None:
    func = getattr(value, "__func__", value) if isinstance(value, (classmethod, staticmethod)) else value
    return func if isinstance(func, types.FunctionType) else None


def _kept(owner: type, value: object, test_code: frozenset[int]) -> bool:
    """Is ``value``, found in ``owner``'s ``__dict__``, test code or a library's own?"""
    func = _function(value)
    if func is None:
        return False
    if id(func.__code__) in test_code:
        return True
    module = sys.modules.get(owner.__module__)
    path = getattr(module, "__file__", None)
    filename = func.__code__.co_filename
    return (
        isinstance(path, str)
        and _realpath(filename) == _realpath(path)
        and _realpath(filename).startswith(_LIBRARY)
    )


def pin_class(cls: type, test_code: frozenset[int]) -> dict[str, object]:
    """Pins for every standard member of ``cls`` (a ``unittest.TestCase`` subclass): in ``cls``
    itself unless test code or a library defines the member first, and in every class of its MRO
    that defines it and is neither (``unittest.TestCase`` too: a ``super()`` call from a test
    module's own override reaches unittest's). Returns ``{name: what is in cls.__dict__ now}``."""
    placed: dict[str, object] = {}
    for name, original in PINNED.items():
        pin, first, leaf = Pin(name, original), True, True
        for owner in cls.__mro__:
            if name not in vars(owner):
                continue
            value = vars(owner)[name]
            own = not isinstance(value, Pin) and owner is not _TestCase and _kept(owner, value, test_code)
            if first:  # the first definer: test code's or a library's is kept
                first, leaf = False, not own
            if not own and not isinstance(value, Pin):
                _type_setattr(owner, name, pin)
        if leaf:
            placed[name] = pin
            _type_setattr(cls, name, pin)
    for owner in cls.__mro__:
        if "__getattribute__" in vars(owner):
            value = vars(owner)["__getattribute__"]
            if owner is not object and not _kept(owner, value, test_code):
                _type_setattr(cls, "__getattribute__", _object_getattribute)
                placed["__getattribute__"] = _object_getattribute
            break
    return placed


def pin_items(items: list, test_code: frozenset[int]) -> dict[type, dict[str, object]]:
    """Pins every collected ``unittest.TestCase`` class of ``items`` (once per class)."""
    pinned: dict[type, dict[str, object]] = {}
    for item in items:
        cls = getattr(item, "cls", None)
        if isinstance(cls, type) and cls not in pinned and issubclass(cls, _TestCase):
            pinned[cls] = pin_class(cls, test_code)
    return pinned


def broken(item: object, pinned: dict[type, dict[str, object]], before: bool) -> str:
    """What is wrong with ``item``'s test case around its call ('' when nothing): ``before``, an
    instance of another class or running another method; after, a pin taken off its class."""
    cls = getattr(item, "cls", None)
    if cls not in pinned:
        return ""
    if before:
        instance = getattr(item, "instance", None)
        if type(instance) is not cls:
            return f"the test case is a {type(instance).__name__}, not the collected {cls.__name__}"
        method = _object_getattribute(instance, "__dict__").get("_testMethodName")
        if method != getattr(item, "name", None):
            return f"the test case runs {method!r}, not the collected {getattr(item, 'name', '')!r}"
        return ""
    for name, pin in pinned[cls].items():
        if vars(cls).get(name) is not pin:
            return f"unittest's {name} pinned on {cls.__name__} was replaced during the test"
    return ""
