"""orchbench: measure how different ways of orchestrating LLM agents do on the same coding task.

The package is layered; each sub-package's docstring says what it is for and what it may import, and
``tests/test_layers.py`` enforces the order (top-level vocabulary, records, sandbox, model, agent,
tasks, scoring, importers, strategies, run, analysis, app). Old module paths keep importing for one
release through :mod:`kit.aliases`.
"""

from kit import aliases as _aliases

__version__ = "0.1.0"

_aliases.install()
