"""Price sheets, profiles and experiments: pydantic models loaded from YAML with clear errors.

* a **price sheet** (``datasets/prices/<name>.yaml``) gives USD per 1M tokens per price key;
* a **profile** (``datasets/profiles/<name>.yaml``) maps the tiers cheap / medium / strong to a
  litellm model string (plus api_base, key variable, action mode ...) and names its price sheet;
* an **experiment** (``experiments/<name>.yaml``) is the matrix the runner expands.
"""

from __future__ import annotations

import platform
import re
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from kit.errors import ConfigError
from kit.paths import EXPERIMENTS_DIR, PRICES_DIR, PROFILES_DIR
from kit.usage import ModelPrice

Tier = Literal["cheap", "medium", "strong"]
SandboxName = Literal["bwrap", "podman", "docker", "none"]


def default_sandbox() -> SandboxName:
    """The sandbox an experiment gets unless it says otherwise: bwrap on Linux, docker elsewhere
    (macOS, Windows: Docker Desktop; where it is missing the run stops first, saying how to get it)."""
    return "bwrap" if platform.system() == "Linux" else "docker"


TIERS: tuple[Tier, ...] = ("cheap", "medium", "strong")
ActionMode = Literal["native", "json", "text"]

M = TypeVar("M", bound=BaseModel)


def _safe_name(value: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9._-]+", value) or ".." in value or value.strip(".") == "":
        raise ValueError(
            f"{value!r} cannot name a folder: use letters, digits, '.', '_' and '-' only (no '..', no '/')"
        )
    if value.startswith("-"):  # (it would read as an option on a command line: `--id -h`)
        raise ValueError(f"{value!r} cannot name a folder: start it with a letter or digit, not '-'")
    return value


