"""Reading a scoring session's report stream: one JSON line per event, written by the plugin
(``plugin.py``) to a pipe the kit reads while the tests run. :func:`read_stream` checks it:

- every line well formed and in sequence, no test reported twice, nothing after the session's end;
- every test's outcome one of :class:`kit.tasks.transitions.Outcome`'s, agreeing with its pass flag;
- every **canary** -- in the acceptance session two inside each test module (:mod:`.inject`), in an
  own-tests session two inside each class and module of the repo's own test modules (a kit canary
  file, run last, where none can hold them) -- is present with its expected outcome;
- the session ended normally: pytest's own end of session reached with status 1 (a canary always
  fails), and the process's exit status agrees.

Any violation is evidence of tampering (``Stream.tamper``): an early ``os._exit`` after some
outcomes were streamed, a hang until the scoring timeout, an interrupted session (status 2), a missing
canary. Only a stream that holds no line at all (the sandbox or the interpreter failed before the
plugin started) is an error rather than tampering. The outcomes of the must-fail twins
(:mod:`.twins`), the sealed checks' values and what the audit hook saw are returned apart.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from kit.records.schema import encodable
from kit.scoring.nodeids import split
from kit.tasks.transitions import Outcome

_OUTCOMES = frozenset(o.value for o in Outcome if o is not Outcome.ABSENT)
_PASSING = frozenset({Outcome.PASSED.value, Outcome.XPASSED.value})  # what pytest calls passed
EXIT_NAMES = {
    0: "ok",
    1: "tests failed",
    2: "interrupted",
    3: "internal error",
    4: "usage error",
    5: "no tests",
}


#: how the plugin reports a test cut at its time limit (``plugin._hooks``: "... of N s")
TIMED_OUT = "timed out: ran over its time limit"


@dataclass
class Expect:
    """The tests the kit added to a session, by test function name: canaries (name -> (node id of
    the module or class they sit in, "" for the own-tests canary file; must pass)) and twins (name ->
    requirement key)."""

    canaries: dict[str, tuple[str, bool]]
    twins: dict[str, str] = field(default_factory=dict)
    #: sealed check id -> its expected digest, or what has ``accepts(digest, ident)`` (seal.Site)
    sealed: dict[str, Any] = field(default_factory=dict)
    observer: str = ""  # the name they call
    #: a module none of whose tests reported excuses its canaries (the own tests: a test module the
    #: test command does not collect; its tests are absent at the end -- regressions -- if they ran
    #: at the base)
    uncollected_ok: bool = False
    shadows: dict[str, str] = field(default_factory=dict)  # a twin's shadow -> the twin's requirement
    #: why the session holds no canary ("" when it does): its configuration collects no name the kit
    #: can give one (:mod:`.naming`) -- no must-fail canary, so pytest may end with status 0
    unverified: str = ""


@dataclass
class Stream:
    """What a session's report stream says, checked."""

    outcomes: dict[str, tuple[bool, str]] = field(default_factory=dict)  # nodeid -> (passed, message)
    #: nodeid -> its outcome in :mod:`kit.tasks.transitions`' words (passed, skipped, xfailed, ...)
    states: dict[str, str] = field(default_factory=dict)
    twins: dict[str, list[bool]] = field(default_factory=dict)  # requirement key -> its twin passed?
    errors: list[str] = field(default_factory=list)  # collection errors, a session that never started
    complete: bool = False  # pytest reached its own end of session
    tamper: list[str] = field(default_factory=list)  # evidence the session or its report was bent
    seen: list[str] = field(default_factory=list)  # introspection by the code under test (audit hook)
    #: sealed check -> (times sent, the first value that did not match, "" if none)
    observed: dict[str, tuple[int, str | None]] = field(default_factory=dict)
    #: data files of the copy the session read (path -> "test" / "code"), when asked (``record``)
    reads: dict[str, set[str]] = field(default_factory=dict)
    #: requirements whose twin or twin's shadow was cut at its time limit: not credited
    cut_shadows: set[str] = field(default_factory=set)
    #: requirement -> the message of its twin's shadow that failed: tampering only if the requirement
    #: itself passed (:func:`kit.scoring.verdicts.results`)
    failed_shadows: dict[str, str] = field(default_factory=dict)
    #: nodeid -> the seconds it took (setup, call, teardown), as the session measured them: only
    #: the base commit's own-tests run is read for it (``inject_own`` picks cheap canary sources)
    seconds: dict[str, float] = field(default_factory=dict)


