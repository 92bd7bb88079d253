"""Starts one pytest session for the kit's scorer, INSIDE the scoring sandbox (imports nothing from
the kit). Run as ``python -I -B launcher.py FD``: FD is a pipe holding the session's settings as
JSON, read and closed here before any code under test loads (no file in the sandbox holds them).

``-I`` (which implies ``-P``): no PYTHON* variables, no user site-packages, and neither this script's
folder nor the working folder (the copy of the repo under test) on ``sys.path``. So pytest, its
plugins and the standard library come from the interpreter, never from the repo: a ``pytest.py``,
``_pytest/``, ``json.py`` or ``sitecustomize.py`` in the repo is just a file. The repo is put on
``sys.path`` only after pytest is imported, and at the END, so its modules are found for the tests
but never ahead of the standard library or site-packages.

In the acceptance session the plugin's audit hook is installed before the repo goes on ``sys.path``,
so it sees everything the code under test does (audit hooks cannot be removed). This frame keeps no
reference to the plugin's hooks or to the pipe's fd (``plugin.install`` takes it out of the settings):
walking the stack up to ``main`` finds nothing that leads to the stream.
"""

import importlib.util
import json
import os
import sys


def main() -> int:
    fd = int(sys.argv[1])  # a pipe the kit wrote the settings into: read whole, then closed
    with os.fdopen(fd, "rb") as fh:
        settings = json.loads(fh.read())
    import pytest

    spec = importlib.util.spec_from_file_location("orchbench_scoring_plugin", settings["plugin"])
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)  # not in sys.modules: the code under test cannot look it up by name
    plugins = iter([plugin.install(settings)])  # install takes the pipe's fd out of settings
    args = settings["args"]
    sys.path.append(settings["repo"])
    del settings, plugin, spec
    # handed over as a one-shot iterator: once pytest has registered the hooks, neither this frame nor
    # pytest.main's holds them (pytest's plugin manager does; their send is a closure, see plugin.py)
    return int(pytest.main(args, plugins=plugins))


if __name__ == "__main__":
    sys.exit(main())
