"""The kit's exceptions: a small hierarchy whose messages say what to do next."""

from __future__ import annotations


class KitError(Exception):
    """Base class. ``hint`` is the next step for the user; it is appended to the message."""

    def __init__(self, message: str, hint: str = "") -> None:
        self.hint = hint
        super().__init__(f"{message}\n  -> {hint}" if hint else message)


class ConfigError(KitError):
    """A YAML file (profile, price sheet, experiment, task) is missing, malformed or inconsistent."""


class TaskError(KitError):
    """A task folder is malformed or failed validation."""


class ModelError(KitError):
    """A model call failed for good (after retries), or its output could not be used."""


class MissingKeyError(ModelError):
    """A provider needs an API key that is not set in the environment."""


class BudgetExceeded(KitError):
    """A token or USD budget was used up."""


class CallCapReached(KitError):
    """A workflow hit its cap on agent calls."""


class Interrupted(KitError):
    """The experiment was interrupted (Ctrl-C): the agent stops at its next step."""


class ResultsError(KitError):
    """The results folder cannot be used: not a folder, not writable, full, or held by another run."""
