"""Execute the notebooks with papermill, and the few helpers the notebooks call.

``python -m kit notebooks results/default`` writes ``results/default/notebooks/NN_name.ipynb`` with
figures in ``results/default/notebooks/figures/``: 01, 02 and 04, which read the records and call no
model; the prompt lab (03) runs models and executes only when asked (``--only prompt_lab``). A notebook
given parameters is written as ``NN_name-<parameters>.ipynb`` (figures in ``figures/NN_name-<parameters>/``)
so what-ifs sit side by side. The kernel is this interpreter (a kernelspec whose
command is ``sys.executable`` is ensured), the working directory is the repository root, and a failing
cell becomes a :class:`~kit.errors.KitError` naming the notebook, the cell and the error.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import re
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from kit.app.notebook_helpers import (  # noqa: F401 - the notebooks' helpers, importable from here as before
    figures_folder,
    prepare_benchmark,
    repo_path,
    show,
    whole,
)
from kit.errors import KitError
from kit.paths import NOTEBOOKS_DIR, PROMPTS_DIR, REPO_ROOT

NOTEBOOKS = {
    "benchmark": "01_benchmark.ipynb",
    "tier_economics": "02_tier_economics.ipynb",
    "prompt_lab": "03_prompt_lab.ipynb",
    "verdict": "04_verdict.ipynb",
    "crossover": "05_crossover.ipynb",
}
DEFAULT = ("benchmark", "tier_economics", "verdict", "crossover")  # read records only; the lab runs models
NOT_IN_NAME = ("results_dir", "figures_dir")  # parameters that do not name the output
LAB_COPY = "lab-notebooks"  # `kit lab`'s working copy of the notebooks, under the results root
KERNEL_NAME = "orchbench"  # installed into this environment when no kernelspec runs sys.executable


# --------------------------------------------------------------------------- execution


def select(only: str | Sequence[str] | None = None) -> list[str]:
    """Notebook names to run: 01, 02 and 04 (:data:`DEFAULT`), or those named by ``only``
    ("benchmark", "01", "01_benchmark" ...)."""
    if only is None:
        return list(DEFAULT)
    picked = []
    for want in [only] if isinstance(only, str) else only:
        key = want.removesuffix(".ipynb")
        match = [n for n, f in NOTEBOOKS.items() if key in (n, f.removesuffix(".ipynb"), f[:2])]
        if not match:
            valid = ", ".join(f"{f[:2]} / {n}" for n, f in NOTEBOOKS.items())
            raise KitError(f"unknown notebook {want!r}", f"pick one of: {valid}")
        picked += [m for m in match if m not in picked]
    return picked


def split_param(text: str) -> tuple[str, str]:
    """``k=v`` -> (k, "v"), the value as written."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise KitError(f"bad parameter {text!r}", "write it as name=value, e.g. --param price_sheet=null")
    return key.strip(), value


def parse_param(text: str, default: str | None = None) -> tuple[str, Any]:
    """``k=v`` -> (k, v). ``default`` is the parameter's default as the notebook writes it
    (:func:`declared_parameters`): a string parameter keeps ``v`` as a string, word for word (a
    markdown heading or ``Role: reviewer`` in a prompt stays text); one whose default is None is None
    for ``None`` / ``null`` / ``~`` / nothing and else the string; any other value is read as YAML
    (numbers, true/false, {a: b}, [x, y])."""
    key, value = split_param(text)
    kind = _default_kind(default)
    if kind is str:
        return key, value
    if value.strip() in ("None", "null", "~", ""):
        return key, None if kind is None or value.strip() else ""
    if kind is None:
        return key, value
    try:
        return key, yaml.safe_load(value)
    except yaml.YAMLError:
        return key, value


def _default_kind(default: str | None) -> type | None | str:
    """str, None or "other" for a notebook default written as Python source; "other" when unknown."""
    if default is None:
        return "other"
    try:
        value = ast.literal_eval(default)
    except (ValueError, SyntaxError):
        return "other"
    return str if isinstance(value, str) else None if value is None else "other"


