"""Which functions and classes a session's pytest collects (``python_functions``, ``python_classes``),
and the names the kit gives the tests it injects (:mod:`.inject`) -- names that configuration collects.

RT43-2b: a project whose configuration collects ``check_*`` functions collected none of the kit's
``test_*`` canaries, and an honest solution's own tests were ``tampered`` ("canary ... is missing").
The kit's test names now follow the session's configuration, read as pytest reads it
(:func:`read_collecting`): each ``python_functions`` entry is a prefix, or a glob when it holds
``*``, ``?`` or ``[``. A name is ``prefix`` + the module's test-name words, or the words + ``suffix``
(``*_check``): :meth:`Collecting.forms`, each checked against pytest's rule. A module uses the form
most of its own tests use -- the kit's names look as the project's do. A method of a
``unittest.TestCase`` is collected by unittest's ``test`` prefix whatever the configuration: there the
kit's names start ``test_``. Where no form can be made (``python_functions = *[0-9]``) the kit's tests
get no name -- no canary, no twin -- and the session says so (:attr:`Collecting.unnamed`), rather than
calling the run tampered for canaries no pytest would collect. An empty ``python_functions =``
collects no plain function (RT44-2): canaries go into ``unittest.TestCase`` classes only. The file is
read as pytest reads it (:mod:`.pytestconfig`, RT44-8/9), then the ``-o`` of its ``addopts`` and of the
command (RT44-1); over :data:`MAX_PATTERNS` patterns the kit names nothing (RT44-5).

Helper names (:meth:`Namer.ident`) are never collected: neither ``python_functions`` nor
``python_classes`` matches them, and none is made of a word that holds ``test``."""

from __future__ import annotations

import ast
import fnmatch
import random
import re
import shlex
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from kit import pyast
from kit.scoring import pytestconfig

FILLER = [
    "value",
    "result",
    "input",
    "output",
    "empty",
    "returns",
    "keeps",
    "handles",
    "given",
    "when",
    "with",
    "order",
    "single",
    "many",
]
_GLOB = ("*", "?", "[")
_SAMPLES = ("value_result", "keeps_order_of_many", "a_b")
#: RT44-5: the patterns of ``python_functions`` / ``python_classes`` read (each at most this long):
#: :meth:`Collecting.forms` checks each against all (quadratic) -- 20,000 held a scoring for hours
MAX_PATTERNS = 100
MAX_PATTERN_CHARS = 200


def _matches(entries: tuple[str, ...], name: str) -> bool:
    """pytest's ``_matches_prefix_or_glob_option``: a prefix, or a glob where the entry holds one."""
    return any(
        name.startswith(e) or (any(c in e for c in _GLOB) and fnmatch.fnmatch(name, e)) for e in entries
    )


def _form(entry: str) -> tuple[str, str]:
    """The ``(prefix, suffix)`` an entry suggests: its text before the first glob character and
    after the last one, each joined to the words by ``_`` (``check*`` -> ``check_``)."""
    if not any(c in entry for c in _GLOB):
        head, tail = entry, ""
    else:
        first = min(entry.index(c) for c in _GLOB if c in entry)
        last = max(entry.rindex(c) for c in _GLOB if c in entry)
        head, tail = entry[:first], entry[last + 1 :] if entry[last] != "[" else ""
        tail = "" if "]" in tail else tail
    if not head and not tail:
        head = "test"
    prefix = head if not head or head.endswith("_") else head + "_"
    suffix = tail if not tail or tail.startswith("_") else "_" + tail
    return prefix, suffix


