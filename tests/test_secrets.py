"""Canary keys: set in the kit's environment, in a profile's extra_headers, echoed back by a
provider's error -- they appear in no record file and in no command's environment."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from kit.config import ModelSpec, PriceSheet, Profile
from kit.model import scripted
from kit.model.actions import FINISH, render
from kit.run.runner import redacted, run_experiment
from kit.sandbox import backends as sandbox_mod
from kit.sandbox.backends import SandboxUnavailable, get_sandbox
from kit.sandbox.quota import kept_clone
from kit.secrets import Redactor
from tests.support.helpers import PRICE, experiment, run_json
from tests.support.sandboxes import backends

KEY = "sk-canary-KEY-7f3a9c1e5b2d4f60"  # the provider key, in a variable whose name looks harmless
HEADER = "hdr-canary-HEADER-0e9d8c7b6a"  # a team token in the profile's extra_headers
ENVKEY = "sk-canary-ENV-aa11bb22cc33dd44"  # a provider key the kit merely has in its environment
CANARIES = (KEY, HEADER, ENVKEY)


def write_profile(folder: Path, model: str, **spec) -> Path:
    tier = ModelSpec(
        model=model,
        price="p",
        api_key_env="ORCHB_PROVIDER_CRED",
        extra={"extra_headers": {"X-Team-Token": HEADER}},
        **spec,
    )
    profile = Profile(
        name="canary", price_sheet="test", tiers={t: tier for t in ("cheap", "medium", "strong")}
    )
    sheet = PriceSheet(name="test", illustrative=True, prices={"p": PRICE})
    (folder / "profiles").mkdir(parents=True, exist_ok=True)
    (folder / "prices").mkdir(parents=True, exist_ok=True)
    (folder / "prices" / "test.yaml").write_text(yaml.safe_dump(sheet.model_dump(mode="json")))
    path = folder / "profiles" / "canary.yaml"
    path.write_text(yaml.safe_dump(profile.model_dump(mode="json", exclude_none=True)))
    return path


@pytest.fixture
def canary_env(monkeypatch):
    monkeypatch.setenv("ORCHB_PROVIDER_CRED", KEY)
    monkeypatch.setenv("OPENAI_API_KEY", ENVKEY)


def leaks(folder: Path) -> list[str]:
    """Every (file, canary) where a canary appears in a file under ``folder`` (raw bytes)."""
    found = []
    for path in folder.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            found += [f"{path}: {c}" for c in CANARIES if c.encode() in data]
    return found


class EchoingProvider(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint that rejects every request and quotes its credentials back."""

    seen: list[dict] = []

    def do_POST(self):  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k.lower(): v for k, v in self.headers.items()}
        EchoingProvider.seen.append(headers)
        body = {
            "error": {
                "message": f"Invalid request: key {headers.get('authorization')} with team "
                f"{headers.get('x-team-token')} is not allowed",
                "type": "invalid_request_error",
                "code": "bad_request",
            }
        }
        raw = json.dumps(body).encode()
        self.send_response(400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args):
        pass


def test_a_provider_error_that_echoes_the_keys_is_stored_redacted(tmp_path, canary_env):
    server = ThreadingHTTPServer(("127.0.0.1", 0), EchoingProvider)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    EchoingProvider.seen.clear()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/v1"
        profile = write_profile(tmp_path, "openai/gpt-4o-mini", api_base=base)
        out = run_experiment(
            experiment("echo", profile, ["micro-slugify"], ["vibe"]),
            results_dir=tmp_path / "results",
            progress=False,
        )
    finally:
        server.shutdown()
    # the provider really received both secrets and quoted them back ...
    assert any(
        KEY in h.get("authorization", "") and h.get("x-team-token") == HEADER for h in EchoingProvider.seen
    )
    (run_dir,) = (out / "runs").iterdir()
    run = run_json(run_dir)
    assert run["outcome"] == "error" and "***" in run["error"]  # ... and the stored error is masked
    assert run["profile_spec"]["tiers"]["cheap"]["extra"]["extra_headers"]["X-Team-Token"] == "***"
    assert leaks(tmp_path / "results") == []


