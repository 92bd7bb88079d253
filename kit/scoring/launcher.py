"""Starts one pytest session for the kit's scorer, INSIDE the scoring sandbox (imports nothing from
the kit). Run as ``python -I -B launcher.py FD``: FD is a pipe holding the session's settings as
JSON, read and closed here before any code under test loads (no file in the sandbox holds them).

``-I`` (which implies ``-P``): no PYTHON* variables, no user site-packages, and neither this script's
folder nor the working folder (the copy of the repo under test) on ``sys.path``. So pytest, its
plugins and the standard library come from the interpreter, never from the repo: a ``pytest.py``,
``_pytest/``, ``json.py`` or ``sitecustomize.py`` in the repo is just a file. The repo is put on
``sys.path`` only after pytest is imported, and at the END, so its modules are found for the tests
but never ahead of the standard library or site-packages.

A task's ``packages`` (``kit/tasks/packages.py``) are the one exception to "repo last": a finder put
first on ``sys.meta_path`` imports those names -- and only those -- from the copy's import roots, never
from the interpreter's site-packages (a missing one fails to import; it never falls back).

In the acceptance session the plugin's audit hook is installed before the repo goes on ``sys.path``,
so it sees everything the code under test does (audit hooks cannot be removed). This frame keeps no
reference to the plugin's hooks or to the pipe's fd (``plugin.install`` takes it out of the settings):
walking the stack up to ``main`` finds nothing that leads to the stream.
"""

import importlib.machinery
import importlib.util
import json
import os
import sys

_PathFinder = importlib.machinery.PathFinder


class _TreeFirst:
    """A meta path finder for the task's top-level packages: found in the tree's import roots only."""

    def __init__(self, names: list[str], roots: list[str]) -> None:
        self.names, self.roots = frozenset(names), list(roots)

    def find_spec(self, name: str, path: object = None, target: object = None) -> object:
        if name not in self.names:
            return None
        spec = _PathFinder.find_spec(name, self.roots)
        if spec is None:  # never the installed copy of the same name
            raise ModuleNotFoundError(f"No module named {name!r} in the tree under test", name=name)
        return spec


def main() -> int:
    fd = int(sys.argv[1])  # a pipe the kit wrote the settings into: read whole, then closed
    with os.fdopen(fd, "rb") as fh:
        settings = json.loads(fh.read())
    import pytest

    spec = importlib.util.spec_from_file_location("orchbench_scoring_plugin", settings["plugin"])
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)  # not in sys.modules: the code under test cannot look it up by name
    plugins = iter(plugin.install(settings))  # install takes the pipe's fd out of settings
    args = settings["args"]
    if settings.get("packages"):
        sys.meta_path.insert(0, _TreeFirst(settings["packages"], settings["package_roots"]))
    sys.path.append(settings["repo"])
    del settings, plugin, spec
    # handed over as a one-shot iterator: once pytest has registered the hooks, neither this frame nor
    # pytest.main's holds them (pytest's plugin manager does; their send is a closure, see plugin.py)
    return int(pytest.main(args, plugins=plugins))


if __name__ == "__main__":
    sys.exit(main())
