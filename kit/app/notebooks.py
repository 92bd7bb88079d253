"""Execute the notebooks with papermill, and the few helpers the notebooks call.

``python -m kit notebooks results/default`` writes ``results/default/notebooks/NN_name.ipynb`` with
figures in ``results/default/notebooks/figures/``. The kernel is this interpreter (a kernelspec whose
command is ``sys.executable`` is ensured), the working directory is the repository root, and a failing
cell becomes a :class:`~kit.errors.KitError` naming the notebook, the cell and the error.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from kit.errors import KitError
from kit.paths import NOTEBOOKS_DIR, REPO_ROOT

NOTEBOOKS = {
    "benchmark": "01_benchmark.ipynb",
    "tier_economics": "02_tier_economics.ipynb",
    "prompt_lab": "03_prompt_lab.ipynb",
    "verdict": "04_verdict.ipynb",
}
KERNEL_NAME = "orchbench"  # installed into this environment when no kernelspec runs sys.executable


# --------------------------------------------------------------------------- helpers for the notebooks


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


# --------------------------------------------------------------------------- execution


def select(only: str | Sequence[str] | None = None) -> list[str]:
    """Notebook names to run: all, or those named by ``only`` ("benchmark", "01", "01_benchmark" ...)."""
    if only is None:
        return list(NOTEBOOKS)
    picked = []
    for want in [only] if isinstance(only, str) else only:
        key = want.removesuffix(".ipynb")
        match = [n for n, f in NOTEBOOKS.items() if key in (n, f.removesuffix(".ipynb"), f[:2])]
        if not match:
            valid = ", ".join(f"{f[:2]} / {n}" for n, f in NOTEBOOKS.items())
            raise KitError(f"unknown notebook {want!r}", f"pick one of: {valid}")
        picked += [m for m in match if m not in picked]
    return picked


def parse_param(text: str) -> tuple[str, Any]:
    """``k=v`` -> (k, v) with v read as YAML (numbers, true/false, null or None, {a: b}, [x, y])."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise KitError(f"bad parameter {text!r}", "write it as name=value, e.g. --param price_sheet=null")
    if value.strip() == "None":
        return key.strip(), None
    try:
        return key.strip(), yaml.safe_load(value) if value.strip() else ""
    except yaml.YAMLError:
        return key.strip(), value


def _runs_this_interpreter(argv0: str) -> bool:
    major, minor = sys.version_info[:2]
    # jupyter_client replaces these bare names with sys.executable when it starts the kernel
    return argv0 in {"python", f"python{major}", f"python{major}.{minor}"} or os.path.abspath(
        argv0
    ) == os.path.abspath(sys.executable)


def ensure_kernel() -> str:
    """Name of a kernelspec that starts this interpreter; installs one into this environment if needed."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    manager = KernelSpecManager()
    for name in ("python3", KERNEL_NAME):
        try:
            if _runs_this_interpreter(manager.get_kernel_spec(name).argv[0]):
                return name
        except NoSuchKernel:
            continue
    from ipykernel.kernelspec import install

    try:
        install(kernel_name=KERNEL_NAME, display_name="orchbench", prefix=sys.prefix)
    except OSError:
        install(kernel_name=KERNEL_NAME, display_name="orchbench", user=True)
    return KERNEL_NAME


def declared_parameters(name: str) -> dict[str, Any]:
    """The parameters a notebook declares in its ``parameters`` cell, with their defaults as written."""
    import papermill

    return papermill.inspect_notebook(str(NOTEBOOKS_DIR / NOTEBOOKS[name]))


def default_parameters(name: str, results_dir: Path) -> dict[str, Any]:
    """What ``execute_all`` passes to a notebook before the user's ``--param`` values."""
    if name == "prompt_lab":
        return {"results_dir": str(results_dir / "lab")}
    return {"results_dir": str(results_dir), "figures_dir": str(results_dir / "notebooks" / "figures")}


