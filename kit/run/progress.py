"""How far an experiment has got, as the executors report it: the progress bar on the terminal.

Both executors (:mod:`kit.run.threads`, :mod:`kit.run.ray_executor`) show the same bar: every run of
the plan, those already done counted in, the cost so far and the last run's outcome.
"""

from __future__ import annotations

from typing import Any

from tqdm.auto import tqdm

from kit.run.plan import RunSpec


def progress_bar(specs: list[RunSpec], todo: list[RunSpec], name: str, progress: bool) -> Any:
    """The experiment's tqdm bar: every run of the plan, those already done counted in."""
    bar = tqdm(
        total=len(specs),
        initial=len(specs) - len(todo),
        desc=name,
        unit="run",
        disable=not progress,
        dynamic_ncols=True,
    )
    bar.set_postfix_str("$0.0000")
    return bar