def read_param_file(text: str) -> tuple[str, str]:
    """``k=PATH`` -> (k, the file's text): a long or multi-line string parameter from a file."""
    key, path = split_param(text)
    file = Path(path).expanduser()
    try:
        return key, file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise KitError(
            f"--param-file {key}: cannot read {file} ({e.__class__.__name__}: {e})",
            "give a readable UTF-8 text file, e.g. --param-file prompt_override=my_prompt.md",
        ) from None


def cli_params(names: Sequence[str], params: Sequence[str] = (), files: Sequence[str] = ()) -> dict[str, Any]:
    """The ``--param`` and ``--param-file`` values for the notebooks ``names``, typed by the defaults
    those notebooks declare (:func:`parse_param`)."""
    defaults: dict[str, str] = {}
    for name in names:
        for key, spec in declared_parameters(name).items():
            defaults.setdefault(key, spec.get("default"))
    out = {}
    for text in params:
        key, _ = split_param(text)
        out.update([parse_param(text, defaults.get(key))])
    out.update(read_param_file(text) for text in files)
    return out


def param_slug(params: Mapping[str, Any], limit: int = 60) -> str:
    """The parameters as a file-name part: ``{"reassign": {"executor": "medium"}}`` ->
    ``reassign-executor-medium``; longer than ``limit`` is cut and a hash of the whole appended."""

    def flat(value: Any) -> str:
        if isinstance(value, Mapping):
            return "-".join(f"{k}-{flat(v)}" for k, v in value.items())
        if isinstance(value, list | tuple):
            return "-".join(flat(v) for v in value)
        return str(value)

    slug = "-".join(f"{k}-{flat(params[k])}" for k in sorted(params))
    slug = re.sub(r"[^A-Za-z0-9._]+", "-", slug).strip("-.")
    if len(slug) > limit:
        digest = hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()[:8]
        slug = f"{slug[: limit - 9].rstrip('-.')}-{digest}"
    return slug


#: Arguments of the kit's own kernels: ipykernel's warning that its local TCP sockets are unencrypted
#: (printed by every kernel start, on 127.0.0.1 only) is left out; its errors still show.
KERNEL_ARGS = ["--IPKernelApp.log_level=ERROR"]


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


