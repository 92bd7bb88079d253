"""Where every agent command and every scoring process runs: one ``Sandbox`` interface, a registry of
backends (``bwrap``, ``none``) and the bounded process runner they share.

* ``base`` -- the interface and the allow-listed environment; ``backends`` -- the registry
  (``get_sandbox``, ``check_available``) and what each backend shows and hides;
* ``bwrap`` and ``plain`` (the ``none`` backend) -- one module per backend (a container backend would
  be one more); ``seccomp`` -- the filter bwrap loads (kernel keyrings and the like denied);
* ``processes`` -- one command as a bounded process tree (rlimits, pids cgroup, output, timeout);
* ``commands`` -- running a shell command line in a backend, for the tools and scoring.

May import: the top-level modules only.
"""

from kit import aliases as _aliases


def __getattr__(name: str) -> object:  # old names of the flat ``kit/sandbox.py``, for one release
    return _aliases.old_name(__name__, name)
