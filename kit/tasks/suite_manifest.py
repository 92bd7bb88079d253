"""A suite built from repositories' history: the manifest part of ``datasets/suites/<name>.yaml``.

Third-party code is never committed to the kit. A suite of tasks made from public projects (e.g.
``real-repos``) ships as a manifest -- per project its public URL and licence, per task the commit or
range and the ``kit tasks import-git`` options -- and ``python -m kit tasks build-suite NAME --repos DIR``
(:mod:`kit.importers.suite_build`) builds the task folders from local clones into the git-ignored
:func:`kit.paths.built_tasks_dir`, where the task loader finds them::

    projects:
      more-itertools: {url: https://github.com/more-itertools/more-itertools, licence: MIT}
    imports:
      - id: more-itertools-10-8
        project: more-itertools
        range: 1e5a7c0e...7d3c5f1a     # full SHAs (v10.7.0..v10.8.0 in `note`)
        note: the v10.8.0 release
        options: [--tests, "tests/*.py"]
        prompt: real-repos/more-itertools-10-8.md   # optional; relative to datasets/suites/
        exclude_tests:                  # hidden tests that pin incidental behaviour: not requirements
          - {test: "tests/test_more.py::InterleaveRandomlyTests::test_basic", reason: "pinned to random.seed(0)"}
        spec_notes:                     # gaps of the specification audit a person explained
          - {test: "*", what: "MAX_NESTING_DEPTH", note: "why the prompt need not state it"}

The suite's ``tasks`` list is the imports' ids when it is not given.
"""

from __future__ import annotations

import fnmatch

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kit.config import SafeName

#: The command that builds a suite's tasks (named in every "not built" error).
BUILD_COMMAND = "python -m kit tasks build-suite {name} --repos DIR"


class SuiteProject(BaseModel):
    """A public project the suite's tasks come from."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(
        pattern=r"^https://[^/\s\x00-\x1f]+/[^/\s\x00-\x1f]+/[^/\s\x00-\x1f]+/?$",
        description="https://HOST/OWNER/NAME",
    )
    licence: str = Field(description="The licence's SPDX id (MIT, BSD-3-Clause, ...).")
    licence_file: str = Field(
        "LICENSE", description="The licence file in the project's tree, copied into each built task."
    )

    @property
    def name(self) -> str:
        """The repository's name (the URL's last part, without .git)."""
        return self.url.rstrip("/").removesuffix(".git").rsplit("/", 1)[-1]

    @property
    def owner(self) -> str:
        return self.url.rstrip("/").removesuffix(".git").rsplit("/", 2)[-2]


class ExcludedTest(BaseModel):
    """A hidden test left out on purpose: not a requirement, never run as a hidden test."""

    model_config = ConfigDict(extra="forbid")

    test: str = Field(
        min_length=1,
        description="The test's pytest node id (repo-relative in the repo layout, relative to acceptance/ "
        "in the folder layout): `tests/test_more.py::InterleaveRandomlyTests::test_basic`.",
    )
    reason: str = Field(min_length=1, description="Why it is left out (e.g. pinned to random.seed(0)).")


class SpecNote(BaseModel):
    """A gap of the specification audit (:mod:`kit.importers.spec_audit`) a person explained: the
    audit shows it as explained and ``build-suite`` accepts it."""

    model_config = ConfigDict(extra="forbid")

    test: str = Field(min_length=1, description='The hidden test\'s node id, or "*" for every test.')
    what: str = Field(
        min_length=1,
        description="The gap's `what` exactly as `kit tasks audit` prints it (or a shell-style pattern "
        "with `*`).",
    )
    note: str = Field(min_length=1, description="Why the prompt need not state it.")

    def explains(self, test: str, what: str) -> bool:
        return _matches(self.test, test) and _matches(self.what, what)


def _matches(pattern: str, value: str) -> bool:
    return pattern == value or ("*" in pattern and fnmatch.fnmatchcase(value, pattern))


class ExpertEstimate(BaseModel):
    """Fields shared by task.yaml and a suite's import entry: a person's estimate of the work."""

    expert_minutes: float | None = Field(
        None, gt=0, description="A person's estimate of the minutes a competent developer needs."
    )
    expert: str | None = Field(None, description="Who made the `expert_minutes` estimate.")

    @model_validator(mode="after")
    def _who(self) -> ExpertEstimate:
        if self.expert_minutes is not None and not (self.expert or "").strip():
            raise ValueError("`expert_minutes` needs `expert`: who made the estimate")
        return self


class SuiteImport(ExpertEstimate):
    """One task of the suite: ``kit tasks import-git`` on the project's clone with these arguments."""

    model_config = ConfigDict(extra="forbid")

    id: SafeName = Field(description="The task id (the built folder's name).")
    project: str = Field(description="A key of the suite's `projects`.")
    commit: str | None = Field(None, description="A fix commit (full SHA): base = its first parent.")
    range: str | None = Field(None, description="BASE..HEAD (full SHAs): a release span or series.")
    note: str = Field("", description="What the commit or range is (tags, subject), for people.")
    long: bool = Field(
        False,
        description="Whether the task is long by the kit's measure (kit.importers.size: 150+ code lines, 2+ "
        "files, 8+ hidden tests); build-suite refuses a task whose measure differs.",
    )
    prompt: str | None = Field(
        None, description="A prompt file (our own words), relative to datasets/suites/; else generated."
    )
    options: list[str] = Field(default_factory=list, description="--tests, --timeout, --probe-budget")
    exclude_tests: list[ExcludedTest] = Field(
        default_factory=list, description="Hidden tests left out, each with why (recorded in task.yaml)."
    )
    spec_notes: list[SpecNote] = Field(
        default_factory=list, description="Explained gaps of the specification audit (written to task.yaml)."
    )

    @model_validator(mode="after")
    def _one_source(self) -> SuiteImport:
        if (self.commit is None) == (self.range is None):
            raise ValueError(f"task {self.id!r}: give exactly one of `commit` and `range`")
        if self.range is not None and self.range.count("..") != 1:
            raise ValueError(f"task {self.id!r}: `range` is BASE..HEAD")
        return self


class SuiteManifest(BaseModel):
    """The build part of a suite file (both empty for a suite of shipped tasks)."""

    projects: dict[str, SuiteProject] = Field(default_factory=dict)
    imports: list[SuiteImport] = Field(default_factory=list)

    @model_validator(mode="after")
    def _known_projects(self) -> SuiteManifest:
        for item in self.imports:
            if item.project not in self.projects:
                known = ", ".join(self.projects) or "(none)"
                raise ValueError(f"task {item.id!r}: unknown project {item.project!r} (known: {known})")
        ids = [item.id for item in self.imports]
        if len(set(ids)) != len(ids):
            raise ValueError(f"a task id is listed twice: {sorted({i for i in ids if ids.count(i) > 1})}")
        return self
