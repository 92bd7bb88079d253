"""A run is its settings: everything that shapes a run, as one dict recorded in run.json
(``settings``) and its hash (``fingerprint``); resume keeps a finished run only when both agree
(:mod:`kit.run.resume`). ``docs/records.md``, ``## run.json``, lists the keys.

The settings of a run: the kit version, the task's content (a hash of every file of its folder), the
strategy, the text of every prompt file of the strategy (``kit/prompts/<strategy>/``, with the
experiment's ``prompt_overrides`` applied; the texts are kept in the run folder under
``prompts/<strategy>/`` and hashed here), the strategy's options, its role -> tier map and each used
tier's model spec (secrets masked), the limits, the sandbox, and -- when ``limits.max_usd`` can stop a
run -- the prices of the used tiers.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import kit
from kit import strategies
from kit.config import Experiment, PriceSheet, Profile
from kit.importers.validate import task_hash
from kit.paths import PROMPTS_DIR, is_ignored
from kit.run.plan import RunSpec, redacted
from kit.run.sandboxing import run_sandbox
from kit.strategies.options import SHARED_PROMPTS

PROMPTS_FOLDER = "prompts"  # in the run folder: prompts/<strategy>/<file>


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def _folder_texts(folder: Path, owner: str, overrides: dict[str, str]) -> dict[str, str]:
    texts = {
        p.name: p.read_text(encoding="utf-8")
        for p in sorted(folder.iterdir() if folder.is_dir() else [])
        if p.is_file() and not is_ignored(Path(p.name))
    }
    for key, text in overrides.items():
        who, _, name = key.partition("/")
        if who == owner and name:
            texts[f"{name}.md"] = text
    return texts


def prompt_texts(strategy: str, overrides: dict[str, str]) -> dict[str, str]:
    """Every prompt file a run of ``strategy`` reads (file name -> text), overrides applied: an
    override ``"<strategy>/<name>"`` replaces ``<name>.md`` (or adds it). The shared folders'
    files (:data:`SHARED_PROMPTS`) are named ``agent/<name>.md``."""
    texts = _folder_texts(PROMPTS_DIR / strategy, strategy, overrides)
    for shared in SHARED_PROMPTS:
        for name, text in _folder_texts(PROMPTS_DIR / shared, shared, overrides).items():
            texts[f"{shared}/{name}"] = text
    return texts


#: Limits of the whole experiment, not of a run: they never change what a run does.
EXPERIMENT_WIDE = {"max_total_usd"}


def run_settings(
    spec: RunSpec, experiment: Experiment, profile: Profile, sheet: PriceSheet
) -> dict[str, Any]:
    """The settings of one run (see the module docstring), JSON-ready."""
    tiers = strategies.role_tiers(spec.strategy, experiment.tiers.get(spec.strategy), profile)
    used = sorted(set(tiers.values()))
    models = redacted(profile)["tiers"]
    settings: dict[str, Any] = {
        "kit_version": kit.__version__,
        "task": task_hash(spec.task),
        "strategy": spec.strategy,
        "prompts": {
            name: _digest(text.encode())
            for name, text in prompt_texts(spec.strategy, experiment.prompt_overrides).items()
        },
        "options": experiment.strategy_options.get(spec.strategy, {}),
        "tiers": dict(tiers),
        "models": {
            t: {k: v for k, v in models[t].items() if k != "api_key_env"} for t in used if t in models
        },
        "limits": _limits(experiment),
        "sandbox": experiment.sandbox,
        **run_sandbox(experiment, spec.task).settings(),  # podman, docker: the image, by id
    }
    if experiment.limits.max_usd is not None:  # the prices decide when the run stops
        settings["prices"] = {
            t: sheet.prices[profile.tiers[t].price_key].model_dump(mode="json")
            for t in used
            if profile.tiers[t].price_key in sheet.prices
        }
    return json.loads(json.dumps(settings, default=str))  # the form run.json gives back


def fingerprint(settings: dict[str, Any]) -> str:
    """The hash of ``settings`` (key order does not matter)."""
    return _digest(json.dumps(settings, sort_keys=True, default=str).encode())


def write_prompts(run_dir: Path, strategy: str, overrides: dict[str, str]) -> None:
    """The prompt texts the run uses, into ``<run_dir>/prompts/<strategy>/`` (and ``prompts/agent/``)."""
    for name, text in prompt_texts(strategy, overrides).items():
        shared, _, rest = name.rpartition("/")  # agent/<name>.md -> prompts/agent/<name>.md
        path = Path(run_dir) / PROMPTS_FOLDER / (shared or strategy) / rest
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def _short(value: Any, limit: int = 40) -> str:
    text = json.dumps(value, sort_keys=True, default=str) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[: limit - 3] + "..."


def changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What differs between two settings dicts, one short line per field (``options.max_cycles: 3 ->
    4``, ``models.cheap.model: a -> b``, ``prompt coder.md changed``, ``task content changed``)."""
    lines: list[str] = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key, _UNSET), new.get(key, _UNSET)
        if a == b:
            continue
        if key == "task":
            lines.append("task content changed")
        elif key == "prompts" and isinstance(a, dict) and isinstance(b, dict):
            for name in sorted(set(a) | set(b)):
                if a.get(name) != b.get(name):
                    what = "added" if name not in a else "removed" if name not in b else "changed"
                    lines.append(f"prompt {name} {what}")
        else:
            _diff(key, a, b, lines)
    return lines


_UNSET = object()


def _diff(where: str, a: Any, b: Any, lines: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for sub in sorted(set(a) | set(b)):
            if a.get(sub, _UNSET) != b.get(sub, _UNSET):
                _diff(f"{where}.{sub}", a.get(sub, _UNSET), b.get(sub, _UNSET), lines)
        return
    before = "(unset)" if a is _UNSET else _short(a)
    after = "(unset)" if b is _UNSET else _short(b)
    lines.append(f"{where}: {before} -> {after}")


#: Limits added after runs were first fingerprinted: left out of the settings at their defaults, so
#: a run recorded before them is not "changed" by their arrival.
LATER_LIMITS = ("disk_quota_mb", "disk_quota_files")


def _limits(experiment: Experiment) -> dict[str, Any]:
    limits = experiment.limits.model_dump(mode="json", exclude=EXPERIMENT_WIDE)
    for key in LATER_LIMITS:
        if limits.get(key) == type(experiment.limits).model_fields[key].default:
            limits.pop(key)
    return limits
