"""The package's layers: dependencies point one way, and no module imports itself back.

Every import of a ``kit`` module is walked with ``ast`` -- lazy imports inside functions and
``TYPE_CHECKING`` ones included -- and checked against :data:`LAYERS`: a module may import its own
layer and the layers above it, and ``kit.analysis`` reads only records and the top level. Any cycle
between modules fails, however it is held together today.
"""

from __future__ import annotations

import ast
import importlib
import warnings
from pathlib import Path

import pytest

KIT = Path(__file__).resolve().parents[1] / "kit"

#: The layers, top to bottom. A module may import modules of its own layer and of the layers above it.
LAYERS = [
    "top",
    "records",
    "sandbox",
    "model",
    "agent",
    "tasks",
    "scoring",
    "importers",
    "strategies",
    "run",
    "analysis",
    "app",
]
#: Layers a layer may not import although they are above it (the analysis reads only records).
FORBIDDEN = {"analysis": {"sandbox", "model", "agent", "tasks", "scoring", "importers", "strategies", "run"}}
#: Modules outside the layers: the alias table names old paths as strings and imports them lazily.
EXEMPT = {"kit.aliases"}
#: Entry points that belong to a layer their path does not show.
LAYER_OF = {"kit.__main__": "app"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(KIT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(KIT.rglob("*.py"))}


def layer(module: str) -> str:
    if module in LAYER_OF:
        return LAYER_OF[module]
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else "top"


def resolve(importer: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = importer.split(".")
    if MODULES[importer].name != "__init__.py":
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def imports(module: str) -> set[str]:
    """The kit modules ``module`` imports anywhere in its source."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "kit")
        elif isinstance(node, ast.ImportFrom):
            target = resolve(module, node)
            if target.split(".")[0] != "kit":
                continue
            for alias in node.names:  # `from kit.x import y` imports the module kit.x.y when there is one
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in MODULES else target)
    return {m for m in found if m != module}


def graph() -> dict[str, set[str]]:
    return {m: imports(m) for m in MODULES if m not in EXEMPT}


def layer_violations(edges: dict[str, set[str]]) -> list[str]:
    out = []
    for importer, targets in sorted(edges.items()):
        here = layer(importer)
        for target in sorted(targets):
            if target in EXEMPT or target == "kit":
                continue
            there = layer(target)
            if LAYERS.index(there) > LAYERS.index(here) or there in FORBIDDEN.get(here, ()):
                out.append(f"{importer} ({here}) imports {target} ({there})")
    return out


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in edges:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_import_breaks_the_layer_order():
    assert layer_violations(graph()) == []


def test_no_import_cycles():
    assert cycles(graph()) == []


#: The six cycles the flat layout had (held by lazy or type-only imports), in today's module names.
OLD_CYCLES = [
    ("kit.records.schema", "kit.records.parquet"),
    ("kit.sandbox.commands", "kit.sandbox.backends"),
    ("kit.tasks.task", "kit.scoring.scorer"),
    ("kit.model.policies", "kit.model.scripted"),
    ("kit.agent.tools", "kit.agent.toolbox"),
    ("kit.run.runner", "kit.run.ray_executor"),
]


@pytest.mark.parametrize(("a", "b"), OLD_CYCLES)
def test_each_old_cycle_would_be_caught(a, b):
    edges = graph()
    assert a in edges and b in edges, "the modules of the old cycle still exist"
    edges[a] = edges[a] | {b}
    edges[b] = edges[b] | {a}
    assert any(a in c and b in c for c in cycles(edges))


def test_a_lazy_import_counts(tmp_path):
    source = "def f():\n    from kit.app import cli\n"
    tree = ast.parse(source)
    lazy = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert lazy and lazy[0].module == "kit.app"
    edges = graph()
    edges["kit.records.schema"] = edges["kit.records.schema"] | {"kit.app.cli"}
    assert "kit.records.schema (records) imports kit.app.cli (app)" in layer_violations(edges)


def test_analysis_reads_only_records_and_the_top_level():
    edges = graph()
    edges["kit.analysis.tables"] = edges["kit.analysis.tables"] | {"kit.model.gateway"}
    assert any("kit.analysis.tables" in v for v in layer_violations(edges))


def test_only_the_gateway_layer_imports_litellm():
    users = []
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            mods = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(m.split(".")[0] == "litellm" for m in mods):
                users.append(name)
    assert sorted(set(users)) <= ["kit.model.gateway", "kit.model.litellm_private"]


def test_every_package_says_what_it_is_for_and_may_import():
    for name, path in MODULES.items():
        if path.name != "__init__.py" or name.count(".") != 1 or name == "kit.prompts":
            continue
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        assert len(doc) > 80, f"{name} has no docstring saying what it is for"
        if layer(name) not in ("top", "app", "run"):
            assert "May import" in doc, f"{name}'s docstring does not say what it may import"


def test_scoring_and_the_importers_are_layers_of_their_own_in_that_order():
    """The task contract sits below scoring, scoring below the importers that use it to build tasks, and
    those below the runner and the app (issue 36: the arrows ran tasks -> scoring -> tasks)."""
    order = [LAYERS.index(name) for name in ("tasks", "scoring", "importers", "run", "app")]
    assert order == sorted(order)
    edges = graph()
    edges["kit.tasks.task"] = edges["kit.tasks.task"] | {"kit.scoring.scorer"}
    edges["kit.scoring.scorer"] = edges["kit.scoring.scorer"] | {"kit.importers.validate"}
    assert "kit.tasks.task (tasks) imports kit.scoring.scorer (scoring)" in layer_violations(edges)
    assert "kit.scoring.scorer (scoring) imports kit.importers.validate (importers)" in layer_violations(
        edges
    )


def test_the_tasks_package_holds_only_the_task_contract():
    lines = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in (KIT / "tasks").rglob("*.py"))
    assert lines < 2000, f"kit/tasks/ has {lines} lines"
    assert not [p for p in (KIT / "tasks").iterdir() if p.is_dir() and p.name != "__pycache__"]


def test_at_most_twelve_modules_directly_in_kit():
    flat = [p.name for p in KIT.glob("*.py")]
    assert len(flat) <= 12, flat


def test_no_module_over_500_lines():
    long = {n: len(p.read_text(encoding="utf-8").splitlines()) for n, p in MODULES.items()}
    assert {n: c for n, c in long.items() if c > 500} == {}


def test_old_paths_still_import_and_warn():
    from kit import aliases

    for old, new in aliases.MODULES.items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import sys

            sys.modules.pop(old, None)
            module = importlib.import_module(old)
        assert module is importlib.import_module(new), old
        assert any(issubclass(w.category, DeprecationWarning) and new in str(w.message) for w in caught), old


def test_old_names_of_modules_that_became_packages_still_resolve_and_warn():
    from kit import aliases

    samples = {
        "kit.records": "RunRecorder",
        "kit.agent": "Agent",
        "kit.sandbox": "get_sandbox",
        "kit.tasks": "load_task",
        "kit.scoring": "evaluate",
    }
    assert set(samples) == set(aliases.NAMES)
    for package, name in samples.items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            value = getattr(importlib.import_module(package), name)
        assert callable(value)
        assert any(issubclass(w.category, DeprecationWarning) and name in str(w.message) for w in caught)


def test_no_function_over_80_lines_without_a_reason():
    """A function (or method) over 80 lines must say why in its docstring ("Long because ...")."""
    long = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                size = node.end_lineno - node.lineno + 1
                if size > 80 and "Long because" not in (ast.get_docstring(node) or ""):
                    long.append(f"{name}.{node.name}: {size} lines")
    assert long == []


def test_renamed_names_still_resolve_and_warn():
    from kit import aliases

    for old, (module, new) in aliases.RENAMED.items():
        old_module, _, old_attr = old.rpartition(".")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            value = getattr(importlib.import_module(old_module), old_attr)
        assert value is getattr(importlib.import_module(module), new), old
        assert any(f"{module}.{new}" in str(w.message) for w in caught), old


#: What the shipped notebooks imported before the layout change: a user's copy of one still runs.
OLD_NOTEBOOK_IMPORTS = [
    "from kit import analysis, figures, report, verdict",
    "from kit import reference as published",
    "from kit.notebooks import figures_folder, prepare_benchmark, show",
    "from kit.lab import prompt_lab",
]


@pytest.mark.parametrize("line", OLD_NOTEBOOK_IMPORTS)
def test_the_old_notebook_imports_still_work(line):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        exec(line, {})  # noqa: S102 - a fixed import line


def test_the_files_that_run_inside_the_scoring_sandbox_import_nothing_from_the_kit():
    """launcher.py and plugin.py are copied out and run under ``python -I`` in the sandbox, where the
    kit is not visible: an import of ``kit`` there would fail every scoring session."""
    for name in ("kit.scoring.launcher", "kit.scoring.plugin"):
        assert imports(name) == set(), name
        source = MODULES[name].read_text(encoding="utf-8")
        assert "import kit" not in source and "from kit" not in source, name
