"""What the container backends (podman, docker) add to the guarantees every backend shares
(tests/sandbox/test_sandbox.py): a fresh container per command that is gone when the command ends or
times out, the command's descriptors carried across the client, the kernel-keyring calls denied, an
image that is built once and holds no setuid binary and no host account, and errors that say what to
do. Each case runs under every container engine that can run here, and skips with the reason where it
cannot (tests/support/sandboxes.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kit.sandbox import images
from kit.sandbox.backends import (
    BACKENDS,
    CONTAINER_BACKENDS,
    SandboxUnavailable,
    check_available,
    get_sandbox,
)
from kit.sandbox.container import DEFAULT_IMAGE
from tests.support.sandboxes import backends

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the engines run Linux containers here")

CONTAINERS = backends(*CONTAINER_BACKENDS)


def _containers(box) -> list[str]:
    """The containers this kit process has (running or not)."""
    res = subprocess.run(
        [box.client, *box.global_args(), "ps", "--all", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return [n for n in res.stdout.split() if n.startswith(f"orchbench-{os.getpid()}-")]


def _sleeping(marker: str) -> list[int]:
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[:2] == [b"sleep", marker.encode()]:
            found.append(int(entry))
    return found


@pytest.mark.parametrize("backend", CONTAINERS)
def test_each_command_gets_a_fresh_container_that_is_gone_when_it_ends(tmp_path, backend):
    """What one command leaves in its /tmp, its home or a background process, the next never sees --
    scoring included: it never runs in an agent's container."""
    box = get_sandbox(backend)
    marker = f"{time.time_ns() % 10**6 + 300}.5"
    first = box.run(
        f"echo left > /tmp/left; echo left > ~/left; sleep {marker} & echo started",
        tmp_path,
        writable=True,
        timeout_s=30,
    )
    assert first.exit_code == 0 and "started" in first.output, first.output
    second = box.run("cat /tmp/left ~/left; ls /tmp; echo end", tmp_path, writable=True, timeout_s=30)
    assert "end" in second.output and "left\n" not in second.output, second.output
    assert _containers(box) == [] and _sleeping(marker) == []


@pytest.mark.parametrize("backend", CONTAINERS)
def test_a_timed_out_command_leaves_no_container_and_no_process(tmp_path, backend):
    box = get_sandbox(backend)
    marker = f"{time.time_ns() % 10**6 + 400}.5"
    started = time.monotonic()
    res = box.run(f"sleep {marker} & sleep {marker}; echo FINISHED", tmp_path, writable=True, timeout_s=3)
    assert res.timed_out and res.exit_code is None and "FINISHED" not in res.output
    assert time.monotonic() - started < 20
    assert _containers(box) == [] and _sleeping(marker) == []


KEYRING = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
calls = {"add_key": (248, b"user", b"stash", b"SOLUTION", 8, -4), "keyctl": (250, 0, -4, 0, 0, 0),
         "request_key": (249, b"user", b"stash", None, 0)}
for name, args in calls.items():
    print(name, libc.syscall(*args), ctypes.get_errno())
"""


@pytest.mark.parametrize("backend", CONTAINERS)
def test_the_kernel_keyring_calls_are_denied(tmp_path, backend):
    """A container without a user namespace shares the host's user keyrings (every run is the same
    sandbox user): podman's own profile allows keyctl, the kit's denies it -- as Docker's does."""
    if os.uname().machine != "x86_64":
        pytest.skip("the probe uses x86_64 system call numbers")
    (tmp_path / "keys.py").write_text(KEYRING)
    res = get_sandbox(backend).run("python3 keys.py", tmp_path, writable=True, timeout_s=30)
    got = {
        line.split()[0]: line.split()[1:]
        for line in res.output.splitlines()
        if line[:3] in ("add", "key", "req")
    }
    assert set(got) == {"add_key", "keyctl", "request_key"}, res.output
    assert all(ret == "-1" and errno_ == "1" for ret, errno_ in got.values()), got  # EPERM


