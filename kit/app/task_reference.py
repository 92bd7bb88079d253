"""``docs/tasks.md``, generated from the model that reads ``task.yaml`` (:class:`kit.tasks.task.TaskFile`)
and from the docstrings of the modules that define the rules (the severity rule, the transitions,
the importer's steps), so the page cannot drift from the code. ``python -m kit docs`` rewrites it
with docs/experiments.md; ``--check`` fails when either is stale (``tests/app/test_task_reference.py``)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from kit import pyast
from kit.app.reference import table
from kit.importers.git import importer, prompt, severity
from kit.paths import REPO_ROOT
from kit.records.schema import SEVERITIES
from kit.tasks.task import TaskFile, TaskLimits, TaskSource
from kit.tasks.transitions import MEANING

TASKS_REFERENCE = REPO_ROOT / "docs" / "tasks.md"


def markdown(doc: str | None) -> str:
    """A docstring as markdown: ``x`` -> `x`, :role:`x` -> `x` (last dotted part for modules)."""
    text = inspect.cleandoc(doc or "")
    text = re.sub(r":(?:mod|func|class|data|meth|attr):`~?\.?([\w.]+)`", lambda m: f"`{m.group(1)}`", text)
    return text.replace("``", "`")


def _after_first_paragraph(doc: str | None) -> str:
    return markdown(doc).split("\n\n", 1)[1] if "\n\n" in markdown(doc) else ""


INTRO = """# Tasks: the format, and bringing your own

Generated from the model that reads `task.yaml` (`kit/tasks/task.py`) and the modules that define the
rules (`kit/importers/git/`, `kit/tasks/transitions.py`) by `python -m kit docs`; do not edit by hand
(`tests/app/test_task_reference.py` fails when it is stale).

A task is a folder. Runs name it by id (a folder of `datasets/tasks/`) or by path (any folder holding
a `task.yaml`), in an experiment's `tasks:` or `kit run --tasks`:

```
task.yaml      what the task is (the fields below)
repo/          the starting code, with its own tests (they pass); the only thing a run's clone holds
acceptance/    the hidden tests, one requirement per test function; never shown to the agent
solution/      the reference change: full copies of the files it adds or modifies, at their paths;
               solution/DELETED.txt lists the files it deletes, one path a line (# comments allowed)
```

`DELETED.txt` lines are split at `\\n` only and each is taken exactly (a trailing space is part of
the name; a `\\r` is a control character and is refused); empty lines and lines starting with `#` are
left out. `import-git` refuses a change that deletes a file `DELETED.txt` cannot name (one starting
with `#`; a name with a line break or another control character is refused as every such path is).

A run's clone is a fresh git repository holding `repo/` as its one commit (built by the kit with a
fixed author and date: no history, no tags, no objects of anything later). Neither `acceptance/` nor
`solution/` enters it, and the agent's sandbox shows neither.

