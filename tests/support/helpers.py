"""Shared test helpers: scripted profiles written to a temp folder, experiments, record readers."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import yaml

from kit.config import Experiment, Limits, ModelSpec, PriceSheet, Profile
from kit.records.schema import read_jsonl
from kit.usage import ModelPrice

PRICE = ModelPrice(input=1.0, output=5.0, cache_read=0.1, cache_write=1.25)


def scripted_profile(
    model: str, action_mode: str | None = None, name: str = "scripted-test"
) -> tuple[Profile, PriceSheet]:
    spec = ModelSpec(model=model, price="p", action_mode=action_mode)
    profile = Profile(name=name, price_sheet="test", tiers={t: spec for t in ("cheap", "medium", "strong")})
    return profile, PriceSheet(name="test", illustrative=True, prices={"p": PRICE})


def write_profile(
    folder: Path, model: str, action_mode: str | None = None, name: str = "scripted-test"
) -> Path:
    """Write a profile + its price sheet as YAML (profiles/<name>.yaml, prices/test.yaml)."""
    profile, sheet = scripted_profile(model, action_mode, name)
    (folder / "profiles").mkdir(parents=True, exist_ok=True)
    (folder / "prices").mkdir(parents=True, exist_ok=True)
    (folder / "prices" / "test.yaml").write_text(yaml.safe_dump(sheet.model_dump(mode="json")))
    path = folder / "profiles" / f"{name}.yaml"
    path.write_text(yaml.safe_dump(profile.model_dump(mode="json", exclude_none=True)))
    return path


def experiment(
    name: str, profile: Path | str, tasks: list[str], strategies: list[str], **kw: Any
) -> Experiment:
    limits = kw.pop("limits", Limits(max_steps=12))
    return Experiment(
        name=name, tasks=tasks, strategies=strategies, profile=str(profile), limits=limits, **kw
    )


def run_json(run_dir: Path) -> dict:
    return json.loads((run_dir / "run.json").read_text())


def rows(run_dir: Path, name: str) -> list[dict]:
    return read_jsonl(run_dir / name)


def plan_shipped(exp: Experiment) -> list:
    """``plan(exp)`` for a shipped experiment. One whose suite is built from clones first (real-repos,
    datasets/suites/README.md) and is not built here must stop with the one clear error naming the
    build command; its strategies, options and limits are then planned on micro-slugify instead."""
    from kit.errors import ConfigError
    from kit.run.plan import plan
    from kit.tasks.task import expand_tasks

    try:
        expand_tasks(exp.tasks)
    except ConfigError as e:
        assert "not built" in str(e) and "python -m kit tasks build-suite" in str(e), e
        return plan(exp.model_copy(update={"tasks": ["micro-slugify"]}))
    return plan(exp)


def copy_tree(src: Path, dest: Path) -> None:
    """Copy a folder as ``cp -a --sparse=always`` does: a finished run's clone image (``repo.img``,
    1 GiB, sparse) stays sparse -- ``shutil.copytree`` writes every byte of it (~5 s and 1 GiB of
    disk per copy on this machine)."""
    subprocess.run(["cp", "-a", "--sparse=always", str(src), str(dest)], check=True)
