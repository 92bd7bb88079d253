"""The three pytest sessions of one evaluation and what they share: the hidden acceptance tests (with
their canaries, twins and sealed checks, from the kit's folder or laid in the copy: :mod:`.layout`),
the repo's own tests on the final tree and at the base (:mod:`.session` runs each one). The own-tests
sessions get a kit folder of their own, without the acceptance copy, and leave out the task's
``own_tests_deselect``; every session imports the task's ``packages`` from the tree
(:mod:`kit.tasks.packages`)."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path, PurePosixPath

from kit import pyast
from kit.sandbox.backends import default_sandbox, get_sandbox
from kit.scoring.clean_copy import SKIP_NAMES, is_test_path, pytest_config_file
from kit.scoring.excluded import deselected, hide_excluded
from kit.scoring.inject import Injected, inject_folder, inject_own
from kit.scoring.layout import lay
from kit.scoring.naming import DEFAULT, Collecting, read_collecting
from kit.scoring.session import Canaries, Expect, PytestRun, prepare_kit_dir, run_pytest, run_shell
from kit.scoring.verdicts import ACCEPTANCE_DIRNAME
from kit.tasks.packages import command_env, import_roots, root_paths
from kit.tasks.requirements import TEST_FILE_RE
from kit.tasks.task import Task
from kit.tasks.workspace import COPY_IGNORE


def _pytest_args(command: str) -> list[str] | None:
    """The arguments after ``pytest`` in a ``python -m pytest ...`` / ``pytest ...`` command, else None."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return None
    if argv and Path(argv[0]).name == "pytest":
        return argv[1:]
    if len(argv) >= 3 and Path(argv[0]).name.startswith("python") and argv[1:3] == ["-m", "pytest"]:
        return argv[3:]
    return None


_COMMON = ["-p", "no:cacheprovider", "--continue-on-collection-errors", "--maxfail=0"]
AUDIT_SETTINGS = "audit.json"  # what the audit hook is told of the copy: laid files, base code


#: a turn waits at most this long for the one before it (a session that failed before its turn
#: ends it too; this is the guard against a wait nothing ends)
TURN_WAIT_S = 60.0


class Turns:
    """The order in which the sessions write their tests' canaries and twins: one at a time, the
    session expected to take longest first. Injection is pure Python in the kit's process: two at
    once share the interpreter's lock and both end late -- tomlkit's hidden tests waited 0.2 s for the
    own tests' injection, on the scoring's longest path. Each turn runs with the cyclic garbage
    collector paused (:func:`kit.pyast.gc_paused`). :meth:`wait_all` is for work of the kit's
    process that can wait until both are written (the line count)."""

    def __init__(self, order: Sequence[str]) -> None:
        self.order = list(order)
        self.done = {name: threading.Event() for name in self.order}

    @contextlib.contextmanager
    def turn(self, name: str) -> Iterator[None]:
        """Wait for the sessions before ``name`` (none for a name not in the order), then go; the
        turn ends with the block, however it ends."""
        for prior in self.order[: self.order.index(name)] if name in self.done else []:
            self.done[prior].wait(TURN_WAIT_S)
        try:
            with pyast.gc_paused():
                yield
        finally:
            self.end(name)

    def end(self, name: str) -> None:
        if name in self.done:
            self.done[name].set()

    def wait_all(self) -> None:
        for event in self.done.values():
            event.wait(TURN_WAIT_S)


