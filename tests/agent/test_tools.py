import os
import time
import tracemalloc
from pathlib import Path

import pytest

from kit.agent.toolbox import PERMISSIONS, TOOL_PERMISSION, Toolbox
from kit.records.recorder import RunRecorder
from kit.records.schema import EVENTS, read_jsonl
from kit.sandbox.commands import scrubbed_env
from kit.secrets import is_secret_env
from tests.support.sandboxes import backends


@pytest.fixture
def root(tmp_path):
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "mod.py").write_text("def f():\n    return 1\n\n\ndef g():\n    return 1\n")
    (repo / "README.md").write_text("hello\nworld\n")
    (repo / ".git").mkdir()
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    return repo


@pytest.fixture
def recorder(tmp_path):
    rec = RunRecorder(tmp_path / "run", "run-1")
    yield rec
    rec.close()


def events(rec):
    rec.close()
    return read_jsonl(rec.run_dir / EVENTS)


def test_specs_cover_every_tool_and_name_permissions(root):
    box = Toolbox(root, ["read"])
    specs = {s.name: s for s in box.specs()}
    assert set(specs) == set(TOOL_PERMISSION)
    for name, spec in specs.items():
        assert f"'{TOOL_PERMISSION[name]}'" in spec.description
        assert spec.parameters["type"] == "object"
    assert box.allowed() == ["list_files", "read_file", "search"]
    assert set(Toolbox(root, PERMISSIONS).allowed()) == set(TOOL_PERMISSION)
    with pytest.raises(ValueError):
        Toolbox(root, ["root"])


def test_read_tools(root, recorder):
    box = Toolbox(root, ["read"], recorder=recorder, role="scout")
    listing = box.execute("list_files", {})
    assert listing.ok and listing.output.splitlines() == ["README.md", "pkg/mod.py"]
    read = box.execute("read_file", {"path": "pkg/mod.py", "start_line": 2, "end_line": 2})
    assert read.ok and read.output == "     2|     return 1"
    found = box.execute("search", {"pattern": "def "})
    assert found.output.splitlines() == ["pkg/mod.py:1: def f():", "pkg/mod.py:5: def g():"]
    assert (
        box.execute("search", {"pattern": r"^def [a-f]\(", "regex": True}).output == "pkg/mod.py:1: def f():"
    )
    assert not box.execute("search", {"pattern": "(", "regex": True}).ok
    rows = events(recorder)
    assert [r["kind"] for r in rows] == ["tool"] * 5
    assert rows[1]["name"] == "read_file" and "pkg/mod.py" in rows[1]["detail"] and rows[1]["role"] == "scout"
    assert rows[-1]["ok"] is False


def test_write_edit_delete(root):
    box = Toolbox(root, ["read", "write"])
    assert box.execute("write_file", {"path": "new/dir/x.py", "content": "A = 1\n"}).ok
    assert (root / "new" / "dir" / "x.py").read_text() == "A = 1\n"
    missing = box.execute("edit_file", {"path": "pkg/mod.py", "old": "return 2", "new": "return 3"})
    assert not missing.ok and "0 matches" in missing.output
    twice = box.execute("edit_file", {"path": "pkg/mod.py", "old": "return 1", "new": "return 3"})
    assert not twice.ok and "2 times" in twice.output
    once = box.execute(
        "edit_file", {"path": "pkg/mod.py", "old": "def g():\n    return 1", "new": "def g():\n    return 2"}
    )
    assert once.ok and (root / "pkg" / "mod.py").read_text().endswith("return 2\n")
    assert box.execute("delete_file", {"path": "new/dir/x.py"}).ok
    assert not (root / "new" / "dir" / "x.py").exists()
    assert not box.execute("delete_file", {"path": "nope.py"}).ok


def test_bad_arguments_and_unknown_tool(root, recorder):
    box = Toolbox(root, PERMISSIONS, recorder=recorder)
    r = box.execute("read_file", {})
    assert not r.ok and "missing path" in r.output and "expected args: path" in r.output
    r = box.execute("write_file", {"path": "x", "content": "y", "mode": "a"})
    assert not r.ok and "unknown mode" in r.output
    r = box.execute("read_file", {"path": "README.md", "start_line": "two"})
    assert not r.ok and "start_line" in r.output
    assert box.execute("read_file", {"path": "README.md", "start_line": "2"}).output == "     2| world"
    r = box.execute("frobnicate", {})
    assert not r.ok and "list_files" in r.output and "run" in r.output