def test_no_canary_in_records_or_in_a_commands_environment(tmp_path, canary_env):
    dump = (
        "env > envdump.txt; for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f; done >> envdump.txt; "
        "echo listed >> envdump.txt"
    )
    model = scripted.register(
        [
            {"tool_calls": [{"name": "run", "arguments": {"command": dump}}]},
            render("native", FINISH, {"summary": f"the key is {KEY} and {HEADER}"}, "Done."),
        ],
        name="canary-dumper",
    )
    profile = write_profile(tmp_path, model, action_mode="native")
    out = run_experiment(
        experiment("dump", profile, ["micro-slugify"], ["vibe"]),
        results_dir=tmp_path / "results",
        progress=False,
    )
    (run_dir,) = (out / "runs").iterdir()
    run = run_json(run_dir)
    assert run["sandbox"] == get_sandbox().name == "bwrap"
    with kept_clone(run_dir / "repo") as clone:
        envdump = (clone / "envdump.txt").read_text()  # the clone itself: never redacted
    assert "PATH=" in envdump and "listed" in envdump
    assert not any(c in envdump for c in CANARIES)
    transcript = (run_dir / "transcript.jsonl").read_text()
    assert "the key is *** and ***" in transcript  # the model's own message quoted them: masked
    assert leaks(tmp_path / "results") == []


@pytest.mark.parametrize("backend", [*backends(), "none"])
def test_a_command_cannot_read_the_kits_environ_through_proc(tmp_path, backend):
    """A stand-in for the kit: a process started with a key in its environment. The sandbox's own PID
    namespace and /proc (bwrap's, a container's) hide it; ``none`` leaves it readable -- which is why ``none`` is flagged."""
    kit_like = subprocess.Popen(["sleep", "30"], env={"OPENAI_API_KEY": ENVKEY, "PATH": os.defpath})
    try:
        res = get_sandbox(backend).run(
            "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep ^OPENAI_API_KEY=",
            tmp_path,
            writable=True,
            timeout_s=20,
        )
    finally:
        kit_like.kill()
        kit_like.wait()
    assert (ENVKEY in res.output) is (backend == "none")


def test_the_redactor_knows_keys_headers_and_json_escapes():
    profile = Profile(
        name="x",
        price_sheet="s",
        tiers={
            t: ModelSpec(
                model="m",
                api_key_env="ODD_NAME",
                extra={
                    "extra_headers": {"Authorization": "Bearer tok-12345678"},
                    "api_key": 'q"uoted-secret',
                },
            )
            for t in ("cheap", "medium", "strong")
        },
    )
    redact = Redactor.for_profile(
        profile, environ={"ODD_NAME": "value-of-odd-key", "AWS_REGION": "eu-west-1"}
    )
    text = 'ODD value-of-odd-key; tok-12345678; {"k": "q\\"uoted-secret"}; region eu-west-1; short 1'
    assert redact(text) == 'ODD ***; ***; {"k": "***"}; region eu-west-1; short 1'
    assert redact.obj({"a": ["value-of-odd-key", 3]}) == {"a": ["***", 3]}
    assert redacted(profile)["tiers"]["cheap"]["extra"] == {
        "extra_headers": {"Authorization": "***"},
        "api_key": "***",
    }


def test_bwrap_that_cannot_start_stops_the_experiment_before_any_run(tmp_path, monkeypatch):
    broken = sandbox_mod.BwrapSandbox()
    broken.binary = "/bin/false"
    monkeypatch.setattr(sandbox_mod, "get_sandbox", lambda name="bwrap": broken)
    sandbox_mod._check_available.cache_clear()
    profile = write_profile(tmp_path, "scripted/done")
    try:
        with pytest.raises(SandboxUnavailable, match="sandbox: none"):
            run_experiment(
                experiment("nobwrap", profile, ["micro-slugify"], ["vibe"], sandbox="bwrap"),
                results_dir=tmp_path / "results",
                progress=False,
            )
    finally:
        sandbox_mod._check_available.cache_clear()
    assert not (tmp_path / "results" / "nobwrap").exists()  # failed before any run folder