@dataclass(frozen=True)
class Collecting:
    """What a session collects: ``python_functions`` and ``python_classes`` (pytest's defaults)."""

    functions: tuple[str, ...] = ("test",)
    classes: tuple[str, ...] = ("Test",)
    #: why the kit does not name its tests here though it could read the configuration ("": it does)
    refused: str = ""

    def function(self, name: str) -> bool:
        return _matches(self.functions, name)

    def test_class(self, name: str) -> bool:
        return _matches(self.classes, name)

    def forms(self) -> list[tuple[str, str]]:
        """The ``(prefix, suffix)`` forms of a kit test name this configuration collects, in its order."""
        return list(self._forms)

    @cached_property
    def _forms(self) -> tuple[tuple[str, str], ...]:  # (computed once: RT44-5)
        out: list[tuple[str, str]] = []
        for entry in () if self.refused else self.functions:
            form = _form(entry)
            names = [form[0] + s + form[1] for s in _SAMPLES]
            if form not in out and all(n.isidentifier() and self.function(n) for n in names):
                out.append(form)
        return tuple(out)

    @property
    def unnamed(self) -> str:
        """Why the kit's tests can get no name in this session ("" when they can)."""
        if self.refused or self._forms:
            return self.refused
        what = (
            f"python_functions = {' '.join(self.functions)} collects no name the kit can give its canaries"
            if self.functions
            else "python_functions is empty (pytest collects no plain function) and no unittest.TestCase "
            "held the kit's canaries"
        )
        return f"{what}: the session ran without them (its report is unverified)"

    def is_test_func(self, node: ast.stmt, unittest: bool = False) -> bool:
        """A test function (a ``unittest.TestCase`` method: ``test*``, whatever the configuration)."""
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return False
        return node.name.startswith("test") if unittest else self.function(node.name)

    def is_test_class(self, node: ast.stmt) -> bool:
        """A class ``python_classes`` collects, or a ``unittest.TestCase`` subclass (whatever its name)."""
        return isinstance(node, ast.ClassDef) and (self.test_class(node.name) or is_testcase(node))

    def class_tests(
        self, body: list[ast.stmt], outer: tuple[ast.ClassDef, ...] = ()
    ) -> list[tuple[list[str], tuple[ast.ClassDef, ...], ast.FunctionDef]]:
        """:func:`kit.tasks.requirements.class_tests` under this configuration."""
        out: list[tuple[list[str], tuple[ast.ClassDef, ...], ast.FunctionDef]] = []
        for node in body:
            if self.is_test_class(node):
                chain = (*outer, node)  # type: ignore[arg-type]
                unittest = is_testcase(node)  # type: ignore[arg-type]
                for sub in node.body:  # type: ignore[attr-defined]
                    if self.is_test_func(sub, unittest):
                        out.append(([c.name for c in chain], chain, sub))  # type: ignore[arg-type]
                out.extend(self.class_tests(node.body, chain))  # type: ignore[attr-defined]
        return out

    def words(self, tree: ast.Module) -> list[str]:
        """The words of a module's test names, its forms' prefixes and suffixes left out."""
        out: list[str] = []
        forms = self.forms()
        for node in pyast.nodes(tree):
            if self.is_test_func(node) or self.is_test_func(node, unittest=True):
                out += _strip(node.name, forms).split("_")  # type: ignore[attr-defined]
        return out

    def form_of(self, tree: ast.Module) -> tuple[str, str] | None:
        """The form most of ``tree``'s own test functions use (the configuration's first on a tie)."""
        forms = self.forms()
        if not forms:
            return None
        names = [n.name for n in pyast.nodes(tree) if self.is_test_func(n)]  # type: ignore[attr-defined]
        used = Counter(f for name in names for f in forms if _fits(name, f))
        return max(forms, key=lambda f: (used[f], -forms.index(f)))


DEFAULT = Collecting()


def is_testcase(cls: ast.ClassDef) -> bool:
    return any(
        (b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "")).endswith("TestCase")
        for b in cls.bases
    )


def _fits(name: str, form: tuple[str, str]) -> bool:
    return name.startswith(form[0]) and name.endswith(form[1]) and len(name) > len(form[0] + form[1])


def _strip(name: str, forms: list[tuple[str, str]]) -> str:
    for prefix, suffix in forms:
        if _fits(name, (prefix, suffix)):
            return name[len(prefix) : len(name) - len(suffix)]
    return name.partition("_")[2]  # (a unittest method's ``test_``, as before)


def _entries(value: object) -> tuple[str, ...] | None:
    if isinstance(value, str):
        try:
            return tuple(shlex.split(value))
        except ValueError:
            return None
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    return None


def read_config(path: Path | None) -> dict[str, object]:
    """The pytest options in configuration file ``path``, read as pytest reads it (:mod:`.pytestconfig`)."""
    return pytestconfig.options(path)