def default_parameters(
    name: str, results_dir: Path, chosen: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """What ``execute`` passes to a notebook before the user's ``chosen`` values: the results folder;
    the figures folder (named like the output when parameters were chosen); for the prompt lab, its
    results root ``<results_dir>/lab`` and ``like``: the experiment whose profile, api base and sandbox
    the lab runs on (:func:`kit.app.prompt_lab.recorded_setup`)."""
    if name == "prompt_lab":
        like = {"like": str(results_dir)} if (results_dir / "experiment.yaml").is_file() else {}
        return {"results_dir": str(results_dir / "lab"), **like}
    figures = results_dir / "notebooks" / "figures"
    slug = param_slug(chosen or {})
    if slug:
        figures = figures / f"{NOTEBOOKS[name].removesuffix('.ipynb')}-{slug}"
    return {"results_dir": str(results_dir), "figures_dir": str(figures)}


def output_path(name: str, results_dir: Path, chosen: Mapping[str, Any] | None = None) -> Path:
    """``<results_dir>/notebooks/NN_name.ipynb``, or ``NN_name-<parameters>.ipynb`` (:func:`param_slug`
    of the chosen parameters but the folders) so two what-ifs never overwrite each other."""
    stem = NOTEBOOKS[name].removesuffix(".ipynb")
    slug = param_slug({k: v for k, v in (chosen or {}).items() if k not in NOT_IN_NAME})
    return results_dir / "notebooks" / (f"{stem}-{slug}.ipynb" if slug else f"{stem}.ipynb")


def execute(
    name: str, results_dir: str | Path, params: Mapping[str, Any] | None = None, progress: bool = True
) -> Path:
    """Run one notebook into ``<results_dir>/notebooks/`` (:func:`output_path`); only parameters it
    declares are passed. The progress bar names the notebook and the cell it is executing."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    results = repo_path(results_dir)
    declared = declared_parameters(name)
    chosen = {k: v for k, v in (params or {}).items() if k in declared}
    named = {k: v for k, v in chosen.items() if k not in NOT_IN_NAME}
    parameters = {
        k: v for k, v in {**default_parameters(name, results, named), **chosen}.items() if k in declared
    }
    output = output_path(name, results, chosen)
    output.parent.mkdir(parents=True, exist_ok=True)
    try:
        papermill.execute_notebook(
            str(NOTEBOOKS_DIR / NOTEBOOKS[name]),
            str(output),
            parameters=parameters,
            kernel_name=ensure_kernel(),
            cwd=str(REPO_ROOT),
            progress_bar=progress,
            engine_name=_named_engine(),
            progress_label=output.stem,
            extra_arguments=KERNEL_ARGS,
        )
    except PapermillExecutionError as e:
        raise KitError(
            f"notebook {output.name} failed in cell In[{e.exec_count}] (cell #{e.cell_index}): "
            f"{e.ename}: {e.evalue}",
            f"the executed notebook, with the traceback, is {output}",
        ) from None
    return output


def _named_engine() -> str:
    """Register (once) papermill's nbclient engine with a progress bar that reads
    ``<notebook> cell i/n``, and return its name."""
    from papermill.engines import NBClientEngine, NotebookExecutionManager, papermill_engines

    if "orchbench" in papermill_engines._engines:
        return "orchbench"

    class Manager(NotebookExecutionManager):
        label = "notebook"

        def cell_start(self, cell: Any, cell_index: int | None = None, **kwargs: Any) -> None:
            super().cell_start(cell, cell_index, **kwargs)
            if getattr(self, "pbar", None) and cell_index is not None:
                self.pbar.set_description(f"{self.label} cell {cell_index + 1}/{len(self.nb.cells)}")

    class Engine(NBClientEngine):
        @classmethod
        def execute_notebook(
            cls,
            nb: Any,
            kernel_name: str,
            output_path: Any = None,
            progress_bar: Any = True,
            log_output: bool = False,
            autosave_cell_every: int = 30,
            **kwargs: Any,
        ) -> Any:
            label = kwargs.pop("progress_label", "notebook")
            bar = {"desc": label} if progress_bar is True else progress_bar
            manager = Manager(
                nb,
                output_path=output_path,
                progress_bar=bar,
                log_output=log_output,
                autosave_cell_every=autosave_cell_every,
            )
            manager.label = label
            manager.notebook_start()
            try:
                cls.execute_managed_notebook(manager, kernel_name, log_output=log_output, **kwargs)
            finally:
                manager.cleanup_pbar()
                manager.notebook_complete()
            return manager.nb

    papermill_engines.register("orchbench", Engine)
    return "orchbench"


def execute_all(
    results_dir: str | Path,
    params: Mapping[str, Any] | None = None,
    only: str | Sequence[str] | None = None,
    progress: bool = True,
) -> list[Path]:
    """Run the notebooks (01, 02 and 04, or ``only``) on ``results_dir``; return the executed notebooks'
    paths.

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


def lab_workspace(results: str | Path | None = None) -> Path:
    """``<results root>/lab-notebooks/``: a working copy of the tracked notebooks for JupyterLab, so
    edits there never change ``notebooks/``, and of the prompts (``prompts/<strategy>/<role>.md``), so
    the prompt lab's prompt is a file the lab's file browser reaches. A file already copied is left as
    the user edited it; one missing is copied. Returns the folder."""
    from kit.paths import results_root

    root = Path(results).expanduser().resolve() if results is not None else results_root()
    folder = root / LAB_COPY
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for file in NOTEBOOKS.values():
            if not (folder / file).exists():
                shutil.copyfile(NOTEBOOKS_DIR / file, folder / file)
        for source in sorted(PROMPTS_DIR.rglob("*")):  # the prompts, editable from the file browser
            target = folder / "prompts" / source.relative_to(PROMPTS_DIR)
            if source.is_file() and source.suffix in (".md", ".yaml") and not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target)
    except OSError as e:
        raise KitError(
            f"cannot make the notebooks' working copy in {folder}: {e.strerror or e}",
            "pass a writable results folder: python -m kit lab --results DIR",
        ) from None
    return folder