class _Reader:
    """Reads a report stream line by line (:func:`read_stream`)."""

    def __init__(self, expect: Expect) -> None:
        self.expect = expect
        self.out = Stream()
        self.canaries: dict[str, list[bool]] = {}
        self.canary_messages: dict[str, str] = {}  # a canary that failed: its first failure message
        self.copies: dict[str, list[tuple[str, bool]]] = {}  # canary name -> (node id, passed) of each copy
        self.uncollected: list[str] = []  # nodeids of modules that failed (or skipped) collection
        self.end: int | None = None
        self.lines = 0
        self.collected: int | None = None  # how many tests pytest collected (its own line)
        self.reported: set[str] = set()  # node ids of every test reported, the kit's included

    def line(self, seq: int, line: bytes) -> None:
        out = self.out
        try:
            msg = encodable(json.loads(line))  # a lone surrogate (a test's message) replaced
            kind, nodeid = msg["kind"], msg.get("nodeid", "")
            if msg["seq"] != seq or not isinstance(nodeid, str):
                raise ValueError
        except (ValueError, KeyError, TypeError, RecursionError):  # (a nesting bomb: garbled too)
            out.tamper.append(f"report line {seq} is garbled or out of sequence")
            return
        self.lines += 1
        if self.end is not None and kind != "seen":  # the audit hook may see an exit handler
            out.tamper.append(f"report line {seq} came after the session ended")
        elif kind == "test":
            self.test(
                seq, nodeid, msg.get("passed"), msg.get("message", ""), msg.get("outcome"), msg.get("defined")
            )
            spent = msg.get("micros")
            if type(spent) is int and 0 <= spent < 10**12 and nodeid in out.outcomes:
                out.seconds[nodeid] = spent / 1e6
        elif kind == "collect":
            self.uncollected.append(nodeid)
            out.errors.append(f"{nodeid or 'collection'}: {str(msg.get('message', ''))[:300]}")
        elif kind == "collected" and isinstance(msg.get("count"), int) and self.collected is None:
            self.collected = msg["count"]
        elif kind == "obs":
            self.observation(seq, msg)
        elif kind == "tamper":  # the plugin's own checks (preload.py: a test module not the kit's)
            out.tamper.append(str(msg.get("message", ""))[:300])
        elif kind == "read" and isinstance(msg.get("path"), str):  # (only asked of the importer's probes)
            if len(out.reads) < 2000:
                out.reads.setdefault(msg["path"], set()).add(str(msg.get("by", "")))
        elif kind == "seen":
            if len(out.seen) < 20:
                out.seen.append(str(msg.get("message", ""))[:300])
        elif kind == "end" and isinstance(msg.get("exitstatus"), int):
            self.end = msg["exitstatus"]
        elif kind != "start" or seq != 1:
            out.tamper.append(f"report line {seq} is of an unknown kind")

    def observation(self, seq: int, msg: dict) -> None:
        """A sealed check's value (its digest): kept by check; one the kit did not write is forged."""
        site, value, shown = msg.get("site"), msg.get("digest"), msg.get("shown", "")
        ident, case = msg.get("ident", ""), msg.get("case")
        if site not in self.expect.sealed or not all(isinstance(v, str) for v in (value, shown, ident)):
            self.out.tamper.append(f"report line {seq} is a sealed check the kit did not write")
            return
        want = self.expect.sealed[site]
        met = value == want and case is None if isinstance(want, str) else want.accepts(value, ident, case)
        if met and case is not None:  # a check by case (sealcases.py): kept by case
            site = f"{site}[{case}]"
        count, miss = self.out.observed.get(site, (0, None))
        if miss is None and not met:  # in a loop: every value must match
            miss = shown[:200] + (f" (case {case})" if type(case) is int and case >= 0 else "")
        self.out.observed[site] = (count + 1, miss)

    def test(
        self,
        seq: int,
        nodeid: str,
        passed: object,
        message: object,
        state: object = None,
        defined: object = None,
    ) -> None:
        out = self.out
        name = split(nodeid)[1]
        if name in self.expect.canaries:
            scope, home = _scope(nodeid), self.expect.canaries[name][0]
        elif name in self.expect.twins:  # (its requirement's scope, without the session's prefix)
            scope, home = _scope(nodeid), self.expect.twins[name].rpartition("::")[0]
            scope = home if scope.endswith("/" + home) else scope
        else:
            scope = home = None
        if home is not None and not _placed(scope, home, name, defined):
            name = ""  # a test of the suite's own that bears a kit name (RT42-3): read as what it is
        self.reported.add(nodeid)
        if state is None and isinstance(passed, bool):  # (a line without one: passed or failed)
            state = Outcome.PASSED if passed else Outcome.FAILED
        if (
            not isinstance(passed, bool)
            or not isinstance(message, str)
            or state not in _OUTCOMES
            or passed != (state in _PASSING)
        ):
            out.tamper.append(f"report line {seq} is garbled")
        elif nodeid in out.outcomes or nodeid in self.canaries:
            out.tamper.append(f"test reported twice: {nodeid}")
        elif name in self.expect.canaries:
            self.canaries[nodeid] = [passed]
            self.canaries.setdefault(name, []).append(passed)
            self.copies.setdefault(name, []).append((nodeid, passed))
            if not passed and message:
                self.canary_messages.setdefault(name, message[:160])
        elif name in self.expect.twins:
            self.canaries[nodeid] = [passed]  # (only to see a repeat)
            out.twins.setdefault(self.expect.twins[name], []).append(passed)
            if not passed and isinstance(message, str) and message.startswith(TIMED_OUT):
                # a twin cut at its limit failed as a right answer's twin does, but it was not asked:
                # code that sleeps (or calls the kit's timer handler) in twins only gains nothing
                out.cut_shadows.add(self.expect.twins[name])
        else:
            out.outcomes[nodeid] = (passed, message[:300])
            out.states[nodeid] = str(state)

    def ran(self, module: str) -> bool:
        """Did any test of ``module`` report? (Then it was imported: its canaries are not excused.)"""
        return any(nodeid.startswith(module + "::") for nodeid in self.reported)

    def all_failed(self, scope: str) -> bool:
        """Did every test of ``scope`` (a class's node id) that reported fail?"""
        mine = [ok for nodeid, (ok, _) in self.out.outcomes.items() if nodeid.startswith(scope + "::")]
        return bool(mine) and not any(mine)

    def check_canaries(self) -> None:
        for name, (scope, want) in self.expect.canaries.items():
            got = self.canaries.get(name)
            module = scope.split("::", 1)[0]
            label = "canary test that must " + ("pass" if want else "fail")
            if got and any(g != want for g in got):
                off = [_scope(nodeid) for nodeid, ok in self.copies.get(name, []) if ok != want]
                if want and module and all(self.all_failed(s) for s in off):
                    continue  # its class's setUp or fixture, or a skip mark, takes every test of it --
                    # of the class it was reported in: a subclass inherits it (RT42-1: a skipped one)
                if (
                    want
                    and name in self.expect.shadows
                    and self.canary_messages.get(name, "").startswith(TIMED_OUT)
                ):  # slow code (a base that is quadratic) cuts the shadow as it cuts the twin and the
                    # test: no evidence of a forged report, but its requirement is not credited --
                    # so a forger that reports shadows "timed out" gains nothing
                    self.out.cut_shadows.add(self.expect.shadows[name])
                    continue
                if want and name in self.expect.shadows:  # judged with its requirement: a fixture the
                    # code breaks fails the test, its twin and the shadow alike -- no forged report
                    self.out.failed_shadows[self.expect.shadows[name]] = self.canary_messages.get(name, "")
                    continue
                why = f" ({self.canary_messages[name]})" if want and name in self.canary_messages else ""
                self.out.tamper.append(f"{label} was reported {'failed' if want else 'passed'}{why}")
            elif not got and not (
                module and not self.ran(module) and (module in self.uncollected or self.expect.uncollected_ok)
            ):  # (a module that failed to import: every test of it is absent, nothing credited)
                if self.expect.uncollected_ok and scope != module and not self.ran(scope):
                    continue  # a class the own tests' configuration does not collect (``python_classes
                    # = *Tests``, a helper ``TestServer``: RT43-2), as an uncollected module: its tests
                    # are absent at the end -- regressions -- if they ran at the base
                self.out.tamper.append(f"{label} ({scope or 'canary file'}) is missing from the report")


