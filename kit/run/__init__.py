"""The experiment: its plan, one run end to end, the thread and Ray executors, Ctrl-C and the lock.

* ``plan`` -- the matrix of runs (:class:`~kit.run.plan.RunSpec`), the kit commit, the masked profile.
* ``results`` -- the results folder, which runs are finished (resume), the storage error.
* ``single`` -- one run: clone, strategy, scoring, diff, run.json (``docs/records.md``).
* ``threads`` / ``ray_executor`` -- the two executors; ``progress`` -- what they report as they go.
* ``control`` -- one writer per results folder, and Ctrl-C.
* ``runner`` -- :func:`~kit.run.runner.run_experiment`, the entry point that picks the executor.

May import: everything above it (top level, ``records``, ``sandbox``, ``model``, ``agent``, ``tasks``,
``strategies``).
"""
