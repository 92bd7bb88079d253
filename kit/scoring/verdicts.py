"""What a scoring session's report credits: each requirement's verdict from its test's cases, its
must-fail twin's and its sealed checks' values (:mod:`.seal`), and the Score fields that count them.
"""

from __future__ import annotations

import ast
from pathlib import Path, PurePosixPath
from typing import Any

from kit import pyast
from kit.records.schema import SEVERITIES, FailedRequirement
from kit.scoring.inject import Injected
from kit.scoring.nodeids import without_case
from kit.scoring.session import PytestRun
from kit.tasks.requirements import Requirement, is_test_func
from kit.tasks.transitions import credits

ACCEPTANCE_DIRNAME = "_acceptance"


def requirement_key(nodeid: str, prefix: str = ACCEPTANCE_DIRNAME + "/") -> str | None:
    """The requirement a hidden test's node id is a case of (``prefix``: where the hidden tests sit
    relative to the session's root -- "" in the ``repo`` layout), or None. The case's id is cut
    after the module's path, which may hold "[" (``v[1]/test_x.py``: RT43-3; :mod:`.nodeids`)."""
    if not nodeid.startswith(prefix):
        return None
    return without_case(nodeid[len(prefix) :])


def inherited(keys: set[str], acceptance_dir: Path) -> set[str]:
    """The keys of ``keys`` (``module::Class[::Inner]::method``) that name a class of the hidden
    module whose body does not define that test method at its top level: a test it inherits (from a
    mixin or a test base class, in this module or another), which pytest runs under the subclass's
    name too, or one defined inside an ``if`` block of the class body (xmltodict). They are the base
    method's cases -- requirements (or not) by the base's own key -- or tests the kit does not read
    (a nested class the subclass inherits too),
    and no sign of a test the source lacks. A key whose module or class the source does not hold is
    not one of them."""
    out: set[str] = set()
    trees: dict[str, ast.Module | None] = {}
    for key in keys:
        parts = key.split("::")
        if len(parts) < 3:  # (a module-level test, or a node id no test of a module has: RT43-3b)
            continue
        rel, *classes, method = parts
        if rel not in trees:
            path = acceptance_dir / rel
            # (a node id is the session's word: no file outside the hidden tests is read -- RT43-3c)
            inside = not PurePosixPath(rel).is_absolute() and ".." not in PurePosixPath(rel).parts
            try:
                trees[rel] = pyast.parse(path.read_bytes(), str(path)) if inside and path.is_file() else None
            except (OSError, SyntaxError, ValueError):
                trees[rel] = None
        body = trees[rel].body if trees[rel] is not None else None
        for depth, name in enumerate(classes):
            found = [n for n in body or [] if isinstance(n, ast.ClassDef) and n.name == name]
            if not found and depth and body is not None:  # a nested class the outer one inherits
                body = []  # (``class TestB(TestA)``, TestA's ``TestInner``: RT43-4)
                break
            body = found[-1].body if found else None
        if body is not None and not any(is_test_func(n) and n.name == method for n in body):  # type: ignore[union-attr]
            out.add(key)
    return out


