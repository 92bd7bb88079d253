"""The agent's view: what a command an agent runs sees of where it runs, naming nothing of the
experiment (``neutral=True`` on a sandbox's ``run``; the agent's ``run`` and ``search`` tools and
linear's test gate ask for it).

Without it a command sees the clone at its host path -- ``.../results/<experiment>/runs/<task>__<strategy>__<profile>__r1/repo``
-- and the kit's interpreter at its: the venv inside the kit's checkout, whose ``pyvenv.cfg``, script
shebangs, ``PATH`` entry, editable-install finder (``__editable___orchbench_*_finder.py``, its
``MAPPING`` pointing at the checkout) and ``direct_url.json`` name the checkout. With it:

- the clone is at :data:`VIEW_REPO` (``/work/repo``), the command's working folder, whatever its
  host path; ``PYTHONPATH`` and the other variables naming the clone are rewritten to match;
- a venv interpreter outside the system folders is at :data:`VIEW_PREFIX` (``/opt/venv``): its
  ``lib`` bound there, its ``bin`` a copy made once per kit process with each script's shebang
  rewritten, its ``pyvenv.cfg`` a copy keeping only ``home``, ``version``,
  ``include-system-site-packages`` and ``implementation``; in its site-packages the files of
  editable and local installs (``__editable__*``, ``*.egg-link``, a ``.pth`` naming a folder,
  ``*.dist-info/direct_url.json``) are empty files.

What still names the host paths: ``/proc/self/mountinfo`` lists each bind mount's source folder
(the venv's ``lib`` in the checkout; the clone's folder when it has no file system of its own, i.e.
without root; a throwaway overlay's layers) -- docs/sandbox.md, "What is not hidden".
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

VIEW_REPO = Path("/work/repo")
VIEW_PREFIX = Path("/opt/venv")
_CFG_KEYS = ("home", "version", "version_info", "include-system-site-packages", "implementation")


@dataclass(frozen=True)
class VenvView:
    """The kit's venv as a command sees it at :data:`VIEW_PREFIX`."""

    prefix: Path  # the venv on the host
    bin: Path  # the rewritten copy of its bin/
    cfg: Path  # the trimmed copy of its pyvenv.cfg
    hidden: tuple[Path, ...]  # host files shown empty (editable and local installs)


def _venv() -> Path | None:
    """The kit's venv, when it runs from one outside the system folders."""
    prefix = Path(sys.prefix).resolve()
    if prefix == Path(sys.base_prefix).resolve() or prefix.parts[1:2] in (("usr",), ("etc",)):
        return None
    return prefix if (prefix / "pyvenv.cfg").is_file() else None


def _hidden(prefix: Path) -> tuple[Path, ...]:
    """The files of ``prefix``'s site-packages that name a host folder."""
    out: list[Path] = []
    for site in sorted(prefix.glob("lib*/python*/site-packages")):
        for entry in sorted(site.iterdir()) if site.is_dir() and not site.is_symlink() else ():
            name = entry.name
            if entry.is_symlink() or not (entry.is_file() or entry.is_dir()):
                continue
            if (
                entry.is_file()
                and (name.startswith("__editable__") or name.endswith(".egg-link"))
                or entry.is_file()
                and name.endswith(".pth")
                and _names_a_folder(entry)
            ):
                out.append(entry)
            elif entry.is_dir() and name.endswith(".dist-info") and (entry / "direct_url.json").is_file():
                out.append(entry / "direct_url.json")
    return tuple(out)


def _names_a_folder(pth: Path) -> bool:
    try:
        lines = pth.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return True
    return any(line.strip().startswith(("/", ".")) or "/" in line for line in lines if line.strip())


@functools.cache
def venv_view() -> VenvView | None:
    """The kit's venv made neutral (made once per kit process, removed at exit); None without one."""
    prefix = _venv()
    if prefix is None:
        return None
    folder = Path(tempfile.mkdtemp(prefix="orchbench-venv-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    folder.chmod(0o755)
    (folder / "bin").mkdir(mode=0o755)
    old, new = os.fsencode(prefix), os.fsencode(VIEW_PREFIX)
    for entry in sorted((prefix / "bin").iterdir()):
        target = folder / "bin" / entry.name
        if entry.is_symlink():
            link = os.readlink(entry)
            target.symlink_to(link.replace(str(prefix), str(VIEW_PREFIX)))
        elif entry.is_file() and not entry.name.startswith(("activate", "Activate")):
            try:
                target.write_bytes(entry.read_bytes().replace(old, new))
            except OSError:
                continue
            target.chmod(entry.stat().st_mode & 0o755 | 0o444)
    lines = (prefix / "pyvenv.cfg").read_text(encoding="utf-8", errors="replace").splitlines()
    kept = [ln for ln in lines if ln.split("=", 1)[0].strip().lower() in _CFG_KEYS]
    (folder / "pyvenv.cfg").write_text("".join(f"{ln}\n" for ln in kept), encoding="utf-8")
    (folder / "pyvenv.cfg").chmod(0o644)
    return VenvView(prefix, folder / "bin", folder / "pyvenv.cfg", _hidden(prefix))


def view_path(path: Path, cwd: Path) -> Path:
    """Where the host ``path`` is in the neutral view of a command working in ``cwd``."""
    path = Path(path)
    if path == cwd or path.is_relative_to(cwd):
        return VIEW_REPO / path.relative_to(cwd)
    venv = venv_view()
    if venv is not None and path.is_relative_to(venv.prefix):
        return VIEW_PREFIX / path.relative_to(venv.prefix)
    return path


def view_text(text: str, cwd: Path) -> str:
    """``text`` (an argument, a variable) with the clone's and the venv's host paths as the view's."""
    text = text.replace(str(cwd), str(VIEW_REPO))
    venv = venv_view()
    return text.replace(str(venv.prefix), str(VIEW_PREFIX)) if venv is not None else text
