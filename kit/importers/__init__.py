"""Making tasks: ``git/`` turns a repository's history into tasks (``kit tasks import-git``),
``exercism/`` Exercism-layout exercises, ``suite_build`` a suite from its projects' clones.

``validate`` checks a task folder against the contract (the starting code fails the hidden tests and
passes its own; the reference solution passes everything) through the scorer, as every importer does
before it writes a task.

May import: the top-level modules, ``kit.records``, ``kit.sandbox``, ``kit.model``, ``kit.agent``,
``kit.tasks``, ``kit.scoring``.
"""
