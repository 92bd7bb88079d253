"""Starts one pytest session for the kit's scorer, INSIDE the scoring sandbox (imports nothing from
the kit). Run as ``python -I -B launcher.py SETTINGS.json``.

``-I`` (which implies ``-P``): no PYTHON* variables, no user site-packages, and neither this script's
folder nor the working folder (the copy of the repo under test) on ``sys.path``. So pytest, its
plugins and the standard library come from the interpreter, never from the repo: a ``pytest.py``,
``_pytest/``, ``json.py`` or ``sitecustomize.py`` in the repo is just a file. The repo is put on
``sys.path`` only after pytest is imported, and at the END, so its modules are found for the tests
but never ahead of the standard library or site-packages.

In the acceptance session the plugin's audit hook is installed before the repo goes on ``sys.path``,
so it sees everything the code under test does (audit hooks cannot be removed).
"""

import importlib.util
import json
import sys


def main() -> int:
    with open(sys.argv[1], encoding="utf-8") as fh:
        settings = json.load(fh)
    import pytest

    spec = importlib.util.spec_from_file_location("orchbench_scoring_plugin", settings["plugin"])
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)  # not in sys.modules: the code under test cannot look it up by name
    reporter = plugin.StreamReporter(
        settings["fd"], settings.get("canary_file"), settings["canaries"], bool(settings.get("hidden"))
    )
    if settings.get("hidden"):
        sys.addaudithook(plugin.Audit(reporter, settings["repo"], settings["hidden"]))
    sys.path.append(settings["repo"])
    return int(pytest.main(settings["args"], plugins=[reporter]))


if __name__ == "__main__":
    sys.exit(main())