#: A name that becomes a folder or part of one under results/ (experiment, profile, task id).
SafeName = Annotated[str, AfterValidator(_safe_name)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PriceSheet(_Strict):
    """USD per 1M tokens for each price key (normally a litellm model string)."""

    name: str = Field(description="The sheet's name (a profile's `price_sheet:` names it).")
    description: str = Field("", description="Free text shown with the prices.")
    illustrative: bool = Field(False, description="True when the prices are made up for show.")
    source: str = Field("", description="Where the prices come from (URL, date).")
    prices: dict[str, ModelPrice] = Field(
        description="Price key (normally the litellm model string) -> its prices."
    )

    def get(self, key: str) -> ModelPrice:
        try:
            return self.prices[key]
        except KeyError:
            raise ConfigError(
                f"price sheet {self.name!r} has no entry {key!r}",
                f"add it under `prices:` (known: {', '.join(sorted(self.prices))})",
            ) from None


class ModelSpec(_Strict):
    """One tier's model."""

    model: str = Field(description="litellm model string, or embedded/<alias> or scripted/<name>.")
    price: str | None = Field(None, description="Key in the price sheet; defaults to `model`.")
    api_base: str | None = Field(
        None, description="Base URL to send this tier's calls to (a proxy, a local server)."
    )
    api_key_env: str | None = Field(None, description="Env variable holding the key, if any.")
    action_mode: ActionMode | None = Field(
        None, description="How the agent asks for tools; None = the kit's default for this model."
    )
    context_window: int = Field(128_000, gt=0, description="Tokens; old tool outputs are shortened to fit.")
    max_output_tokens: int = Field(4096, gt=0, description="Output cap of one call.")
    temperature: float | None = Field(
        None, ge=0, description="Sampling temperature; None = the provider's default."
    )
    timeout_s: float = Field(300.0, gt=0, description="Per-call timeout.")
    cache_breakpoints: bool | None = Field(
        None,
        description="Mark system prompt + newest message cacheable (litellm's "
        "cache_control_injection_points); False turns caching off for this tier; None = auto (Claude).",
    )
    cache_ttl: Literal["5m", "1h"] | None = Field(
        None,
        description="Lifetime of the cache entries the breakpoints write: 5m (the provider's default) or "
        "1h (writes cost more, 2x input on Anthropic, but survive pauses up to an hour).",
    )
    custom: bool = Field(
        False,
        description="The model is not in litellm's model list (a fine-tune, a self-hosted server): "
        "the preflight accepts it and its cost comes from the price sheet alone.",
    )
    extra: dict[str, Any] = Field(default_factory=dict, description="Passed to litellm as is.")

    @property
    def price_key(self) -> str:
        return self.price or self.model


class RetryPolicy(_Strict):
    """The kit's one retry policy (the provider SDKs' own retries are off): every attempt is a row
    in calls.jsonl. A transient failure (429, 529 overloaded, 5xx, timeout, connection reset, an
    empty or unparsable reply) is retried after the provider's Retry-After / retry-after-ms, else
    after ``backoff_s * 2**(attempt-1)``; either is clipped to ``max_backoff_s``."""

    max_retries: int = Field(3, ge=0, description="Retries after the first attempt.")
    backoff_s: float = Field(1.0, ge=0, description="First backoff when the provider names none.")
    max_backoff_s: float = Field(60.0, ge=0, description="Longest wait between two attempts.")


class Profile(_Strict):
    """Tier -> model, plus the price sheet used to cost every call."""

    name: SafeName = Field(description="The profile's name: part of every run id.")
    description: str = Field("", description="Free text.")
    price_sheet: str = Field(description="The price sheet every call is costed with: a name or a path.")
    tiers: dict[Tier, ModelSpec] = Field(
        description="The model of each tier: cheap, medium and strong, all three."
    )
    roles: dict[str, Tier] = Field(
        default_factory=dict, description="Override a role's tier, e.g. {executor: medium}."
    )
    retry: RetryPolicy = Field(default_factory=RetryPolicy, description="The one retry policy of every call.")

    @model_validator(mode="after")
    def _all_tiers(self) -> Profile:
        missing = [t for t in TIERS if t not in self.tiers]
        if missing:
            raise ValueError(f"tiers: missing {', '.join(missing)} (need cheap, medium and strong)")
        return self

    def tier_for(self, role: str, default: Tier) -> Tier:
        return self.roles.get(role, default)


class Limits(_Strict):
    """Caps every run shares; strategies read what applies to them.

    ``max_model_calls``, ``max_usd`` and ``max_tokens`` are the run budget: the same for every strategy,
    summed over all its roles; a strategy's per-step or per-session caps derive from it. The agent
    loop stops cleanly (outcome ``budget``) once any of them is used up."""

    max_steps: int = Field(60, ge=1, description="Tool-loop steps per agent (vibe: the whole run).")
    max_model_calls: int | None = Field(
        None, ge=1, description="Stop a run after this many model calls, all roles together."
    )
    max_usd: float | None = Field(None, gt=0, description="Stop a run once it has spent this much.")
    max_tokens: int | None = Field(None, gt=0, description="Stop a run after this many tokens in total.")
    command_timeout_s: float = Field(120.0, gt=0, description="Seconds one agent command may take.")
    max_format_errors: int = Field(3, ge=1, description="Invalid actions in a row before an agent stops.")
    disk_quota_mb: int = Field(
        1024, ge=16, description="Megabytes the run's clone may hold (a file system of its own as root)."
    )
    disk_quota_files: int = Field(100_000, ge=1000, description="Files and folders the run's clone may hold.")
    max_total_usd: float | None = Field(
        None,
        gt=0,
        description="Experiment-wide: no new run starts once the experiment's spend (its finished runs) "
        "plus the most every run in flight and the new one can spend would pass this; needs max_usd, "
        "max_tokens or max_model_calls (the most one run can spend). Not part of a run's settings.",
    )

    @model_validator(mode="after")
    def _quota_fits(self) -> Limits:
        if self.disk_quota_files > self.disk_quota_mb * 1024:  # (the file table takes space too)
            raise ValueError(
                f"disk_quota_files {self.disk_quota_files} is more than one file per KB of disk_quota_mb "
                f"{self.disk_quota_mb}: raise disk_quota_mb or lower disk_quota_files"
            )
        return self


class Experiment(_Strict):
    """What to run: tasks x strategies x repeats on one profile."""

    name: SafeName = Field(description="The experiment's name: its results folder is results/<name>/.")
    description: str = Field("", description="Free text.")
    tasks: list[str] = Field(
        description="Task ids (folders of datasets/tasks/), task folder paths, or suite:<name>."
    )
    strategies: list[str] = Field(description="Strategies to run: vibe, linear, pdca, workflow, harness.")
    profile: str = Field(description="The profile: a name in datasets/profiles/ or a path to a profile file.")
    repeats: int = Field(1, ge=1, description="Runs of each task x strategy.")
    limits: Limits = Field(
        default_factory=Limits, description="The run budget and caps, the same for every run."
    )
    concurrency: int = Field(1, ge=1, description="Runs in flight at once.")
    strategy_options: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Per-strategy knobs, e.g. {pdca: {max_attempts: 3}}."
    )
    prompt_overrides: dict[str, str] = Field(
        default_factory=dict,
        description="'<strategy>/<name>' -> prompt text replacing kit/prompts/<strategy>/<name>.md "
        "(a role's system prompt, a step, a message template).",
    )
    sandbox: SandboxName = Field(
        default_factory=default_sandbox,
        description="Where agent commands and scoring run: bwrap (default on Linux), podman or docker "
        "(a container per command; docker is the default elsewhere), or none (unsandboxed, flagged).",
    )
    sandbox_image: str | None = Field(
        None,
        description="With podman or docker: the image commands run in, for tasks that name none "
        "(default: the kit's, localhost/orchbench-python:X.Y, from `python -m kit sandbox build-image`).",
    )
    tiers: dict[str, Tier | dict[str, Tier]] = Field(
        default_factory=dict,
        description="Per strategy, its role -> tier map ({workflow: {analyzer: medium}}), or one tier for "
        "every role of it ({workflow: cheap}: the equal-tier variant). Roles left out keep the "
        "strategy's source-faithful default; this map wins over a profile's `roles`.",
    )

    @model_validator(mode="after")
    def _image_needs_a_container(self) -> Experiment:
        if self.sandbox_image and self.sandbox not in ("podman", "docker"):
            raise ValueError(
                f"sandbox_image {self.sandbox_image!r} needs `sandbox: podman` or `sandbox: docker` "
                f"(this experiment's sandbox is {self.sandbox}): set one, or remove sandbox_image"
            )
        return self