def _patterns(key: str, value: object) -> tuple[str, ...] | str:
    """The patterns of option ``key``, or why the kit does not read them (over its caps: RT44-5)."""
    size = len(value) if isinstance(value, str) else sum(map(len, value)) if isinstance(value, list) else 0
    entries = _entries(value) if size <= MAX_PATTERNS * MAX_PATTERN_CHARS else None  # (shlex is slow)
    if size <= MAX_PATTERNS * MAX_PATTERN_CHARS and (
        not entries or (len(entries) <= MAX_PATTERNS and max(map(len, entries)) <= MAX_PATTERN_CHARS)
    ):
        return entries or ()  # (empty: pytest collects no plain function or class by name -- RT44-2)
    return _refused(key, size, entries)


def _refused(key: str, size: int, entries: tuple[str, ...] | None) -> str:
    return (
        f"{key} is {size:,} characters{f' in {len(entries):,} patterns' if entries else ''}, over what the "
        f"kit reads ({MAX_PATTERNS * MAX_PATTERN_CHARS:,} characters, {MAX_PATTERNS} patterns of up to "
        f"{MAX_PATTERN_CHARS}): the session ran "
        "without the kit's canaries (its report is unverified)"
    )


#: pytest's short options that take no value, and those that take one (``pytest --help``; a cluster
#: like ``-qo name=value`` is read as argparse reads it)
_SHORT_FLAGS, _SHORT_VALUED = frozenset("xVhvqls"), frozenset("kmWcpor")


def _overrides(args: list[str]) -> dict[str, object]:
    """The ``-o name=value`` / ``--override-ini`` options in ``args`` (the last of a name wins), read
    as pytest's argument parser reads them: ``-o`` alone or at the end of a cluster of short flags
    (``-qo``, ``-vvoname=value``), its value attached or the next argument; the value of another
    option (``-k -o``) is not one. A cluster with a letter pytest does not know is passed over."""
    out: dict[str, object] = {}
    flags = iter(args)
    for flag in flags:
        if flag == "--":  # (what follows is paths)
            break
        if flag in ("-o", "--override-ini"):
            text = next(flags, "")
        elif flag.startswith("--override-ini="):
            text = flag.partition("=")[2]
        elif flag.startswith("-") and not flag.startswith("--") and len(flag) > 1:
            rest = flag[1:].lstrip("".join(_SHORT_FLAGS))
            if not rest or rest[0] not in _SHORT_VALUED:
                continue
            value = rest[1:] or next(flags, "")
            if rest[0] != "o":
                continue
            text = value[1:] if flag.startswith("-o=") else value  # (argparse: ``-o=a=b`` is ``a=b``)
        else:
            continue
        key, sep, value = text.partition("=")
        if sep:
            out[key] = value
    return out


def read_collecting(path: Path | None, args: list[str] = ()) -> Collecting:  # type: ignore[assignment]
    """What a session started with ``-c path`` and the command's ``args`` collects: the file's options,
    the ``-o name=value`` of its ``addopts`` and of ``args`` (RT44-1: pytest puts ``addopts`` before
    the command line's own arguments: the command's ``-o`` wins)."""
    config = {**read_config(path), **_overrides(list(args))}
    addopts = config.get("addopts", "")
    if isinstance(addopts, str | list) and len(str(addopts)) > MAX_PATTERNS * MAX_PATTERN_CHARS:
        return Collecting((), (), _refused("addopts", len(str(addopts)), None))
    config.update(_overrides([*(_entries(addopts) or ()), *args]))
    found = [
        _patterns(k, config[k]) if k in config else d
        for k, d in (("python_functions", DEFAULT.functions), ("python_classes", DEFAULT.classes))
    ]
    refused = next((f for f in found if isinstance(f, str)), "")
    if refused:
        return Collecting((), (), refused)
    return Collecting(found[0], found[1])  # type: ignore[arg-type]


#: how many words a kit test name holds where the module has no test of its own to go by
_LENGTHS = (2, 3, 4, 5)