def _scope(nodeid: str) -> str:
    return split(nodeid)[0]


def _placed(scope: str, home: str, name: str, defined: object) -> bool:
    """Is a test reported in ``scope`` (its function's ``__qualname__``: ``defined``) the kit's test
    ``name`` placed in scope ``home``? Where the kit put it, or a copy of that function: in a
    subclass, or its class collected in another module. A test of the suite's own that bears the name
    -- one a metaclass named after a data file (Python-Markdown's legacy tests), which no scan of the
    Python files finds -- is neither. (A line without the field: the copy, as before.)"""
    if scope == home or not isinstance(defined, str):
        return True
    return defined == ".".join([*home.split("::")[1:], name])


def read_stream(
    data: bytes, expect: Expect, exit_code: int | None, timed_out: bool, timeout_s: float = 0
) -> Stream:
    """The checked report of one session, from the plugin's stream and the process's exit status.

    Outcomes count only if the session was complete and verified: pytest's end of session reached
    with status 1 (a canary always fails; 5 only when no test module could be imported), the
    process's exit status the same, every canary present
    with its expected outcome (a module that failed to import excuses its own canaries), nothing
    garbled, repeated or after the end. Anything else is tamper evidence -- an early ``os._exit``, a
    hang until the scoring timeout and an interrupted session included. A stream with no line at all
    means the session never started (the sandbox or interpreter failed): an error, not tampering.
    """
    reader = _Reader(expect)
    lines = bytes(data).split(b"\n")
    cut = lines.pop()  # whatever follows the last newline: empty unless a write was cut off
    for seq, line in enumerate(lines, start=1):
        reader.line(seq, line)
    out, end = reader.out, reader.end
    if cut and end is not None:
        out.tamper.append("a partial report line after the session ended")
    if not reader.lines and not cut:
        out.errors.append(
            f"the session never started (timed out after {timeout_s:g} s)"
            if timed_out
            else f"the session never started (exit {exit_code})"
        )
        return out
    reader.check_canaries()
    if end is not None and reader.collected is None and reader.reported:
        out.tamper.append("the session reported tests but never said how many it collected")
    elif end is not None and reader.collected is not None and len(reader.reported) < reader.collected:
        missing = reader.collected - len(reader.reported)
        out.tamper.append(f"{missing} of {reader.collected} collected tests were never reported")
    if end is None:
        out.tamper.append(
            f"the session hung until the scoring timeout ({timeout_s:g} s)"
            if timed_out
            else f"the session stopped before pytest's end (exit {exit_code})"
        )
    elif end == 0:
        if not expect.unverified:  # (a session without canaries may pass: said apart, not tampering)
            out.tamper.append("pytest reported success although a canary test must fail")
    elif end == 5 and reader.uncollected and not reader.canaries and not out.outcomes:
        pass  # no module could be imported (or all were skipped): nothing ran, their canaries excused
    elif end == 5 and expect.unverified and not reader.reported:
        pass  # a session without canaries that collects nothing (``python_functions =``: RT44-2)
    elif end != 1:
        out.tamper.append(f"pytest ended with status {end} ({EXIT_NAMES.get(end, 'unknown')})")
    if end is not None and exit_code != end:
        what = "hung after the session ended" if timed_out else f"exited with {exit_code}"
        out.tamper.append(f"pytest ended with status {end} but the process {what}")
    out.complete = (end in (1, 5) or (end == 0 and bool(expect.unverified))) and not out.tamper
    return out
