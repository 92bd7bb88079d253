"""Where every agent command and every scoring process runs: one ``Sandbox`` interface, a registry of
backends (``bwrap``, ``podman``, ``docker``, ``none``) and the bounded process runner they share.

* ``base`` -- the interface and the allow-listed environment; ``backends`` -- the registry
  (``get_sandbox``, ``check_available``) and what each backend shows and hides;
* ``bwrap``, ``podman``, ``docker`` and ``plain`` (the ``none`` backend) -- one module per backend;
  ``seccomp`` -- the filter bwrap loads (kernel keyrings, mounts, new namespaces denied);
* ``container`` -- a fresh container per command, what podman and docker share; ``client`` -- running
  the engine's client (timeout, output, descriptors relayed); ``engine`` -- install hints, errors,
  leftover containers; ``images`` and ``rootfs`` -- the image (the kit's built from the host's files);
* ``processes`` -- one command as a bounded process tree (rlimits, pids cgroup, output, timeout);
* ``commands`` -- running a shell command line in a backend, for the tools and scoring.

May import: the top-level modules only.
"""

from kit import aliases as _aliases


def __getattr__(name: str) -> object:  # old names of the flat ``kit/sandbox.py``, for one release
    return _aliases.old_name(__name__, name)