class Namer:
    """Random, unused names for one folder, made of ``words`` (the module's test-name words): test
    names for twins and canaries (in the module's form: :class:`Collecting`; as many words as one of
    the module's own tests holds -- always two to five told a one-word test a requirement: RT46-6),
    identifiers for helpers and variables -- no hex that would set what the kit adds apart."""

    def __init__(self, rng: random.Random, taken: set[str], collecting: Collecting = DEFAULT) -> None:
        self.rng = rng
        self.taken = taken
        self.words: list[str] = list(FILLER)
        self.collecting = collecting
        self.form: tuple[str, str] | None = ("test_", "")
        self.lengths: list[int] = list(_LENGTHS)  # how many words a test name holds: the module's (RT46-6)
        self._plain: list[str] | None = None  # (``words`` without ``test``: :meth:`ident`'s, kept)

    def _fresh(self, make: Callable[[int], str], ok: Callable[[str], bool] = lambda n: True) -> str:
        """A name ``make(attempt)`` gives that is not taken; ``make`` widens its names as the attempts
        grow (every 20th: one word more), so a module whose names use up the short ones (the own
        session's 10,000 canaries of a module of 5,000 classes) is not tried 1,000 times a name."""
        for attempt in range(1000):
            name = make(attempt)
            if name not in self.taken and name.isidentifier() and ok(name):
                self.taken.add(name)
                return name
        name = f"{make(0)}_{self.rng.getrandbits(32)}"
        self.taken.add(name)
        return name

    def ident(self, cls: bool = False) -> str:
        """A helper's or variable's name: never one a test collector takes for a test or a test
        class (a module's own words hold ``test``: ``test_for`` was collected, and refused)."""
        if self._plain is None:  # (once per module's words: a module of 5,000 classes has as many)
            plain = [w for w in self.words if "test" not in w.lower()]
            self._plain = plain if len(plain) >= 4 else sorted(set(plain) | set(FILLER))
        words, c = self._plain, self.collecting

        def pick(attempt: int) -> list[str]:
            return self.rng.sample(words, self.rng.randint(2, min(3 + attempt // 20, len(words))))

        def ok(name: str) -> bool:
            return not c.function(name) and not c.test_class(name)  # (its words hold no ``test``)

        if cls:
            return self._fresh(lambda a: "".join(w.capitalize() for w in pick(a)), ok)
        return self._fresh(lambda a: "_".join(pick(a)), ok)

    def test_name(self, unittest: bool = False) -> str | None:
        """A test's name in the module's form (``test_`` in a ``unittest.TestCase``); None where the
        configuration collects none the kit can make."""
        prefix, suffix = ("test_", "") if unittest else self.form or ("", "")
        if not unittest and self.form is None:
            return None
        collects = (lambda n: n.startswith("test")) if unittest else self.collecting.function

        def make(attempt: int) -> str:  # as many words as one of the module's tests, then more
            count = max(1, min(self.rng.choice(self.lengths) + attempt // 20, len(self.words)))
            return prefix + "_".join(self.rng.sample(self.words, count)) + suffix

        return self._fresh(make, collects)

    def use_module(self, tree: ast.Module) -> None:
        """Take ``tree``'s test-name words and form."""
        self.form = self.collecting.form_of(tree)
        unique = sorted({w for w in self.collecting.words(tree) if w.isidentifier()})  # (test_parseURL: RT42)
        forms, c = self.collecting.forms(), self.collecting
        names = [n.name for n in pyast.nodes(tree) if c.is_test_func(n) or c.is_test_func(n, unittest=True)]  # type: ignore[attr-defined]
        lengths = [len([w for w in _strip(n, forms).split("_") if w]) or 1 for n in names]
        self.lengths = lengths or list(_LENGTHS)
        self.words = unique if len(unique) >= 6 else sorted(set(unique) | set(FILLER))
        self._plain = None


def name_pattern(forms: list[tuple[str, str]]) -> re.Pattern[str]:
    """The names of ``forms`` (and ``test_*``, always) in a file's text (:mod:`.usednames`)."""
    alts = {r"test_\w+"}
    for prefix, suffix in forms:
        alts.add(re.escape(prefix) + r"\w+" if not suffix else r"\w+" + re.escape(suffix) + r"(?!\w)")
    return re.compile(r"(?<!\w)(?:" + "|".join(sorted(alts)) + ")")
