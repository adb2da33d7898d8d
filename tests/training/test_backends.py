"""World-model backends: a real tiny Qwen3 in transformers, the OpenAI SDK against real HTTP servers.

`scripted_chat_server` is a real HTTP server speaking the OpenAI /v1/chat/completions protocol whose
"model" is a deterministic Python function. It exists because the tests need exact, well-formed (or
exactly malformed) replies, with and without a reasoning parser's `reasoning_content`, which no small
real model produces on demand. The SDK, the HTTP transport and the JSON wire format are all real; the
llama.cpp server test covers a real model behind the same backend.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from schemas.render import extract_prediction
from tests.llm_server import LLMServer
from training.backends import make_backend
from training.backends.base import GenerationConfig, cut_at_stop
from training.backends.openai_http import OpenAIBackend
from training.backends.transformers_local import TransformersBackend
from training.backends.vllm_offline import VLLMOfflineBackend

# A reply: the message `content`, or (content, extra message fields such as reasoning_content), or an
# HTTP error status to answer with instead.
Reply = str | tuple[str | None, dict] | int
SCRIPTED_MODEL = "scripted-world-model"


@dataclass
class ScriptedServer:
    base_url: str
    requests: list[dict] = field(default_factory=list)


@contextmanager
def scripted_chat_server(model: Callable[[list[dict]], Reply]) -> Iterator[ScriptedServer]:
    """Serve `model(messages) -> reply` over /v1/chat/completions and /v1/models on a free port."""
    server_state = ScriptedServer(base_url="")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # keep pytest output clean
            pass

        def _send(self, body: dict, status: int = 200) -> None:
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:
            if self.path != "/v1/models":
                return self._send({"error": {"message": f"no route {self.path}"}}, 404)
            self._send({"object": "list", "data": [{"id": SCRIPTED_MODEL, "object": "model"}]})

        def do_POST(self) -> None:
            if self.path != "/v1/chat/completions":
                return self._send({"error": {"message": f"no route {self.path}"}}, 404)
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            server_state.requests.append(request)
            reply = model(request["messages"])
            if isinstance(reply, int):  # an HTTP error status: a failing endpoint
                return self._send({"error": {"message": f"status {reply}"}}, reply)
            content, extra = (reply, {}) if isinstance(reply, str) else reply
            message = {"role": "assistant", "content": content, **extra}
            self._send(
                {
                    "id": f"chatcmpl-{len(server_state.requests)}",
                    "object": "chat.completion",
                    "created": 0,
                    "model": request["model"],
                    "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                }
            )

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server_state.base_url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server_state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


@pytest.fixture(scope="session")
def tiny_backend() -> Iterator[TransformersBackend]:
    """A random-init Qwen3 (qwen3-tiny, ~10M parameters) with the real Qwen3 tokenizer, on CPU."""
    backend = make_backend("qwen3-tiny")
    assert isinstance(backend, TransformersBackend)
    yield backend
    backend.close()


MESSAGES = [
    {"role": "system", "content": "You simulate a Linux terminal."},
    {"role": "user", "content": "### Turn 1\n\n**Action:**\nls"},
]
GREEDY = GenerationConfig(max_new_tokens=6)


# --- transformers -------------------------------------------------------------------------------


def test_transformers_greedy_is_deterministic_and_sampling_follows_the_seed(tiny_backend) -> None:
    assert tiny_backend.complete(MESSAGES, GREEDY) == tiny_backend.complete(MESSAGES, GREEDY)
    sampled = [
        tiny_backend.complete(MESSAGES, GenerationConfig(max_new_tokens=6, temperature=1.0, seed=s))
        for s in (1, 1, 2)
    ]
    assert sampled[0] == sampled[1], "the same seed must give the same sampled reply"
    assert sampled[0] != sampled[2], "a different seed should sample a different reply from random weights"
    described = tiny_backend.describe()
    assert described["model"] == "qwen3-tiny" and described["architecture"] == "Qwen3ForCausalLM"
    json.dumps(described)


def test_transformers_concurrent_calls_are_serialised(tiny_backend) -> None:
    expected = tiny_backend.complete(MESSAGES, GREEDY)
    results: list[str] = []
    threads = [
        threading.Thread(target=lambda: results.append(tiny_backend.complete(MESSAGES, GREEDY)))
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [expected] * 4


def test_transformers_stop_strings_cut_the_reply(tiny_backend) -> None:
    sampled = GenerationConfig(max_new_tokens=12, temperature=1.0, seed=1)
    full = tiny_backend.complete(MESSAGES, sampled)
    stop = full[4:7]
    assert len(stop) == 3, f"the random model replied with too little: {full!r}"
    # Same seed: the same tokens up to the stop string, then nothing.
    cut = tiny_backend.complete(MESSAGES, dataclasses.replace(sampled, stop=(stop,)))
    assert cut == full[: full.find(stop)]
    assert cut_at_stop("abc</x>def</y>", ("</y>", "</x>")) == "abc"
    assert cut_at_stop("abc</x>def</y>", ("</y>", "</x>"), keep=True) == "abc</x>"
    assert cut_at_stop("abc", ()) == "abc"


def test_transformers_max_context_drops_oldest_turns_keeps_system_and_current(tiny_backend) -> None:
    turns = []
    for k in range(1, 9):
        turns += [
            {"role": "user", "content": f"### Turn {k}\n\n**Action:**\necho {k}"},
            {"role": "assistant", "content": f"**Environment Observation:**\n{'output line ' * 20}{k}"},
        ]
    messages = [MESSAGES[0], *turns, {"role": "user", "content": "### Turn 9\n\n**Action:**\necho 9"}]
    full = tiny_backend.count_tokens(messages)
    limited = TransformersBackend(tiny_backend.model, tiny_backend.tokenizer, max_context=full // 2)
    kept = limited.truncate(messages, max_new_tokens=8)
    assert kept[0] == messages[0] and kept[-1] == messages[-1]
    assert kept[1:-1] == messages[len(messages) - len(kept) + 1 : -1], "only the oldest turns may go"
    assert len(kept) < len(messages) and limited.count_tokens(kept) + 8 <= full // 2
    assert [m["role"] for m in kept[1:3]] == ["user", "assistant"], "turns are dropped in pairs"
    assert isinstance(limited.complete(messages, GenerationConfig(max_new_tokens=8)), str)
    # A prompt that cannot fit keeps the system message and the current action, and still answers.
    tiny = TransformersBackend(tiny_backend.model, tiny_backend.tokenizer, max_context=10)
    assert tiny.truncate(messages, max_new_tokens=8) == [messages[0], messages[-1]]


# --- OpenAI-compatible HTTP ---------------------------------------------------------------------

SCREEN = "agent@sandbox:~$ ls\nnotes.txt\nagent@sandbox:~$"
PREDICTION = f"<predicted_observation>\n{SCREEN}\n</predicted_observation>"


def test_openai_reasoning_content_is_put_back_as_a_think_block() -> None:
    replies = iter(
        [
            (PREDICTION, {"reasoning_content": "ls lists the one file."}),  # vLLM/SGLang parser on
            (PREDICTION, {"reasoning": "newer vLLM names the field reasoning"}),
            (f"<think>\nparser off\n</think>\n\n{PREDICTION}", {}),  # parser off: all in content
            (None, {"reasoning_content": f"only thought about it: {PREDICTION}"}),  # tag only in reasoning
        ]
    )
    with scripted_chat_server(lambda messages: next(replies)) as server:
        backend = OpenAIBackend(server.base_url)  # the model name comes from /v1/models
        assert backend.model == SCRIPTED_MODEL
        first = backend.complete(MESSAGES, GREEDY)
        assert first.startswith("<think>\nls lists the one file.\n</think>\n\n<predicted_observation>")
        second = backend.complete(MESSAGES, GREEDY)
        assert second.startswith("<think>\nnewer vLLM names the field reasoning\n</think>")
        third = backend.complete(MESSAGES, GREEDY)
        assert third.count("<think>") == 1, "content that already carries its reasoning is kept as is"
        for reply in (first, second, third):
            assert extract_prediction(reply) == SCREEN
        fourth = backend.complete(MESSAGES, GREEDY)
        assert extract_prediction(fourth) is None, "a tag inside the reasoning is not a prediction"
        backend.close()


def test_openai_reasoning_drop_and_request_fields() -> None:
    with scripted_chat_server(lambda messages: (PREDICTION, {"reasoning_content": "hidden"})) as server:
        backend = OpenAIBackend(
            server.base_url,
            model="ckpt",
            reasoning="drop",
            extra_body={"chat_template_kwargs": {"enable_thinking": False}},
        )
        config = GenerationConfig(max_new_tokens=77, temperature=0.5, top_p=0.9, seed=5, stop=("</x>",))
        assert backend.complete(MESSAGES, config) == PREDICTION
        sent = server.requests[-1]
        assert sent["model"] == "ckpt" and sent["messages"] == MESSAGES
        assert (sent["max_tokens"], sent["temperature"], sent["top_p"], sent["seed"]) == (77, 0.5, 0.9, 5)
        assert sent["stop"] == ["</x>"]
        assert sent["chat_template_kwargs"] == {"enable_thinking": False}
        assert backend.describe()["base_url"] == server.base_url
    with pytest.raises(ValueError, match="reasoning"):
        OpenAIBackend("http://127.0.0.1:9/v1", model="m", reasoning="keep")  # type: ignore[arg-type]


def test_openai_keeps_the_stop_string_by_cutting_the_reply_itself() -> None:
    # A server drops the stop string it ends on, so none is sent and the reply is cut here, tag kept.
    with scripted_chat_server(lambda messages: f"{PREDICTION}\n{PREDICTION}") as server:
        backend = OpenAIBackend(server.base_url, model="ckpt")
        config = GenerationConfig(max_new_tokens=77, stop=("</predicted_observation>",), include_stop=True)
        assert backend.complete(MESSAGES, config) == PREDICTION
        assert server.requests[-1].get("stop") is None


@pytest.mark.llm
def test_openai_backend_against_llama_cpp(llm_server: LLMServer) -> None:
    backend = make_backend(llm_server.base_url, model=llm_server.model)
    assert isinstance(backend, OpenAIBackend)
    reply = backend.complete(MESSAGES, GenerationConfig(max_new_tokens=8))
    assert isinstance(reply, str) and reply.strip(), "the real model should say something"
    assert reply == backend.complete(MESSAGES, GenerationConfig(max_new_tokens=8)), "greedy is repeatable"
    backend.close()


# --- dispatch and vLLM --------------------------------------------------------------------------


def test_vllm_offline_without_vllm_says_what_to_do() -> None:
    with pytest.raises(ImportError) as raised:
        VLLMOfflineBackend("/ckpts/sft")
    message = str(raised.value)
    assert "vllm" in message and "CUDA" in message and "http://" in message
    with pytest.raises(ImportError, match="pip install vllm"):
        make_backend("vllm:/ckpts/sft")
    with pytest.raises(ValueError, match="checkpoint path"):
        make_backend("vllm:")


def test_make_backend_rejects_an_unknown_model_name() -> None:
    with pytest.raises(ValueError, match="neither a checkpoint directory"):
        make_backend("no-such-model")