def jupyter_lab_command(
    extra: Sequence[str] = (),
    uid: int | None = None,
    environ: Mapping[str, str] | None = None,
    platform: str | None = None,
    workspace: Path | None = None,
) -> list[str]:
    """``jupyter lab`` for this interpreter, rooted at the results folder that holds ``workspace`` (the
    working copy of the notebooks, opened first), so every experiment folder is reachable too:
    ``--allow-root`` only when running as root (Jupyter refuses root otherwise, and containers run
    as root), ``--no-browser`` when headless."""
    uid = (os.getuid() if hasattr(os, "getuid") else 1) if uid is None else uid
    workspace = lab_workspace() if workspace is None else workspace
    cmd = [
        sys.executable,
        "-m",
        "jupyter",
        "lab",
        f"--ServerApp.root_dir={workspace.parent}",
        f"--LabApp.default_url=/lab/tree/{workspace.name}",
    ]
    if uid == 0:
        cmd.append("--allow-root")
    if headless(environ, platform):
        cmd.append("--no-browser")
    return cmd + list(extra)


def _lab_cli(args: argparse.Namespace) -> int:
    workspace = lab_workspace(args.results)
    cmd = jupyter_lab_command([a for a in args.jupyter_args if a != "--"], workspace=workspace)
    print(f"working copy of the notebooks: {workspace} (notebooks/ stays as committed)", flush=True)
    print(
        f"editable copies of the prompts: {workspace / 'prompts'} (in 03_prompt_lab, set e.g. "
        "prompt_file = 'prompts/vibe/coder.md' to run with your edited copy)",
        flush=True,
    )
    print(" ".join(cmd), flush=True)
    os.execv(cmd[0], cmd)  # replaces this process: Ctrl-C and the exit code are Jupyter's
    return 0  # not reached


# --------------------------------------------------------------------------- CLI


def _cli(args: argparse.Namespace) -> int:
    params = cli_params(select(args.only), args.param, args.param_file)
    for path in execute_all(args.results_dir, params=params, only=args.only, progress=not args.quiet):
        print(path)
    return 0


def add_cli(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``notebooks RESULTS_DIR [--only NAME] [--param k=v ...] [--param-file k=PATH ...]``
    and ``lab``; the handler is ``args.func``."""
    p = subparsers.add_parser(
        "notebooks",
        help="execute the analysis notebooks on a results folder (papermill)",
        description="Execute notebooks 01, 02 and 04 (or --only ...) on RESULTS_DIR; output in "
        "RESULTS_DIR/notebooks/, named by the parameters given.",
    )
    p.add_argument("results_dir", help="an experiment folder, e.g. results/default")
    p.add_argument(
        "--only",
        action="append",
        help=f"one notebook ({', '.join(NOTEBOOKS)}, or 01/02/03/04); repeatable; "
        "default 01, 02, 04 (the prompt lab runs models: only when named)",
    )
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="K=V",
        help="a notebook parameter; a string parameter keeps V as written, others are read as YAML",
    )
    p.add_argument(
        "--param-file",
        action="append",
        default=[],
        metavar="K=PATH",
        help="a notebook parameter whose value is the text of PATH (e.g. prompt_override=prompt.md)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_cli)

    lab = subparsers.add_parser(
        "lab",
        help="JupyterLab on a working copy of the notebooks (results/lab-notebooks/), results reachable",
        description="Copy notebooks/ to RESULTS/lab-notebooks/ (once; your edits stay there) and start "
        "JupyterLab rooted at RESULTS; arguments after -- go to jupyter lab.",
    )
    lab.add_argument("--results", type=Path, default=None, help="results root (default results/)")
    lab.add_argument("jupyter_args", nargs=argparse.REMAINDER, help="passed to jupyter lab")
    lab.set_defaults(func=_lab_cli)
    return p
