"""Prompt files: ``kit/prompts/<strategy>/<role>.md``, editable; an experiment can override any of
them with ``prompt_overrides: {"<strategy>/<role>": "text"}`` (the prompt lab does)."""

from __future__ import annotations

from pathlib import Path
from string import Template

from kit.errors import ConfigError

PROMPTS_DIR = Path(__file__).resolve().parent


class PromptBook:
    """Looks prompts up for one strategy, applying the experiment's overrides."""

    def __init__(self, strategy: str, overrides: dict[str, str] | None = None) -> None:
        self.strategy = strategy
        self.overrides = dict(overrides or {})

    def path(self, name: str) -> Path:
        return PROMPTS_DIR / self.strategy / f"{name}.md"

    def get(self, name: str, **values: object) -> str:
        """Prompt ``name`` with ``$placeholders`` filled from ``values`` (missing ones stay as is)."""
        key = f"{self.strategy}/{name}"
        if key in self.overrides:
            text = self.overrides[key]
        else:
            path = self.path(name)
            if not path.is_file():
                known = sorted(p.stem for p in path.parent.glob("*.md"))
                raise ConfigError(
                    f"no prompt file {path}", f"prompts for {self.strategy}: {', '.join(known) or 'none'}"
                )
            text = path.read_text(encoding="utf-8")
        return Template(text).safe_substitute({k: str(v) for k, v in values.items()})
