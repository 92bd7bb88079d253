"""The few helpers the notebooks call (importable from :mod:`kit.app.notebooks` too): the folder to
analyse (running the experiment first when asked), the figures folder, a saved PNG shown inline, and a
table shown whole."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kit.paths import REPO_ROOT


def repo_path(path: str | Path) -> Path:
    """``path`` as is when absolute, else relative to the repository root (as kit.analysis.repo_path;
    kept here so ``python -m kit`` does not import pandas just to register this command)."""
    path = Path(path)
    return path if path.is_absolute() else REPO_ROOT / path


def prepare_benchmark(results_dir: str | Path, experiment: str | Path | None = None) -> Path:
    """The experiment folder to analyse. With ``experiment`` (a name or a path to experiments/*.yaml)
    it is run first, under the parent of ``results_dir``, and its own folder is returned."""
    folder = repo_path(results_dir)
    if experiment is None:
        return folder
    from kit.run.runner import run_experiment  # notebooks sit above the runner; imported on use

    exp = repo_path(experiment) if Path(experiment).suffix else experiment
    return run_experiment(exp, results_dir=folder.parent)


def figures_folder(results_dir: str | Path, figures_dir: str | Path | None = None) -> Path:
    """``figures_dir``, or ``<results_dir>/notebooks/figures``; created if missing."""
    folder = repo_path(figures_dir) if figures_dir else repo_path(results_dir) / "notebooks" / "figures"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def show(path: str | Path) -> Any:
    """Display a saved PNG in the notebook."""
    from IPython.display import Image

    return Image(filename=str(path))


class Whole:
    """A table that a notebook shows whole: every row and column, no cell cut (pandas shows the first
    and last five rows of a table over 60 rows, which hid pdca's gate rejections in notebook 01)."""

    def __init__(self, table: Any) -> None:
        self.table = table

    def _options(self) -> Any:
        import pandas as pd

        return pd.option_context(
            "display.max_rows",
            None,
            "display.max_columns",
            None,
            "display.max_colwidth",
            None,
            "display.width",
            None,
        )

    def _repr_html_(self) -> str:
        with self._options():
            return self.table._repr_html_()

    def __repr__(self) -> str:
        with self._options():
            return self.table.to_string()


def whole(table: Any) -> Whole:
    """``table`` (a DataFrame) shown whole in a notebook: no row, column or cell left out."""
    return Whole(table)