def test_permission_denied_is_counted(root, recorder):
    box = Toolbox(root, ["read"], recorder=recorder, role="auditor")
    r = box.execute("write_file", {"path": "x.py", "content": ""})
    assert not r.ok and r.denied
    assert r.output == (
        "permission denied: role 'auditor' may not call write_file (needs 'write'; this role has: read)"
    )
    assert not (root / "x.py").exists()
    assert box.execute("run", {"command": "true"}).denied
    assert recorder.denials == 2
    rows = events(recorder)
    assert [(e["kind"], e["name"], e["ok"]) for e in rows] == [
        ("denied", "write_file", False),
        ("denied", "run", False),
    ]


def test_escapes_are_refused_and_counted(root, recorder, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    (root / "etc_link").symlink_to("/etc")
    (root / "out_link.txt").symlink_to(outside)
    box = Toolbox(root, PERMISSIONS, recorder=recorder)
    attempts = [
        ("read_file", {"path": "../outside.txt"}),
        ("read_file", {"path": "/etc/passwd"}),
        ("read_file", {"path": "etc_link/passwd"}),
        ("read_file", {"path": "out_link.txt"}),
        ("list_files", {"path": "etc_link"}),
        ("write_file", {"path": "../evil.py", "content": "x"}),
        ("write_file", {"path": "pkg/../../evil.py", "content": "x"}),
        ("write_file", {"path": ".git/hooks/pre-commit", "content": "x"}),
        ("delete_file", {"path": "out_link.txt"}),
        ("search", {"pattern": "root", "path": "/etc"}),
    ]
    for name, args in attempts:
        r = box.execute(name, args)
        assert not r.ok and r.denied and "refused" in r.output, (name, args, r)
        assert "secret" not in r.output and "root:" not in r.output
    assert outside.read_text() == "secret" and not (tmp_path / "evil.py").exists()
    assert not (root / ".git" / "hooks").exists()
    assert box.execute("search", {"pattern": "secret"}).output == "no matches"  # link skipped
    assert box.execute("read_file", {"path": "pkg/../README.md"}).ok  # `..` inside the root is fine
    rows = events(recorder)
    denied = [e for e in rows if e["kind"] == "denied"]
    assert len(denied) == len(attempts)
    assert recorder.denials == len(attempts)


def test_guard_refusal_is_counted(root, recorder):
    def guard(name, args):
        if args.get("path") == "feature_list.json":
            return "feature_list.json may only change its passes flags"
        return None

    box = Toolbox(root, PERMISSIONS, recorder=recorder, guard=guard)
    r = box.execute("write_file", {"path": "feature_list.json", "content": "[]"})
    assert not r.ok and r.denied and "passes flags" in r.output
    assert box.execute("write_file", {"path": "other.json", "content": "[]"}).ok
    assert [e["kind"] for e in events(recorder)] == ["denied", "tool"]


def test_big_file_read_is_truncated_with_bounded_memory(root):
    big = root / "big.log"
    line = b"x" * 99 + b"\n"
    with open(big, "wb") as fh:
        for _ in range(50):
            fh.write(line * 10_000)  # 50 MB in 1 MB pieces
    box = Toolbox(root, ["read"], max_read_bytes=200_000)
    tracemalloc.start()
    r = box.execute("read_file", {"path": "big.log"})
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert r.ok
    assert "[... truncated: big.log is 50000000 bytes" in r.output
    assert len(r.output) < 400_000
    assert peak < 5_000_000
    one_line = root / "oneline.txt"
    with open(one_line, "wb") as fh:
        for _ in range(20):
            fh.write(b"y" * 1_000_000)  # 20 MB without a newline
    r = box.execute("read_file", {"path": "oneline.txt"})
    assert "truncated" in r.output and len(r.output) < 400_000


def test_run_output_and_exit_code(root):
    box = Toolbox(root, ["exec"])
    r = box.execute("run", {"command": "echo hi; echo err >&2; exit 3"})
    assert not r.ok and r.output.endswith("exit code: 3") and "hi" in r.output and "err" in r.output
    r = box.execute("run", {"command": 'python -c "import sys; print(sys.executable)"'})
    kits = {os.path.dirname(os.path.abspath(__import__("sys").executable)), "/opt/venv/bin"}
    assert r.ok and os.path.dirname(os.path.abspath(r.output.splitlines()[0])) in kits  # (agent's view)
    r = Toolbox(root, ["exec"], max_output_chars=1000).execute("run", {"command": "seq 1 100000"})
    assert "chars truncated ...]" in r.output and r.output.startswith("1\n2\n")
    assert "100000\nexit code: 0" in r.output and len(r.output) < 1200


@pytest.mark.slow
@pytest.mark.parametrize("sandbox", [*backends(), "none"])
def test_run_timeout_kills_the_process_group(root, sandbox):
    marker = f"{time.time_ns() % 10**6 + 31}.5"  # a unique `sleep` argument to find the child by
    box = Toolbox(root, ["exec"], timeout_s=30, sandbox=sandbox)
    started = time.monotonic()
    r = box.execute("run", {"command": f"sleep {marker} & sleep 30", "timeout_s": 1})
    elapsed = time.monotonic() - started
    assert elapsed < 5
    assert not r.ok and r.output.endswith("killed after 1 s (timeout)")
    time.sleep(0.2)
    assert _sleepers(marker) == []


def _sleepers(marker):
    """Live (not zombie) processes whose command line is ``sleep <marker>``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    argv = fh.read().split(b"\0")
            except OSError:
                continue
            if argv[:2] == [b"sleep", marker.encode()] and _alive(int(entry)):
                found.append(int(entry))
    return found


def _alive(pid):
    """True if ``pid`` runs (a zombie -- killed, waiting to be reaped by init -- is not alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_secrets_never_reach_commands(root, monkeypatch):
    fake = "sk-fake-0123456789abcdef"
    for name in [
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "MY_SERVICE_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "GH_TOKEN",
        "db_password",
        "HF_TOKEN",
    ]:
        monkeypatch.setenv(name, fake)
    monkeypatch.setenv("ORCHBENCH_HARMLESS", "visible")  # the env is an allow-list: not passed either
    box = Toolbox(root, ["exec"])
    assert fake not in box.execute("run", {"command": "echo $OPENAI_API_KEY"}).output
    out = box.execute("run", {"command": "env"}).output
    assert fake not in out
    assert "ORCHBENCH_HARMLESS" not in out and "PYTHONDONTWRITEBYTECODE=1" in out
    env = scrubbed_env()
    assert "PATH" in env and "HOME" in env
    assert is_secret_env("openai_base_url") and is_secret_env("GOOGLE_APPLICATION_CREDENTIALS")
    assert not is_secret_env("LANG") and not is_secret_env("PATH")


# --------------------------------------------------------------------------- hostile input


def test_fifos_and_devices_are_refused_not_followed(root):
    os.mkfifo(root / "pipe")
    os.symlink("/dev/zero", root / "zero")
    box = Toolbox(root, ["read", "write"], timeout_s=5)
    started = time.monotonic()
    r = box.execute("read_file", {"path": "pipe"})
    assert not r.ok and "named pipe" in r.output
    assert not box.execute("write_file", {"path": "pipe", "content": "x"}).ok
    assert not box.execute("edit_file", {"path": "pipe", "old": "a", "new": "b"}).ok
    assert box.execute("search", {"pattern": "hello"}).output == "README.md:1: hello"
    assert "pipe" in box.execute("list_files", {}).output
    assert time.monotonic() - started < 10  # nothing blocked on the pipe


@pytest.mark.slow
def test_a_catastrophic_regex_is_stopped_by_the_time_limit(root):
    (root / "evil.txt").write_text("a" * 40 + "b\n")
    box = Toolbox(root, ["read"], timeout_s=1.5)
    started = time.monotonic()
    r = box.execute("search", {"pattern": r"^(a+)+$", "regex": True})
    assert time.monotonic() - started < 6
    assert not r.ok and "took longer than 1.5 s" in r.output
    assert box.execute("search", {"pattern": "hello"}).ok  # the toolbox still works afterwards


def test_nul_bytes_and_over_deep_or_long_input_are_tool_errors(root):
    box = Toolbox(root, PERMISSIONS)
    for name, args in [
        ("read_file", {"path": "README\0.md"}),
        ("write_file", {"path": "a\0b", "content": "x"}),
        ("search", {"pattern": "he\0llo"}),
        ("run", {"command": "echo \0"}),
        ("list_files", {"path": "x" * 5000}),
        ("replace_definitions", {"code": "def f():\n    return " + "(" * 200_000 + ")" * 200_000}),
        ("replace_definitions", {"code": "def f():\n    return " + "-" * 300_000 + "1"}),
        ("read_file", {"path": "/".join(["d"] * 2000)}),
    ]:
        r = box.execute(name, args)
        assert not r.ok and r.output, (name, r.output)


def test_a_write_does_not_follow_a_symlink_swapped_in_after_the_check(root, tmp_path):
    from kit.agent import safefs

    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "pkg2").mkdir()
    rel = Path("pkg2") / "new.py"  # what the tool checked: inside the clone
    (root / "pkg2").rmdir()
    os.symlink(outside, root / "pkg2")  # ... then swapped for a link to the outside
    with pytest.raises(OSError):
        safefs.write_text(root, rel, "pwned")
    with pytest.raises(OSError):
        safefs.unlink(root, Path("pkg2") / "anything")
    assert list(outside.iterdir()) == []
    safefs.write_text(root, Path("pkg") / "fine.py", "ok\n")  # a real folder works
    assert (root / "pkg" / "fine.py").read_text() == "ok\n"