# --------------------------------------------------------------------------- loading


def describe_validation_errors(err: ValidationError) -> str:
    """A pydantic error as lines of ``field `a.b`: message``."""
    lines = []
    for e in err.errors():
        where = ".".join(str(p) for p in e["loc"]) or "(top level)"
        lines.append(f"  field `{where}`: {e['msg']}")
    return "\n".join(lines)


#: The largest YAML file the kit reads (a task.yaml with a long prompt is a few tens of KB).
MAX_YAML_BYTES = 4 * 1024 * 1024


def load_yaml_model(path: Path, model: type[M], what: str) -> M:
    """Read ``path`` and validate it as ``model``; any problem -> one ConfigError naming file+field."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{what} file not found: {path}")
    if path.stat().st_size > MAX_YAML_BYTES:  # (a task folder's task.yaml is hostile input)
        raise ConfigError(
            f"{path}: {path.stat().st_size:,} bytes: a {what} file is at most {MAX_YAML_BYTES:,}"
        )
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as e:
        raise ConfigError(
            f"{path}: not UTF-8 text (byte {e.object[e.start]:#04x} at offset {e.start})",
            "save the file as UTF-8",
        ) from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read this {what} file: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level of this {what} file")
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise ConfigError(f"{path}: invalid {what}:\n{describe_validation_errors(e)}") from None


def _resolve(name_or_path: str | Path, folder: Path, what: str) -> Path:
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.is_file():
        return p
    candidate = folder / f"{name_or_path}.yaml"
    if candidate.is_file():
        return candidate
    known = sorted(f.stem for f in folder.glob("*.yaml"))
    raise ConfigError(f"unknown {what} {str(name_or_path)!r}", f"pick one of: {', '.join(known)}")


def load_price_sheet(name_or_path: str | Path) -> PriceSheet:
    return load_yaml_model(_resolve(name_or_path, PRICES_DIR, "price sheet"), PriceSheet, "price sheet")


def load_profile(name_or_path: str | Path) -> tuple[Profile, PriceSheet]:
    """The profile and its price sheet; every tier's price key must exist in the sheet."""
    path = _resolve(name_or_path, PROFILES_DIR, "profile")
    profile = load_yaml_model(path, Profile, "profile")
    sibling = path.parent.parent / "prices"  # a profile folder may ship its own price sheets
    folder = sibling if (sibling / f"{profile.price_sheet}.yaml").is_file() else PRICES_DIR
    sheet_path = _resolve(profile.price_sheet, folder, "price sheet")
    sheet = load_price_sheet(sheet_path)
    for tier, spec in profile.tiers.items():
        if spec.price_key not in sheet.prices:
            raise ConfigError(
                f"{path}: field `tiers.{tier}.price`: {spec.price_key!r} is not in price sheet "
                f"{sheet.name!r}",
                f"add it to {sheet_path} or set `price:` to one of {', '.join(sorted(sheet.prices))}",
            )
    return profile, sheet


def load_experiment(name_or_path: str | Path) -> Experiment:
    return load_yaml_model(_resolve(name_or_path, EXPERIMENTS_DIR, "experiment"), Experiment, "experiment")


def __getattr__(name: str) -> object:  # names renamed in the layout move, for one release (kit.aliases)
    from kit import aliases

    return aliases.renamed(__name__, name)
