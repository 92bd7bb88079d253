"""``writable="throwaway"`` under every backend: a command may write anywhere in its folder and sees
what it wrote, and when it ends the folder is byte for byte what it was -- nothing written, deleted,
renamed, re-moded or linked there reaches it -- and nothing of the layer is left on the host."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from kit.agent.toolbox import Toolbox
from kit.sandbox import throwaway
from kit.sandbox.backends import ProcessLimits, check_available, get_sandbox
from tests.support.sandboxes import backends, skip_unless_ready

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap needs Linux")

EVERY = [*backends(), pytest.param("none", id="none")]
# writes a new file and folders, appends to a tracked file, through a hard link, deletes and renames,
# changes a mode, then shows the command saw all of it
ATTACK = (
    "echo new > made.txt && mkdir -p cache/deep && echo c > cache/deep/c.bin && "
    "echo more >> README.md && ln src/lib.py hard && echo evil >> hard && rm src/gone.py && "
    "mv src/keep.py src/moved.py && chmod 000 src/moved.py && echo gitx >> .git/HEAD && "
    "echo via-link >> link && ln -sfn /etc/hostname link && ln -s ../README.md src/up && echo up >> src/up && "
    "touch -d 2000-01-01 README.md && chmod 700 . && "
    "cat README.md made.txt && ls src && echo END"
)
# then removes everything it can see, the folder's own mode included
WIPE = "rm -rf ./* ./.git; ls -A; chmod 000 . && echo WIPED"


def snapshot(root: Path) -> dict[str, tuple[int, str]]:
    """Every entry under ``root``: (mode, content hash or link target)."""
    out = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder, name)
            st = path.lstat()
            body = os.readlink(path) if path.is_symlink() else (
                hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "")  # fmt: skip
            out[str(path.relative_to(root))] = (st.st_mode, st.st_nlink, st.st_mtime_ns, body)
    st = root.stat()
    out["."] = (st.st_mode, st.st_nlink, st.st_mtime_ns, "")
    return out


@pytest.fixture
def clone(tmp_path):
    root = tmp_path / "runs" / "r1" / "repo"
    (root / "src").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / "README.md").write_text("hello\n")
    for name in ("lib.py", "gone.py", "keep.py"):
        (root / "src" / name).write_text(f"# {name}\n")
    (root / "link").symlink_to("src/lib.py")
    return root


def layers_left(pid: int | None = None) -> list[str]:
    """The throwaway layers of process ``pid`` (this one's by default: not another test worker's)."""
    mine = f"orchbench-throwaway-{pid or os.getpid()}-"
    mounted = [line for line in Path("/proc/self/mountinfo").read_text().splitlines() if mine in line]
    folders = [p.name for p in Path(tempfile.gettempdir()).glob(mine + "*")]
    return mounted + folders


@pytest.mark.parametrize("backend", EVERY)
def test_a_throwaway_command_writes_and_sees_it_and_the_folder_is_untouched(clone, backend):
    before = snapshot(clone)
    res = get_sandbox(backend).run(ATTACK, clone, writable="throwaway", timeout_s=60)
    assert res.exit_code == 0 and res.output.rstrip().endswith("END"), res.output
    assert "hello\nmore\nup\nnew\n" in res.output and "moved.py" in res.output and "gone.py" not in res.output
    assert snapshot(clone) == before
    assert layers_left() == []
    res = get_sandbox(backend).run(WIPE, clone, writable="throwaway", timeout_s=60)
    assert res.output.strip() == "WIPED", res.output
    assert snapshot(clone) == before
    assert layers_left() == []


@pytest.mark.parametrize("backend", EVERY)
def test_read_only_still_refuses_every_write(clone, backend):
    if backend == "none":
        pytest.skip("the none backend cannot make a folder read-only (unsandboxed)")
    before = snapshot(clone)
    res = get_sandbox(backend).run(ATTACK, clone, writable=False, timeout_s=60)
    assert "Read-only file system" in res.output and "END" not in res.output
    assert snapshot(clone) == before


@pytest.mark.parametrize("backend", backends())
def test_a_role_without_write_runs_its_commands_over_a_throwaway_layer(clone, backend):
    """Exec without write (pdca's CHECK re-run, workflow's analyzers): the test suite may write, the
    clone is never changed; a role with write changes it."""
    before = snapshot(clone)
    checker = Toolbox(clone, ["read", "exec"], role="executor", sandbox=backend)
    assert checker.writable == "throwaway"
    r = checker.execute("run", {"command": ATTACK})
    assert r.ok and "END" in r.output, r.output
    assert snapshot(clone) == before
    assert Toolbox(clone, ["read"], role="scout", sandbox=backend).writable is False
    coder = Toolbox(clone, ["read", "write", "exec"], role="coder", sandbox=backend)
    assert coder.execute("run", {"command": "echo x > planted"}).ok and (clone / "planted").exists()


@pytest.mark.parametrize("backend", EVERY)
def test_the_layer_is_capped_at_the_scratch_size(clone, backend):
    """What a command may write in its throwaway layer is capped like its /tmp: ``scratch_mb`` (a
    tmpfs of the kit's as root; docker: the folder's size plus it)."""
    if os.geteuid() != 0:
        pytest.skip("the kit caps the layer where it may mount a tmpfs (root)")
    limits = ProcessLimits(scratch_mb=8)
    fill = "python -c \"open('big.bin','wb').write(bytes(30 * 2**20))\"; echo exit=$?"
    res = get_sandbox(backend).run(fill, clone, writable="throwaway", timeout_s=60, limits=limits)
    assert "No space left on device" in res.output and "exit=1" in res.output, res.output
    assert not (clone / "big.bin").exists()
    assert (
        get_sandbox(backend).run("echo ok > small", clone, writable="throwaway", timeout_s=60).exit_code == 0
    )


@pytest.mark.parametrize("backend", ["bwrap", "none"])
def test_two_throwaway_commands_at_once_do_not_see_each_others_writes(clone, backend):
    box, seen = get_sandbox(backend), {}

    def one(tag: str) -> None:
        command = f"echo {tag} > mine.txt; sleep 1; cat mine.txt; ls"
        seen[tag] = box.run(command, clone, writable="throwaway", timeout_s=30).output

    threads = [threading.Thread(target=one, args=(t,)) for t in ("AAA", "BBB")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen["AAA"].startswith("AAA\n") and seen["BBB"].startswith("BBB\n"), seen
    assert not (clone / "mine.txt").exists()


def test_a_bad_writable_value_is_one_clear_error(clone):
    with pytest.raises(ValueError, match="writable must be True, False or 'throwaway'"):
        get_sandbox("bwrap").run("true", clone, writable="yes", timeout_s=10)  # type: ignore[arg-type]


@pytest.mark.parametrize("backend", EVERY)
def test_a_throwaway_folder_refuses_pins(clone, backend):
    """Pins bind folders of the real clone into it (scoring's, on its writable copies): over a
    throwaway layer they would be the clone itself, writable."""
    skip_unless_ready(backend)
    with pytest.raises(ValueError, match="cannot hold pinned folders"):
        get_sandbox(backend).run("true", clone, writable="throwaway", timeout_s=10, pins=[clone / "src"])


@pytest.mark.parametrize("backend", ["docker", "none"])
def test_a_copied_layer_refuses_a_read_only_bind_inside_the_folder(clone, backend):
    if backend == "docker":
        skip_unless_ready("docker")
    with pytest.raises(ValueError, match="cannot hold the read-only bind"):
        get_sandbox(backend).run("true", clone, writable="throwaway", timeout_s=10, ro_binds=[clone / "src"])


def test_the_none_backend_points_the_environment_at_its_copy(clone):
    env = {"PYTHONPATH": f"{clone}/src:{clone}", "OTHER": f"{clone}x", "PATH": "/usr/bin:/bin"}
    res = get_sandbox("none").run(
        'echo "$PYTHONPATH|$OTHER|$PWD"', clone, writable="throwaway", timeout_s=10, env=env
    )
    pythonpath, other, pwd = res.output.strip().split("|")
    assert pythonpath == f"{pwd}/src:{pwd}" and other == f"{clone}x" and pwd != str(clone)


@pytest.mark.skipif(os.geteuid() != 0, reason="layers are mounted tmpfs only as root")
def test_a_layer_a_dead_kit_left_mounted_is_swept(tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    root = Path(tempfile.mkdtemp(prefix=f"orchbench-throwaway-{dead.pid}-"))
    assert throwaway._mount_tmpfs(root, 4)
    (root / "left.txt").write_text("x")
    assert os.path.ismount(root)
    assert root in throwaway.sweep()
    assert not os.path.ismount(root) and not root.exists()
    mine = Path(tempfile.mkdtemp(prefix=f"orchbench-throwaway-{os.getpid()}-"))
    try:
        assert throwaway._mount_tmpfs(mine, 4)
        assert mine not in throwaway.sweep()  # a live kit's layer stays
    finally:
        throwaway._unmount(mine)
        mine.rmdir()


def test_the_layer_folder_a_dead_kit_left_unmounted_is_swept():
    """Where the kit may not mount a tmpfs the layer is a plain folder: a kit killed mid-command
    leaves it, and the next check of a backend removes it (a live kit's stays)."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    left = Path(tempfile.mkdtemp(prefix=f"orchbench-throwaway-{dead.pid}-"))
    (left / "upper" / "deep").mkdir(parents=True)
    (left / "upper" / "deep" / "f").write_text("x")
    mine = Path(tempfile.mkdtemp(prefix=f"orchbench-throwaway-{os.getpid()}-"))
    try:
        check_available("none")
        assert not left.exists() and mine.exists()
    finally:
        mine.rmdir()


@pytest.mark.parametrize("backend", backends("bwrap", "podman"))
def test_a_kit_killed_during_a_throwaway_command_leaves_nothing_after_the_sweep(clone, backend, tmp_path):
    """SIGKILL -- no atexit, no finally -- while a command writes its layer: the next check of the
    backend unmounts and removes what was left."""
    if os.geteuid() != 0:
        pytest.skip("the kit mounts its own layers as root only")
    skip_unless_ready(backend)
    script = (
        "import sys; from pathlib import Path; from kit.sandbox.backends import get_sandbox; "
        f"get_sandbox({backend!r}).run('echo x > w; touch started; sleep 60', Path(sys.argv[1]), "
        "writable='throwaway', timeout_s=120)"
    )
    kit = subprocess.Popen([sys.executable, "-c", script, str(clone)])
    try:
        deadline = time.monotonic() + 60
        while not layers_left(kit.pid):
            assert time.monotonic() < deadline and kit.poll() is None, "no layer was made"
            time.sleep(0.2)
        time.sleep(2)  # the command is running in it
    finally:
        kit.kill()
        kit.wait()
    assert layers_left(kit.pid)  # left mounted
    check_available(backend)
    assert layers_left(kit.pid) == []
    assert not (clone / "w").exists()