@pytest.mark.parametrize("backend", CONTAINERS)
def test_descriptors_cross_the_client_with_their_numbers(tmp_path, backend):
    """As scoring passes them: a pipe the kit wrote and closed (read in the container) and one the
    command writes (read by the kit as it comes); the command's own stderr stays in its output."""
    settings_r, settings_w = os.pipe()
    report_r, report_w = os.pipe()
    os.write(settings_w, b'{"canary": "abc"}')
    os.close(settings_w)
    script = (
        f"import os, sys; data = os.read({settings_r}, 100); "
        f"os.write({report_w}, b'REPORT ' + data + b'\\n'); print('OUT'); print('ERR', file=sys.stderr)"
    )
    try:
        res = get_sandbox(backend).run(
            [sys.executable, "-c", script],
            tmp_path,
            writable=True,
            timeout_s=30,
            pass_fds=[report_w, settings_r],
        )
        os.close(report_w)
        report = os.read(report_r, 1000)
    finally:
        os.close(settings_r)
        os.close(report_r)
    assert res.exit_code == 0, res.output
    assert report == b'REPORT {"canary": "abc"}\n'
    assert "OUT" in res.output and "ERR" in res.output and "REPORT" not in res.output


@pytest.mark.parametrize("backend", CONTAINERS)
def test_the_image_holds_no_setuid_binary_no_host_account_and_the_kits_pytest(tmp_path, backend):
    from importlib import metadata

    probe = (
        "find / -xdev -perm /6000 -type f 2>/dev/null | head -5; echo ==; cat /etc/passwd; echo ==; "
        "ls /etc/shadow /etc/ssh /root 2>&1; echo ==; python -c 'import pytest; print(pytest.__version__)'"
    )
    res = get_sandbox(backend).run(probe, tmp_path, writable=True, timeout_s=30)
    setuid, passwd, hidden, version = res.output.split("==\n")
    assert setuid.strip() == "", setuid
    assert [line.split(":")[0] for line in passwd.splitlines()] == ["root", "sandbox"]
    assert hidden.count("No such file") + hidden.count("Permission denied") == 3, hidden
    assert version.strip() == metadata.version("pytest")


@pytest.mark.parametrize("backend", CONTAINERS)
def test_the_default_image_is_built_once_per_set_of_inputs(backend):
    box = get_sandbox(backend)
    started = time.monotonic()
    image, built = images.build_default(box)  # the session built it already (tests/support/sandboxes.py)
    assert not built and time.monotonic() - started < 10
    assert image.name == DEFAULT_IMAGE and image.id == images.image_id(box, DEFAULT_IMAGE)
    assert image.id.startswith("sha256:") and get_sandbox(image.spec(backend)).image == image.id


@pytest.mark.parametrize("backend", CONTAINERS)
def test_a_tasks_containerfile_is_built_once_and_kept_by_its_content(tmp_path, backend):
    box = get_sandbox(backend)
    task = tmp_path / "task"
    (task / "container").mkdir(parents=True)
    (task / "acceptance").mkdir()
    (task / "acceptance" / "test_hidden.py").write_text("SECRET = 1\n")
    (task / "container" / "tool.txt").write_text("from the context\n")
    containerfile = task / "Containerfile"
    containerfile.write_text(f"FROM {DEFAULT_IMAGE}\nCOPY tool.txt /opt/tool.txt\n")
    work = tmp_path / "work"  # (the task folder itself stays out of the command's sight)
    work.mkdir()
    built = [images.task_image(box, "probe-task", containerfile)]
    try:
        first = built[0]
        assert images.task_image(box, "probe-task", containerfile) == first  # kept, not built again
        res = get_sandbox(first.spec(backend)).run(
            "cat /opt/tool.txt; ls /opt; find / -name test_hidden.py 2>/dev/null",
            work,
            writable=True,
            timeout_s=30,
        )
        assert res.output.splitlines() == ["from the context", "tool.txt"], res.output  # no hidden test
        containerfile.write_text(f"FROM {DEFAULT_IMAGE}\nCOPY tool.txt /opt/other.txt\n")
        built.append(images.task_image(box, "probe-task", containerfile))
        assert built[1].name != first.name and built[1].id != first.id
    finally:
        for image in built:
            subprocess.run([box.client, "rmi", "--force", image.name], capture_output=True, check=False)


# --------------------------------------------------------------------------- errors that say what to do


