"""The ``docker`` backend: a container per command (:mod:`kit.sandbox.container`), run by Docker -- Docker
Desktop on macOS and Windows, ``dockerd`` on Linux. Docker's default seccomp profile already denies the
kernel-keyring, BPF, perf and userfaultfd calls, so it is kept (a Docker Desktop client has no profile
file of its own to start from); Docker has no ``--timeout``, so a container whose kit died is stopped
by nothing but its command's end (the kit removes it on every timeout of its own)."""

from __future__ import annotations

from kit.sandbox.container import ContainerSandbox


class DockerSandbox(ContainerSandbox):
    """Docker (Docker Desktop on macOS and Windows, ``dockerd`` on Linux), with Docker's default seccomp
    profile (it denies the keyring, BPF, perf and userfaultfd calls already)."""

    name = "docker"
    binary = "docker"