def results(
    requirements: list[Requirement],
    acc: PytestRun,
    tampered: list[str],
    twinned: set[str],
    prefix: str = ACCEPTANCE_DIRNAME + "/",
) -> tuple[dict[str, tuple[bool, str]], list[str]]:
    """requirement key -> (credited, message), and the keys that are gamed. A requirement is credited
    when every case of its test passed -- plainly: a skip, xfail or xpass is not credited
    (:func:`kit.tasks.transitions.credits`) -- and every case of its must-fail twin (if it has one) failed.
    ``tampered`` (extended here when a passing test's twin is missing) fails them all."""
    by_req: dict[str, list[tuple[bool, str]]] = {}
    for nodeid, (_, message) in acc.outcomes.items():
        key = requirement_key(nodeid, prefix)
        if key is not None:  # only a plain pass is credited: a skip, xfail or xpass is not
            by_req.setdefault(key, []).append((credits(acc.state(nodeid)), message or "not credited"))
    reason = "; ".join(acc.errors)[:300] or "not run"
    results: dict[str, tuple[bool, str]] = {}
    gamed: list[str] = []
    for req in requirements:
        outs = by_req.get(req.key)
        bad = [m for ok, m in outs or [] if not ok]
        if outs and not bad and any(acc.twins.get(req.key, [])):
            gamed.append(req.key)
            results[req.key] = (False, "gamed: its must-fail twin passed (met what nothing legitimate meets)")
        elif not outs:
            results[req.key] = (False, f"not run ({reason})")
        elif req.key in acc.cut_shadows:  # (stream.check_canaries): no credit on a cut double
            results[req.key] = (
                False,
                bad[0] if bad else "not credited: its twin or the twin's shadow ran over its time limit",
            )
        else:
            results[req.key] = (not bad, bad[0] if bad else "")
        if outs and not bad and req.key in acc.failed_shadows:  # the test passed, its double did not
            why = acc.failed_shadows[req.key]
            tampered.append(
                "acceptance: canary test that must pass was reported failed" + (f" ({why})" if why else "")
            )
        if outs and not bad and req.key in twinned and req.key not in acc.twins:
            tampered.append(f"acceptance: the must-fail twin of {req.key} is missing from the report")
    if tampered:
        results = {k: (False, f"tampered: {tampered[0]}"[:300]) for k in results}
    return results, gamed


def sealed_checks(results: dict[str, tuple[bool, str]], injected: Injected, acc: PytestRun) -> None:
    """Fail each requirement one of whose sealed checks (:mod:`.seal`) sent a value that is not the
    expected one (the first such check's values become its message), and each credited one whose
    test always reaches a sealed check that never sent: the session cannot know what a sealed check
    expects, so what it says of the test does not settle it."""
    for site, check in sorted(injected.sealed.items(), key=lambda kv: int(kv[0][1:])):
        credited, message = results.get(check.key, (False, "not run"))
        if message.startswith(("tampered", "gamed", "not run", "sealed")):
            continue
        count, miss = acc.observed.get(site, (0, None))
        if check.cases:  # by case (sealcases.py): a value that missed is kept by the check itself
            count = min(acc.observed.get(f"{site}[{i}]", (0, None))[0] for i in range(len(check.cases)))
        if miss is not None:  # (also when the test then failed: its first wrong value says more)
            results[check.key] = (
                False,
                f"sealed check failed: got {miss[:140]}, expected {check.expected[:140]}",
            )
        elif credited and check.required and not count:
            results[check.key] = (False, "sealed check never sent its value (the test passed without it)")


def _severity(req: Requirement) -> str:
    return req.severity if req.severity in SEVERITIES else "major"


def tally(
    requirements: list[Requirement], failing: list[Requirement], message: dict[str, str]
) -> dict[str, Any]:
    """The Score fields about requirements. A ``baseline_pass`` test already passed on the starting
    code: it is not a requirement (not in the totals); one that fails at the end is kept apart, in
    ``baseline_broken``."""
    counted = [r for r in requirements if not r.baseline_pass]
    defects = {s: 0 for s in SEVERITIES}
    failed = []
    for req in failing:
        if not req.baseline_pass:
            defects[_severity(req)] += 1
            failed.append(FailedRequirement(test=req.key, severity=_severity(req), message=message[req.key]))  # type: ignore[arg-type]
    return {
        "requirements_total": len(counted),
        "requirements_by_severity": {sev: sum(_severity(r) == sev for r in counted) for sev in SEVERITIES},
        "requirements_failed": len(failed),
        "baseline_broken": [r.key for r in failing if r.baseline_pass],
        "defects": defects,
        "failed": failed,
    }