class Sessions:
    """What the three pytest sessions of one evaluation share: the task, sandbox, kit folder, canaries,
    timeout, and the order in which they write their tests (:class:`Turns`)."""

    def __init__(self, task: Task, sandbox: str | None, kit_dir: Path, timeout_s: float) -> None:
        self.task = task
        self.turns = Turns(["acceptance", "own"])
        self.prefix = ACCEPTANCE_DIRNAME + "/"  # of the hidden tests' node ids (folder layout)
        self.sandbox = get_sandbox(sandbox or default_sandbox())
        # one kit folder per kind of session: the own-tests sessions never see the acceptance copy
        self.kit_dir = prepare_kit_dir(kit_dir / "acceptance")
        self.own_dir = prepare_kit_dir(kit_dir / "own")
        self.timeout_s = timeout_s
        self.canaries = Canaries.new()
        self.own_canary = self.canaries.write(_mkdir(self.own_dir / "_orchbench_canary"))
        self.injected = Injected()
        self.own_too_large: list[str] = []  # own-test modules run as written (inject_own's too_large)
        #: session label -> why it ran without canaries (its configuration collects no name the kit
        #: can give them: :attr:`.naming.Collecting.unnamed`)
        self.unverified: dict[str, str] = {}
        (self.own_dir / "empty.ini").write_text("[pytest]\n", encoding="utf-8")

    def first(self, name: str) -> None:
        """Let session ``name`` (``acceptance`` or ``own``) write its tests first (:class:`Turns`)."""
        self.turns = Turns([name, *(n for n in ("acceptance", "own") if n != name)])

    def packages(self, repo: Path) -> dict:
        """The launcher's settings for the task's ``packages`` (:mod:`kit.tasks.packages`)."""
        if not self.task.packages:
            return {}
        roots = import_roots(self.task.repo_dir, self.task.packages)
        return {"packages": self.task.packages, "package_roots": root_paths(repo, roots)}

    def collecting(self) -> Collecting:
        """What the acceptance session collects: the task's configuration where it is laid (``repo``
        layout: :mod:`.layout`), else the kit's ini (pytest's defaults)."""
        if self.task.acceptance_layout != "repo":
            return DEFAULT
        return read_collecting(pytest_config_file(self.task.acceptance_dir))

    def own_collecting(self, repo: Path) -> Collecting:
        """What an own-tests session in ``repo`` collects: the repo's configuration (or none) and the
        test command's ``-o`` options."""
        ini = pytest_config_file(repo) or self.own_dir / "empty.ini"
        return read_collecting(ini, _pytest_args(self.task.test_command) or [])

    def acceptance(
        self, repo: Path, code: dict | None = None, record: bool = False, avoid: set[str] = frozenset()
    ) -> PytestRun:
        """The hidden tests, with a must-fail twin beside each and canaries inside each module: from
        the kit's folder (``folder`` layout) or laid at their paths in ``repo`` (:mod:`.layout`).
        ``code``: which code of ``repo`` is the base's (:mod:`.basecode`), for the audit hook;
        ``record``: report which data files of ``repo`` the session reads (``PytestRun.reads``);
        ``avoid``: test names the kit's may not take (the base tree's: :mod:`.usednames`)."""
        folder = self.kit_dir / ACCEPTANCE_DIRNAME
        with self.turns.turn("acceptance"):  # (the laying too: the kit's Python, as the injection)
            shutil.copytree(self.task.acceptance_dir, folder, ignore=COPY_IGNORE)
            hide_excluded(folder, self.task.excluded)  # exclude_tests: never collected
            collecting = self.collecting()
            self.injected = inject_folder(folder, avoid=avoid, collecting=collecting)
            if collecting.unnamed and not self.injected.canaries:
                self.unverified["acceptance"] = collecting.unnamed
            ini = self.kit_dir / "acceptance.ini"
            ini.write_text("[pytest]\npython_files = test_*.py *_test.py\n", encoding="utf-8")
            extra, ro_files, pins, audit = self.packages(repo), [], [], dict(code or {})
            extra["record"] = record
            extra["test_timeout_s"] = self.task.limits.test_limit_s
            if self.task.acceptance_layout == "repo":
                self.prefix = ""
                laid = lay(folder, self.task.acceptance_dir, repo, self.task.repo_dir)
                ini, root, paths = laid.config or ini, repo, laid.modules
                ro_files, pins = laid.read_only(), laid.pins
                audit.update(laid.audit())
                extra["compiled"] = compiled(Path(p) for p in laid.tests)
            else:
                root, paths = self.kit_dir, [str(folder)]
                extra["compiled"] = compiled(folder.rglob("*.py"))
            extra["audit"] = _write_json(self.kit_dir / AUDIT_SETTINGS, audit)
        canaries = {n: (self.prefix + m, must) for n, (m, must) in self.injected.canaries.items()}
        expect = Expect(
            canaries,
            self.injected.twins,
            dict(self.injected.sealed),
            self.injected.observer,
            shadows=self.injected.shadows,
            unverified=self.unverified.get("acceptance", ""),
        )
        args = ["-q", "-c", str(ini), f"--rootdir={root}", f"--confcutdir={root}"]
        args += [*_COMMON, "--tb=line", *paths]  # every twin fails: no source excerpts, same messages
        return run_pytest(
            self.sandbox,
            repo,
            self.kit_dir,
            "acceptance",
            args,
            expect,
            self.timeout_s,
            hidden=folder,
            extra=extra,
            ro_files=ro_files,
            pins=pins,
        )

    def own(
        self,
        label: str,
        repo: Path,
        command: str,
        code: dict | None = None,
        seconds: dict[str, float] | None = None,
    ) -> PytestRun:
        """The repo's own tests; a pytest command gets the kit's stream, anything else is one pass/fail.
        ``code``: which code of ``repo`` is the base's (:mod:`.basecode`; none: all of it counts);
        ``seconds``: what each test took at the base (the canaries copy tests measured cheap)."""
        args = _pytest_args(command)
        if args is None:
            self.turns.end(label)  # (nothing to write)
            env = command_env(self.task.packages, self.task.repo_dir, repo)
            return run_shell(self.sandbox, repo, command, self.timeout_s, env)
        with self.turns.turn(label):  # (the base's, on a task's first scoring, takes no turn)
            ini = pytest_config_file(repo) or self.own_dir / "empty.ini"
            collecting = read_collecting(ini, args)  # (the kit's names follow it: RT43-2b)
            side = _test_side_py(repo)
            modules = [r for r in side if TEST_FILE_RE.match(PurePosixPath(r).name)]
            # canaries among the repo's own tests, as in the acceptance session (03c, 03d: a separate
            # canary file could be told apart); the file only where no module can hold them
            left_out = self.task.own_tests_deselect  # (a scope none of whose tests runs gets none)
            injected = inject_own(repo, modules, left_out, seconds=seconds, collecting=collecting)
            if label == "own":
                self.own_too_large = injected.too_large
        # --tb=line: a full traceback of each must-fail canary tripled more-itertools' own-tests time
        args = [*args, "-c", str(ini), f"--rootdir={repo}", f"--confcutdir={repo}", *_COMMON, "--tb=line"]
        canaries = {n: v for n, v in injected.canaries.items() if not deselected(v[0], left_out)}
        expect, canary_file = self._own_expect(label, canaries, collecting)
        return run_pytest(
            self.sandbox,
            repo,
            self.own_dir,
            label,
            args,
            expect,
            self.timeout_s,
            canary_file,
            hidden=self.own_canary.parent,  # the audit hook watches the own tests too
            extra={
                **self.packages(repo),
                "shuffle": False,  # the repo's own order (a suite may depend on it)
                "processes": False,  # own tests may start processes
                "compiled": compiled([*([canary_file] if canary_file else []), *(repo / r for r in side)]),
                "audit": _write_json(self.own_dir / f"{label}-{AUDIT_SETTINGS}", code or {}),
                "deselect": self.task.own_tests_deselect,  # base versions of tests the change modified
                "test_timeout_s": self.task.limits.test_limit_s,
            },
        )

    def _own_expect(
        self, label: str, canaries: dict[str, tuple[str, bool]], collecting: Collecting
    ) -> tuple[Expect, Path | None]:
        """What an own-tests session must report, and the canary file it runs (where no module can
        hold canaries): named in the configuration's form, or none where it has none."""
        if canaries:
            return Expect(canaries, uncollected_ok=True), None
        if collecting.unnamed:
            self.unverified[label] = collecting.unnamed
            return Expect({}, uncollected_ok=True, unverified=collecting.unnamed), None
        form = collecting.forms()[0]
        if form == ("test_", ""):
            return self.canaries.expect(), self.own_canary
        named = self.canaries.in_form(*form)
        return named.expect(), named.write(self.own_canary.parent, f"{named.token}_{label}")


def compiled(paths: Iterable[Path]) -> list[list]:
    """``[path, rewrite?]`` for each Python file a session compiles before any code under test runs
    (``preload.py``): test modules and conftests get pytest's assertion rewriting, as pytest gives it."""
    return [[str(p), bool(TEST_FILE_RE.match(p.name)) or p.name == "conftest.py"] for p in paths]


def _test_side_py(root: Path) -> list[str]:
    """The Python files of ``root``'s test side (:func:`~.clean_copy.is_test_path`), relative."""
    out = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP_NAMES]
        for name in files:
            rel = PurePosixPath(Path(folder, name).relative_to(root).as_posix())
            if name.endswith(".py") and is_test_path(rel):
                out.append(str(rel))
    return out


def _write_json(path: Path, data: dict) -> str:
    """``data`` in a kit file the session sees read-only (no secret: the audit hook's view of the
    copy); its path for the settings."""
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path
