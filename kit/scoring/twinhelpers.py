"""The runtime helpers of the must-fail twins (:mod:`.twins`), written once into each module copy
of the hidden tests under random names (their source, formatted with a :class:`.twins.Names`)."""

from __future__ import annotations

#: Runtime helpers, written once into each module copy under random names:
#: ``{sent}(a, b)`` -- True if ``a`` or ``b`` equals a sentinel mirroring the other's shape;
#: ``{eq}(a, b, expected_first)`` -- that, or ``a == b`` does not hold (the assertion inverted), the
#: mirrors compared first or last as the kit chose (the first comparison tells a value nothing);
#: ``{check}(a, b, mode)`` -- the one helper a requirement's ``assert a == b`` and its twin's (and
#: shadow's) check call, in the same frame at the same depth: the mirrors built first, held as often
#: as the operands they stand for, then ``a == mirror(b)``, ``b == mirror(a)`` and ``a == b`` from
#: its one frame, the mirrors first or last (``mode & 1``) as the kit chose for that assertion;
#: only what it returns depends on ``mode & 2`` (a twin: true unless a mirror was met or ``a == b``
#: failed; else ``a == b``, its exception raised): a value's ``__eq__`` sees the same stack, the
#: same references and the same order in the three tests, and only the data compared differ;
#: ``{failed}`` -- what it returns for false: falsy, shown by pytest as ``assert <a> == <b>``;
#: (``{guard}()``, the first statement of every test, is ``guard.py``'s ``GUARD``, written after these.)
#: Each helper holds what it calls -- the others, the builtins -- in a default argument bound when it
#: is defined, as each twin does (``{bind}``): the code under test swapping the module's globals
#: (a helper, ``type``) changes nothing they do; replacing a default or a ``__code__`` is audited.
HELPERS = """
class {sentinel}:
    __slots__ = ()


class {error}(Exception):
    pass


def {mirror}(value, budget, filled=False, _k=None):
    sentinel, mirror, type, list, tuple, dict, bool, int, float, str, bytes, abs, object, Exception, set, frozenset, complex = _k
    budget[0] -= 1
    kind = type(value)
    if budget[0] < 0:
        return sentinel()
    if filled and kind in (list, tuple, dict) and not value:  # an empty attribute: a full one
        return {{sentinel(): sentinel()}} if kind is dict else kind([sentinel()])
    if kind in (list, tuple, dict, set, frozenset) and value:
        if kind is dict:
            return {{key: mirror(item, budget) for key, item in value.items()}}
        out = kind(mirror(item, budget) for item in value)
        if kind in (set, frozenset) and out == value:  # {{True, False}}: its mirror is itself
            out = kind([*out][1:] + [sentinel()])
        return out
    try:  # a plain leaf: another value of its own type (a check of types or shapes alone meets it)
        if kind is bool:
            return not value
        if kind in (int, float, complex) and value == value and abs(value) < 1e300:
            return value + 7
        numbers = kind.__module__ in ("decimal", "_pydecimal", "fractions")
        if numbers and kind.__name__ in ("Decimal", "Fraction") and value == value and abs(value) < 1e300:
            return value + 7  # (not inf, not NaN: value + 7 differs)
        if kind in (str, bytes):
            return value + (b"~" if kind is bytes else "~")
        if kind.__module__ == "datetime" and kind.__name__ in ("date", "datetime"):
            return value - (value - value.min) // 2 - value.resolution
    except Exception:
        pass
    try:  # an object with attributes: one of its own class, every attribute mirrored (not empty)
        fields = object.__getattribute__(value, "__dict__")
    except Exception:
        fields = None  # slots
    if not kind.__flags__ & 512 or (type(fields) is dict and not fields):  # 512: a class statement's
        return sentinel()
    try:
        clone = object.__new__(kind)
        for key in fields if type(fields) is dict else ():  # else: slots, or a class's own __dict__()
            object.__setattr__(clone, key, mirror(fields[key], budget, True))
        return clone
    except Exception:
        return sentinel()


{mirror}.__defaults__ = (False, ({sentinel}, {mirror}, type, list, tuple, dict, bool, int, float, str, bytes, abs, object, Exception, set, frozenset, complex))


def {sent}(a, b, _k=({mirror}, Exception)):
    mirror, Exception = _k
    held = False
    for value, shape in ((a, b), (b, a)):  # both, always: how many == were asked tells nothing
        try:
            if value == mirror(shape, [10000]):
                held = True
        except Exception:
            pass
    return held


def {eq}(a, b, expected_first=False, _k=({sent}, Exception)):
    sent, Exception = _k
    held = False if expected_first else sent(a, b)
    try:
        held = not (a == b) or held
    except Exception:
        held = True
    return (sent(a, b) or held) if expected_first else held


class {failed}:
    __slots__ = ("pair",)

    def __init__(self, a, b):
        self.pair = (a, b)

    def __bool__(self):
        return False

    def __repr__(self, _k=(repr, len, Exception)):  # what pytest shows: "assert <a> == <b>"
        repr, len, Exception = _k
        out = []
        for side in self.pair:
            try:
                text = repr(side)
            except Exception as exc:
                text = "<repr raised " + type(exc).__name__ + ">"
            out.append(text if len(text) <= 110 else text[:60] + "..." + text[-45:])
        return " == ".join(out)


def {check}(a, b, mode, _k=({mirror}, {sentinel}, {failed}, __import__("sys").getrefcount, bool, Exception)):
    mirror, sentinel, failed, count, bool, Exception = _k
    try:  # the mirrors, built before any comparison (whatever the mode)
        mb, ma = mirror(b, [10000]), mirror(a, [10000])
    except Exception:
        mb, ma = sentinel(), sentinel()
    keep = []  # each mirror held as often as the operand it stands for: getrefcount(other) tells nothing
    more = count(b) - count(mb)
    if 0 < more < 64:
        keep += [mb] * more
    more = count(a) - count(ma)
    if 0 < more < 64:
        keep += [ma] * more
    held, same, error = False, False, None
    for step in (0, 1, 2) if mode & 1 else (2, 0, 1):  # every comparison from this frame, as the kit chose
        try:
            if step == 2:
                same = bool(a == b)
            elif step:
                held = bool(b == ma) or held
            else:
                held = bool(a == mb) or held
        except Exception as exc:
            if step == 2:
                error = exc
    if mode & 2:  # a twin: false where a mirror was met or a == b does not hold
        same = not held and same and error is None
    elif error is not None:  # a requirement: a == b, its error as the assertion's
        raise error
    return True if same else failed(a, b)

"""