def execute(
    name: str, results_dir: str | Path, params: Mapping[str, Any] | None = None, progress: bool = True
) -> Path:
    """Run one notebook into ``<results_dir>/notebooks/``; only parameters it declares are passed."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    results = repo_path(results_dir)
    declared = declared_parameters(name)
    parameters = {
        k: v for k, v in {**default_parameters(name, results), **(params or {})}.items() if k in declared
    }
    output = results / "notebooks" / NOTEBOOKS[name]
    output.parent.mkdir(parents=True, exist_ok=True)
    try:
        papermill.execute_notebook(
            str(NOTEBOOKS_DIR / NOTEBOOKS[name]),
            str(output),
            parameters=parameters,
            kernel_name=ensure_kernel(),
            cwd=str(REPO_ROOT),
            progress_bar=progress,
        )
    except PapermillExecutionError as e:
        raise KitError(
            f"notebook {NOTEBOOKS[name]} failed in cell In[{e.exec_count}] (cell #{e.cell_index}): "
            f"{e.ename}: {e.evalue}",
            f"the executed notebook, with the traceback, is {output}",
        ) from None
    return output


def execute_all(
    results_dir: str | Path,
    params: Mapping[str, Any] | None = None,
    only: str | Sequence[str] | None = None,
    progress: bool = True,
) -> list[Path]:
    """Run the notebooks (all, or ``only``) on ``results_dir``; return the executed notebooks' paths.

    A parameter in ``params`` that none of the selected notebooks declares is an error (a typo would
    otherwise be silently ignored).
    """
    names = select(only)
    known = set().union(*(declared_parameters(n) for n in names))
    unknown = sorted(set(params or {}) - known)
    if unknown:
        raise KitError(
            f"unknown notebook parameter(s): {', '.join(unknown)}", f"known: {', '.join(sorted(known))}"
        )
    return [execute(name, results_dir, params, progress) for name in names]


# --------------------------------------------------------------------------- JupyterLab (make lab)


def headless(environ: Mapping[str, str] | None = None, platform: str | None = None) -> bool:
    """No browser to open: Linux/BSD without a display (a server, a container, an SSH session)."""
    environ = os.environ if environ is None else environ
    platform = sys.platform if platform is None else platform
    if platform.startswith(("darwin", "win")):
        return False
    return not (environ.get("DISPLAY") or environ.get("WAYLAND_DISPLAY"))


def jupyter_lab_command(
    extra: Sequence[str] = (),
    uid: int | None = None,
    environ: Mapping[str, str] | None = None,
    platform: str | None = None,
) -> list[str]:
    """``jupyter lab notebooks/`` for this interpreter: ``--allow-root`` only when running as root
    (Jupyter refuses root otherwise, and containers run as root), ``--no-browser`` when headless."""
    uid = (os.getuid() if hasattr(os, "getuid") else 1) if uid is None else uid
    cmd = [sys.executable, "-m", "jupyter", "lab", str(NOTEBOOKS_DIR)]
    if uid == 0:
        cmd.append("--allow-root")
    if headless(environ, platform):
        cmd.append("--no-browser")
    return cmd + list(extra)


def _lab_cli(args: argparse.Namespace) -> int:
    cmd = jupyter_lab_command([a for a in args.jupyter_args if a != "--"])
    print(" ".join(cmd), flush=True)
    os.execv(cmd[0], cmd)  # replaces this process: Ctrl-C and the exit code are Jupyter's
    return 0  # not reached


# --------------------------------------------------------------------------- CLI


def _cli(args: argparse.Namespace) -> int:
    params = dict(parse_param(p) for p in args.param)
    for path in execute_all(args.results_dir, params=params, only=args.only, progress=not args.quiet):
        print(path)
    return 0


def add_cli(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``notebooks RESULTS_DIR [--only NAME] [--param k=v ...]``; the handler is ``args.func``."""
    p = subparsers.add_parser(
        "notebooks",
        help="execute the analysis notebooks on a results folder (papermill)",
        description="Execute notebooks/*.ipynb on RESULTS_DIR; output in RESULTS_DIR/notebooks/.",
    )
    p.add_argument("results_dir", help="an experiment folder, e.g. results/default")
    p.add_argument(
        "--only", action="append", help=f"one notebook ({', '.join(NOTEBOOKS)}, or 01/02/03/04); repeatable"
    )
    p.add_argument(
        "--param", action="append", default=[], metavar="K=V", help="a notebook parameter (YAML value)"
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_cli)

    lab = subparsers.add_parser(
        "lab",
        help="JupyterLab on notebooks/ (--allow-root only as root, --no-browser when headless)",
        description="Start JupyterLab on notebooks/; arguments after -- go to jupyter lab.",
    )
    lab.add_argument("jupyter_args", nargs=argparse.REMAINDER, help="passed to jupyter lab")
    lab.set_defaults(func=_lab_cli)
    return p