`python -m kit tasks validate ID|PATH|suite:NAME|--all` checks the contract, scored exactly as a run
is (the kit's scorer, in its sandbox): the own tests pass at the start; every hidden test fails at the
start (unless marked `baseline_pass`); with `solution/` laid over the start (and `DELETED.txt`
applied) every hidden test and every own test passes, and scoring sees no introspection. A session
pytest refuses to start (status 4, a usage error: an `addopts` naming a plugin's option such as
`--cov`, since the kit runs pytest with plugin autoload off) is named first, in pytest's words.
`python -m kit tasks list [PATH|suite:NAME]` lists the tasks of `datasets/tasks/` (or of the folder
PATH, or of a suite) with their requirements by severity and how many have a sealed check, and under
each its measured size, project, expert estimate, excluded tests and unexplained specification gaps;
for a suite, which of its tasks overlap. `validate` prints the requirements line too, refuses a
`long: true` the measure denies, and prints the specification audit's count.
"""


def _layouts() -> list[str]:
    return [
        "## Acceptance layouts (`acceptance_layout:`)",
        "",
        "- `folder` (the default; the hand-made and Exercism tasks): `acceptance/` is a folder of the "
        "kit's own. The hidden tests run from a kit folder beside the scoring copy of the final tree, "
        "with the kit's pytest configuration; the tree under test is on `sys.path` (last).",
        "- `repo` (what `import-git` writes): `acceptance/` mirrors repo-relative paths. It holds the "
        "hidden test modules -- each cut down to its hidden test functions plus everything they need "
        "(imports, helpers, fixtures, the non-test methods of their classes) -- the repo's "
        "`conftest.py` files on their paths, the pytest configuration they need and the test data "
        "they use. In the acceptance session's copy of the final tree each of these files is laid at "
        "its original path, replacing whatever the agent left there; pytest runs on the hidden test "
        "modules only, with the task's configuration -- never a configuration, conftest or data file "
        "the agent wrote. Sealed checks, must-fail twins, canaries, the report stream and the audit "
        "hook work as for `folder`.",
        "",
        "The own tests are the repo's tests as of the base commit, run on a copy of the final tree "
        "whose test files, conftests and pytest configuration are the base's, plus the test modules "
        "the agent added at new paths (their tests that pass count as tests added, nothing else), "
        "minus `own_tests_deselect`: an entry leaves out the node id it "
        "names and, when it names a module or a test function, every test under it "
        "(`path::Class::name[params]`).",
        "",
    ]


def _marks() -> list[str]:
    return [
        "## Requirements, severities and baseline marks",
        "",
        "Each test function in `acceptance/` (module level, or a method of a `Test*` class or a "
        "`unittest.TestCase` subclass) is one requirement; a parametrized test is one requirement "
        "that fails if any case fails. Its key is `<file>::[Class::]name`, the file relative to "
        "`acceptance/`. The kit reads the marks from the source (nothing is imported):",
        "",
        f'- `@pytest.mark.severity("critical" | "major" | "minor")` -- one of {", ".join(SEVERITIES)} -- '
        'on the function, its class, or the module (`pytestmark = pytest.mark.severity("major")`); '
        "the closest wins. A requirement without one is a task error. A failed requirement is a "
        "defect of its severity.",
        "- `@pytest.mark.baseline_pass` marks a test that is allowed to pass at the start; it is not "
        "a requirement (left out of the totals; one that fails at the end is reported apart as "
        "`baseline_broken`).",
        "",
        "### How a test's outcome on each side counts (`kit/tasks/transitions.py`)",
        "",
        "The base is the starting code; the change is the reference solution (when a task is imported "
        "or validated) or the agent's final tree (when a run is scored).",
        "",
        "| transition | counts as |",
        "|---|---|",
        *(f"| `{t.value}` | {m} |" for t, m in MEANING.items()),
        "",
    ]


def _import_git() -> list[str]:
    return [
        "## Bring your own task: `kit tasks import-git`",
        "",
        "```",
        "python -m kit tasks import-git REPO (--commit SHA | --range BASE..HEAD) [--id ID]",
        "    [--prompt-file F] [--out DIR] [--tests GLOB...] [--severities FILE] [--timeout S]",
        "    [--repo-url URL] [--force] [--exclude-test NODE_ID REASON]... [--sandbox bwrap|none]",
        "```",
        "",
        "REPO is a local git repository (a clone or a bare repository). `--commit SHA` takes a fix "
        "commit (the base is its first parent); `--range BASE..HEAD` a span of history, e.g. two "
        "release tags. The task is written to `--out` (default `datasets/tasks/`) as `<id>/`, the id "
        "from `--id` or the repository's folder name and the commit; an existing folder is replaced "
        "only with `--force`. It prints which test file it is checking, then the hidden tests by "
        "severity, the candidates it left out and the own tests it left out, each with why.",
        "",
        markdown(importer.__doc__).split("\n\n", 1)[1],
        "",
        "**The repository is untrusted.** Every git command goes through the kit's git wrapper: no "
        "hook, filter, diff driver, pager, fsmonitor or signature check of the repository runs; "
        "trees are written from the raw blobs (no `.gitattributes` conversion, `export-ignore` or "
        "`export-subst`); a symlink is kept only as a copy of a file inside the tree; submodules are "
        "left out.",
        "",
        "**Which files are tests.** " + markdown(_testfiles_doc()),
        "",
        "**The project's package must not be importable from the kit's own environment.** The "
        "importer finds the repository's top-level import names (packages and modules at its top or "
        "under `src/`; recorded as `packages:`) and **refuses** the import when the kit's interpreter "
        "(isolated, as scoring starts it) already imports one of them from elsewhere -- an installed "
        "release would shadow the task's code in scoring and hand the agent another version of the "
        "answer. Import such a project with a kit whose environment does not hold that package.",
        "",
        "### The severity rule (`kit/importers/git/severity.py`)",
        "",
        _after_first_paragraph(severity.__doc__),
        "",
        "### The prompt",
        "",
        "`--prompt-file F` gives it. Otherwise: " + markdown(prompt.__doc__).split(": ", 1)[1],
        "",
        "### What `task.yaml` records",
        "",
        "`acceptance_layout: repo`, `packages:`, `own_tests_deselect:` (each own test left out: the "
        "ones the change modified or removed, and the ones that fail at the base or with the "
        "reference solution), a `test_command` that `--ignore`s own test modules that do not even "
        "collect at the base or with the reference solution (or that the change deletes), `long:` as the "
        "kit measures it (below), `project:` (the repository's name), `exclude_tests:` (each "
        "`--exclude-test`, with its reason), `spec_gaps:` (the specification audit's unexplained gaps per "
        "kind), a `scoring_timeout_s` of at least three times the slowest validation scoring, "
        "and `source:` -- so a user can tell a task made before a model's training cutoff from one "
        "made after it.",
        "",
        "### Errors",
        "",
        "Each is one message and a non-zero exit status: not a git repository; an unknown commit; a "
        "root commit; a range that is not `BASE..HEAD` or whose BASE is not an ancestor of HEAD; a "
        "change with no test module, or no test function added or changed; no test going "
        "fail -> pass (each candidate listed with why; when the tests fail with the change on a module "
        "neither the repository nor the kit's environment has -- a test dependency such as freezegun -- "
        "the message names it: scoring runs the kit's own interpreter, so install it there, "
        "`.venv/bin/pip install ...`, or into the image with podman or docker); a probe session pytest "
        "refuses to start (a usage error, in pytest's words: an `addopts` naming a plugin's option such "
        "as `--cov`, which the kit's pytest, plugin autoload off, does not know); a package the kit's "
        "environment imports; an "
        "id that cannot name a folder; an existing task folder. A candidate that does not validate "
        "is refused with `kit tasks validate`'s reasons, and nothing is written.",
        "",
        "### Exercism exercises",
        "",
        "`python -m kit tasks import-exercism PATH` turns Exercism python-track exercises into "
        "`folder`-layout tasks (`kit/importers/exercism/importer.py`); `--severities FILE` takes the same "
        "mapping format (`datasets/severities/exercism-example.yaml`).",
        "",
    ]


def _hostile() -> list[str]:
    """The section on untrusted repositories, from the docstrings of the modules that enforce it."""
    from kit.importers.git import gitread, gitview, layout, plan, probe
    from kit.importers.validate import task_path_problems
    from kit.untrusted import confine

    def flat(text: str) -> str:
        return " ".join(text.split())

    return [
        "## A repository is hostile input",
        "",
        "`kit tasks import-git` and `kit tasks build-suite` treat a user's repository -- its config, "
        "trees, paths, commit messages and the tests the importer probes -- as untrusted, like an "
        "agent's clone; so does `kit tasks validate` a task folder. A run's clone and its cached base "
        "are repositories the kit makes itself (its own config, no remote): the repository's files "
        "enter them as content only, and every kit-side git call runs without replace objects and "
        "with local transport only (`kit/tasks/git.py`). The cached base is found by the task id, its "
        "`setup`, every `repo/` file's path, executable bit and bytes and every link's target (`kit/tasks/workspace.py`), never by sizes and "
        "times, which `cp -p`, `rsync -a` or an archive keep across an edit; hashing costs about 0.4 s "
        "a workspace for a 77 MB, 3,000-file `repo/` and under 1 ms for a shipped task "
        "(`tests/benchmarks/workspace_bench.py --key-repo DIR`).",
        "",
        "**Its git runs nothing** (`kit/importers/git/gitview.py`). " + flat(markdown(gitview.__doc__)),
        "",
        "**Its paths stay inside their folders** (`kit/untrusted/confine.py`). "
        + flat(markdown(confine.__doc__)),
        "",
        "**A task folder's files** (`kit/importers/validate.py`). "
        + flat(markdown(task_path_problems.__doc__)),
        "",
        "**The probe sessions' reports** (`kit/importers/git/layout.py`). "
        + flat(_after_first_paragraph(layout.read_data.__doc__)),
        "",
        "**Bounded time** (`kit/importers/git/probe.py`). "
        + flat(markdown(probe.__doc__.split("\n\n")[-1]))
        + f" `BUDGET_FACTOR` is {probe.BUDGET_FACTOR}: {probe.BUDGET_FACTOR * 120 // 60} minutes at the default"
        " `--timeout 120`.",
        "",
        "**Bounded memory** (`kit/importers/git/gitread.py`). "
        + flat(_after_first_paragraph(gitread.__doc__).split("\n\n")[1])
        + f" The limits: {gitread.MAX_FILE_BYTES // 2**20} MB a file, {gitread.MAX_TREE_BYTES // 2**20} MB "
        f"and {gitread.MAX_TREE_FILES:,} files a tree, {gitread.MAX_COMMIT_BYTES // 2**10} KB a commit, "
        f"{gitread.MAX_RANGE_COMMITS:,} commits and {gitread.MAX_RANGE_BYTES // 2**20} MB of commit objects "
        f"a range; no Python source over {pyast.MAX_SOURCE_BYTES // 2**20} MB is parsed. A test module the "
        "change adds or changes must be UTF-8 and nest at most "
        f"{plan.MAX_TEST_NESTING} levels deep (scoring copies each test's syntax tree recursively), or the "
        "import stops with one error naming it.",
        "",
    ]


def _scored_tree() -> list[str]:
    """What the scored tree holds: every strategy's working files as at the base (:mod:`kit.paths`)."""
    from kit import paths

    return [
        "### What the scored tree holds (`kit/paths.py`: `owned_paths`)",
        "",
        "The hidden tests and the own tests run on a clean copy of the clone's snapshot (docs/scoring.md): "
        "the agent's files, less `.git`, caches, compiled files, links out of the clone and special files, "
        "and with every strategy's working files as at the base commit.",
        "",
        markdown(paths.owned_paths.__doc__.split("\n", 2)[2]),
        "",
        "The paths today: "
        + "; ".join(
            f"{name}: " + ", ".join(f"`{path}`" for path in files.values())
            for name, files in paths.STRATEGY_FILES.items()
            if files
        )
        + " (vibe and workflow keep none in the clone), declared in `STRATEGY_FILES`; the strategies take "
        "their names from it, and an experiment's option named in `PATH_OPTIONS` (linear's `plan_file`) "
        "adds the path it gives for that experiment's runs. A task's `repo/` may hold a file at one of them: "
        "it is scored as the base has it, and the agent's change there (or the reference solution's) "
        "never is -- a hidden test that needs such a change fails on the reference too, so `kit tasks "
        "validate` names it and import-git leaves it out (it is not fail -> pass). `repo/.pdca/status` is "
        "refused outright (above).",
        "",
    ]


def _fair() -> list[str]:
    """Size, the specification audit, excluded and flaky tests, overlap: what makes a task fair."""
    from kit.importers import overlap, size, spec_audit
    from kit.importers.git import flaky
    from kit.tasks.suite_manifest import ExcludedTest, SpecNote

    return [
        "## Tasks a strategy can be judged on fairly",
        "",
        *_scored_tree(),
        "### Size (`kit/importers/size.py`)",
        "",
        markdown(size.__doc__),
        "",
        "`kit tasks list` shows each task's size, import-git and build-suite print it, and every run "
        "record carries it (`task_size`) with the task's `project`. A `long: true` in task.yaml or a "
        "suite manifest that the measure denies is refused (`kit tasks validate`, `build-suite`).",
        "",
        "### The specification audit: `kit tasks audit TASK|suite:NAME`",
        "",
        markdown(spec_audit.__doc__),
        "",
        "It prints `test  line  kind  what` per gap (an explained one with its note) and exits 1 when a "
        "gap is unexplained. import-git runs it and records the unexplained gaps per kind in "
        "`spec_gaps:`; `kit tasks validate` prints their count; **`build-suite` refuses a suite task with "
        "an unexplained gap** -- state it in the prompt, leave the test out (`exclude_tests:`) or explain "
        "it (`spec_notes:`) in the manifest.",
        "",
        "**What it cannot see:** " + spec_audit.CANNOT_SEE + ". A clean audit is no proof that a prompt "
        "is complete; a person's review still is.",
        "",
        "### `exclude_tests:` and `spec_notes:` (task.yaml, or a suite manifest's import entry)",
        "",
        " ".join(markdown(ExcludedTest.__doc__).split()) + " import-git leaves such a test out of the "
        "hidden tests (`--exclude-test`), so it never enters `acceptance/`; in a task that ships one, "
        "scoring renames it so pytest never collects it. A manifest's entries change the build (the task "
        "is imported again); its `spec_notes` do not (build-suite writes them into task.yaml).",
        "",
        *table(ExcludedTest, "ExcludedTest"),
        "",
        " ".join(markdown(SpecNote.__doc__).split()),
        "",
        *table(SpecNote, "SpecNote"),
        "",
        "```yaml",
        "exclude_tests:",
        '  - test: "tests/test_more.py::InterleaveRandomlyTests::test_basic"',
        '    reason: "pinned to random.seed(0): incidental output order"',
        "spec_notes:",
        '  - test: "*"',
        '    what: "ParseError"',
        "    note: \"the parser's one error type, named by the base's API docs\"",
        "```",
        "",
        "### Flaky tests (`kit/importers/git/flaky.py`)",
        "",
        markdown(flaky.__doc__),
        "",
        "### Overlapping tasks (`kit/importers/overlap.py`)",
        "",
        markdown(overlap.__doc__),
        "",
    ]


def _testfiles_doc() -> str:
    from kit.importers.git import testfiles

    return markdown(testfiles.__doc__).split("**Test side.** ", 1)[1]


def render() -> str:
    parts = [INTRO]
    for title, model, prefix in (
        ("`task.yaml`", TaskFile, "TaskFile"),
        ("`limits:` (in task.yaml)", TaskLimits, "TaskLimits"),
        ("`source:` (in task.yaml; written by import-git)", TaskSource, "TaskSource"),
    ):
        parts += [f"## {title}", "", " ".join(markdown(model.__doc__).split()), "", *table(model, prefix), ""]
    parts += _layouts() + _marks() + _import_git() + _hostile() + _fair()
    return "\n".join(parts).rstrip() + "\n"


def write(path: Path | None = None) -> Path:
    path = path or TASKS_REFERENCE
    path.write_text(render(), encoding="utf-8")
    return path


def is_current(path: Path | None = None) -> bool:
    path = path or TASKS_REFERENCE
    return path.is_file() and path.read_text(encoding="utf-8") == render()
