"""Old module paths, kept importing for one release (0.2 removes them).

Until this release ``kit/`` was one flat folder. Every old path in :data:`MODULES` still imports: the
import returns the module at its new path (the same object, so monkeypatching either name patches
both) and warns with a :class:`DeprecationWarning` that names the new path. :data:`NAMES` covers the
old modules that are now packages of the same name (``kit.records`` was one module and is now a
folder): an old name read from the package resolves, with the same warning, from the module it moved
to. :data:`RENAMED` lists the names renamed because one name meant two things. These tables are the
one list of what moved; ``tests/test_layers.py`` checks every entry.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType

#: old module path -> new module path
MODULES: dict[str, str] = {
    "kit.actions": "kit.model.actions",
    "kit.analysis_load": "kit.analysis.load",
    "kit.cli": "kit.app.cli",
    "kit.columnar": "kit.records.parquet",
    "kit.commands": "kit.sandbox.commands",
    "kit.context": "kit.strategies.context",
    "kit.control": "kit.run.control",
    "kit.exercism": "kit.importers.exercism.importer",
    "kit.exercism_marks": "kit.importers.exercism.marks",
    "kit.figures": "kit.analysis.figures",
    "kit.gateway": "kit.model.gateway",
    "kit.lab": "kit.app.prompt_lab",
    "kit.models": "kit.model",
    "kit.models.caching": "kit.model.caching",
    "kit.models.check": "kit.model.check",
    "kit.models.local": "kit.model.embedded",
    "kit.models.policies": "kit.model.policies",
    "kit.models.scripted": "kit.model.scripted",
    "kit.notebooks": "kit.app.notebooks",
    "kit.processes": "kit.sandbox.processes",
    "kit.ray_executor": "kit.run.ray_executor",
    "kit.reference": "kit.analysis.reference",
    "kit.report": "kit.analysis.report",
    "kit.repricing": "kit.analysis.repricing",
    "kit.runner": "kit.run.runner",
    "kit.safefs": "kit.agent.safefs",
    "kit.scoring_copy": "kit.scoring.clean_copy",
    "kit.scoring_launcher": "kit.scoring.launcher",
    "kit.scoring_plugin": "kit.scoring.plugin",
    "kit.scoring_run": "kit.scoring.session",
    "kit.strategies.pdca_plan": "kit.strategies.pdca.plan",
    "kit.strategies.pdca_reports": "kit.strategies.pdca.reports",
    "kit.strategies.pdca_status": "kit.strategies.pdca.status",
    "kit.strategies.pdca_writer": "kit.strategies.pdca.writer",
    "kit.strategies.workflow_runtime": "kit.strategies.workflow.runtime",
    "kit.tables": "kit.analysis.tables",
    "kit.tools": "kit.agent.toolbox",
    "kit.toolset": "kit.agent.tools",
    "kit.verdict": "kit.analysis.verdict",
    "kit.workspace": "kit.tasks.workspace",
    # the layout move of issue 36: scoring and the importers left kit/tasks/
    "kit.tasks.scoring": "kit.scoring",
    "kit.tasks.scoring.audit": "kit.scoring.audit",
    "kit.tasks.scoring.basecode": "kit.scoring.basecode",
    "kit.tasks.scoring.clean_copy": "kit.scoring.clean_copy",
    "kit.tasks.scoring.inject": "kit.scoring.inject",
    "kit.tasks.scoring.launcher": "kit.scoring.launcher",
    "kit.tasks.scoring.layout": "kit.scoring.layout",
    "kit.tasks.scoring.observe": "kit.scoring.observe",
    "kit.tasks.scoring.plugin": "kit.scoring.plugin",
    "kit.tasks.scoring.preload": "kit.scoring.preload",
    "kit.tasks.scoring.scorer": "kit.scoring.scorer",
    "kit.tasks.scoring.seal": "kit.scoring.seal",
    "kit.tasks.scoring.session": "kit.scoring.session",
    "kit.tasks.scoring.sessions": "kit.scoring.sessions",
    "kit.tasks.scoring.stream": "kit.scoring.stream",
    "kit.tasks.scoring.twins": "kit.scoring.twins",
    "kit.tasks.scoring.verdicts": "kit.scoring.verdicts",
    "kit.tasks.history": "kit.importers.git",
    "kit.tasks.history.gitread": "kit.importers.git.gitread",
    "kit.tasks.history.importer": "kit.importers.git.importer",
    "kit.tasks.history.layout": "kit.importers.git.layout",
    "kit.tasks.history.plan": "kit.importers.git.plan",
    "kit.tasks.history.probe": "kit.importers.git.probe",
    "kit.tasks.history.prompt": "kit.importers.git.prompt",
    "kit.tasks.history.report": "kit.importers.git.report",
    "kit.tasks.history.result": "kit.importers.git.result",
    "kit.tasks.history.settle": "kit.importers.git.settle",
    "kit.tasks.history.severity": "kit.importers.git.severity",
    "kit.tasks.history.spec": "kit.importers.git.spec",
    "kit.tasks.history.testfiles": "kit.importers.git.testfiles",
    "kit.tasks.history.writer": "kit.importers.git.writer",
    "kit.tasks.exercism": "kit.importers.exercism",
    "kit.tasks.exercism.importer": "kit.importers.exercism.importer",
    "kit.tasks.exercism.marks": "kit.importers.exercism.marks",
    "kit.tasks.suite_build": "kit.importers.suite_build",
    "kit.tasks.validate": "kit.importers.validate",
}

#: old module that is now a package of the same name -> the module(s) its old names live in now
NAMES: dict[str, tuple[str, ...]] = {
    "kit.agent": ("kit.agent.loop", "kit.agent.budget"),
    "kit.records": ("kit.records.schema", "kit.records.recorder", "kit.records.parquet"),
    "kit.sandbox": ("kit.sandbox.backends", "kit.sandbox.base", "kit.sandbox.bwrap", "kit.sandbox.processes"),
    "kit.scoring": ("kit.scoring.scorer",),
    "kit.tasks": ("kit.tasks.task", "kit.importers.validate"),
}


#: names renamed in the move because one name meant two things -> (module, new name)
RENAMED: dict[str, tuple[str, str]] = {
    "kit.agent.loop.ToolCall": ("kit.agent.loop", "ToolUse"),  # an executed call, not a requested one
    "kit.model.scripted.Reply": ("kit.model.scripted", "ScriptedReply"),
    "kit.sandbox.processes.Limits": ("kit.sandbox.processes", "ProcessLimits"),
    "kit.config.format_errors": ("kit.config", "describe_validation_errors"),
}


def _warn(old: str, new: str) -> None:
    warnings.warn(f"{old} is deprecated and goes in 0.2: use {new}", DeprecationWarning, stacklevel=3)


class _Alias(importlib.abc.Loader):
    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # a throwaway module; exec_module swaps the real one into sys.modules

    def exec_module(self, module: ModuleType) -> None:
        _warn(self.old, self.new)
        sys.modules[self.old] = importlib.import_module(self.new)  # the import system returns this one


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):  # noqa: ANN001, ANN201 - the finder protocol
        if fullname not in MODULES:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(fullname, MODULES[fullname]))


def install() -> None:
    """Put the alias finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


def renamed(module: str, name: str) -> object:
    """``module.name`` for a name renamed in the move (a module ``__getattr__``), with the warning."""
    target = RENAMED.get(f"{module}.{name}")
    if target is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    _warn(f"{module}.{name}", ".".join(target))
    return getattr(importlib.import_module(target[0]), target[1])


def old_name(package: str, name: str) -> object:
    """``package.name`` for an old name of a module that is now ``package`` (a package ``__getattr__``)."""
    if name.startswith("_") or importlib.util.find_spec(f"{package}.{name}") is not None:
        # a submodule (``from kit.agent import safefs``): the import system loads it itself
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    for module_name in NAMES.get(package, ()):
        if importlib.util.find_spec(module_name) is None:
            continue
        module = importlib.import_module(module_name)
        if name in vars(module):
            _warn(f"{package}.{name}", f"{module_name}.{name}")
            return getattr(module, name)
        if f"{module_name}.{name}" in RENAMED:
            return renamed(module_name, name)
    raise AttributeError(f"module {package!r} has no attribute {name!r}")