@pytest.mark.parametrize("backend", CONTAINER_BACKENDS)
def test_a_missing_engine_says_how_to_install_it(monkeypatch, backend):
    cls = BACKENDS[backend]
    monkeypatch.setattr(cls, "binary", "orchbench-no-such-engine")
    with pytest.raises(SandboxUnavailable, match="not installed") as err:
        cls()
    assert "apt-get install" in str(err.value) and (
        "brew install podman" in str(err.value) or "Docker Desktop" in str(err.value)
    )


def test_where_bwrap_cannot_run_the_error_names_the_container_backends(monkeypatch):
    monkeypatch.setattr("kit.sandbox.backends.platform.system", lambda: "Darwin")
    with pytest.raises(SandboxUnavailable) as err:
        check_available.__wrapped__("bwrap")
    text = str(err.value)
    assert "sandbox: docker" in text and "sandbox: podman" in text and "build-image" in text
    assert "sandbox: none" in text  # the way out stays named


CRUN_ON_HYBRID_CGROUPS = """#!/bin/sh
# stands in for crun 1.8.1 on this host: what it printed when podman ran it here (cgroup v1 + v2)
echo "cgroups in hybrid mode not supported, drop all controllers from cgroupv2" >&2
exit 1
"""


@pytest.mark.parametrize("backend", backends("podman"))
def test_a_runtime_that_cannot_start_gives_one_error_with_the_fix(tmp_path, monkeypatch, backend):
    runtime = tmp_path / "crun"
    runtime.write_text(CRUN_ON_HYBRID_CGROUPS)
    runtime.chmod(0o755)
    monkeypatch.setenv("ORCHBENCH_PODMAN_RUNTIME", str(runtime))
    get_sandbox.cache_clear()
    try:
        with pytest.raises(SandboxUnavailable) as err:
            check_available.__wrapped__("podman")
    finally:
        get_sandbox.cache_clear()
    text = str(err.value)
    assert "cgroups in hybrid mode not supported" in text
    assert "apt-get install -y runc" in text and "ORCHBENCH_PODMAN_RUNTIME=runc" in text


@pytest.mark.parametrize("backend", CONTAINERS)
def test_a_missing_image_says_how_to_get_it(monkeypatch, backend):
    with pytest.raises(SandboxUnavailable, match=f"pull or build it first .`{backend} pull"):
        check_available.__wrapped__(f"{backend}@localhost/orchbench-no-such-image:1")
    monkeypatch.setattr(images, "DEFAULT_IMAGE", "localhost/orchbench-no-such-image:2")
    with pytest.raises(
        SandboxUnavailable, match=f"build it: `python -m kit sandbox build-image --sandbox {backend}`"
    ):
        images.resolve(get_sandbox(backend))


@pytest.mark.parametrize("backend", CONTAINER_BACKENDS)
def test_the_containerfile_build_passes_the_kits_versions_and_labels_its_inputs(monkeypatch, backend):
    """Where a registry is reachable (macOS, Windows) the default image comes from kit/sandbox/Containerfile;
    no registry is reachable here, so this checks the build the kit asks for, not its result."""
    from importlib import metadata

    asked: list[list[str]] = []
    monkeypatch.setattr(images, "image_id", lambda box, name: None)
    monkeypatch.setattr(images, "_checked", lambda box, args, what: asked.append(args))
    monkeypatch.setattr(images, "resolve", lambda box, name=None: images.Image(DEFAULT_IMAGE, "sha256:0"))
    box = BACKENDS[backend]()
    _, built = images.build_default(box, source="containerfile")
    (args,) = asked
    assert (
        built and args[:3] == ["build", "-t", DEFAULT_IMAGE] and args[-1] == str(images.CONTAINERFILE.parent)
    )
    assert (
        f"PYTEST={metadata.version('pytest')}" in args
        and f"PYTHON={sys.version_info[0]}.{sys.version_info[1]}" in args
    )
    assert any(a.startswith(f"{images.INPUTS_LABEL}=") for a in args)
    text = images.CONTAINERFILE.read_text()
    assert "python:${PYTHON}-slim" in text and '"pytest==${PYTEST}"' in text and "useradd -u" in text
