"""The HTTP server backends against real HTTP servers on loopback.

``ScriptedServer`` speaks vLLM's completions extensions, SGLang's native ``/generate`` and the
OpenAI chat API with a deterministic "model" (the reply's ids are a function of the prompt), and
injects the faults a rollout meets: a server that is down, HTTP 500s, a hung server, a reply cut
by ``max_tokens``, a prompt longer than the context.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from helpers.extras import needs_module, needs_package, reason

pytest.importorskip("aiohttp", reason=reason("llm-server", "could not import aiohttp"))

from gemgym.errors import ConfigError
from gemgym.llm.backend import GenerationRequest, LLMBackend, SamplingParams
from gemgym.llm.servers import (
    ChatCompletionsBackend,
    RetryPolicy,
    SGLangBackend,
    TextCompletionsBackend,
    VLLMBackend,
    transformers_serve_backend,
)
from helpers.net import free_port

EOS = 2
CONTEXT = 64
REPLY_LEN = 4  # tokens before EOS


def model_reply(prompt: list[int], max_tokens: int) -> tuple[list[int], list[float], str]:
    """The scripted model: REPLY_LEN ids drawn from the prompt, then EOS; cut at max_tokens."""
    ids = [10 + (sum(prompt) + 7 * k) % 90 for k in range(REPLY_LEN)] + [EOS]
    logprobs = [-0.25 * (k + 1) for k in range(len(ids))]
    if max_tokens < len(ids):
        return ids[:max_tokens], logprobs[:max_tokens], "length"
    return ids, logprobs, "stop"


def text_of(ids: list[int]) -> str:
    return "".join(f"<{i}>" for i in ids)


class ScriptedServer:
    """A threaded HTTP server on 127.0.0.1 (see the module docstring).

    Faults: ``fail_first`` requests answer HTTP 500; ``hang_s`` makes each request wait that
    long (or until the server stops) before answering; ``old_vllm`` leaves out ``token_ids``
    (ids only as ``token_id:N`` strings, as vLLM before 0.10.2); ``delay_s`` answers slowly.
    """

    def __init__(self) -> None:
        self.fail_first = 0
        self.hang_s = 0.0
        self.delay_s = 0.0
        self.old_vllm = False
        self.context = CONTEXT
        self.bodies: list[tuple[str, dict[str, Any]]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with owner._lock:
                    owner.bodies.append((self.path, body))
                    owner.in_flight += 1
                    owner.max_in_flight = max(owner.max_in_flight, owner.in_flight)
                    fail = owner.fail_first > 0
                    owner.fail_first -= 1 if fail else 0
                try:
                    if owner.hang_s:
                        owner._stop.wait(owner.hang_s)
                    if owner.delay_s:
                        time.sleep(owner.delay_s)
                    if fail:
                        self._send(500, {"error": {"message": "engine crashed", "code": 500}})
                        return
                    status, reply = owner.answer(self.path, body)
                    self._send(status, reply)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout)
                finally:
                    with owner._lock:
                        owner.in_flight -= 1

            def _send(self, status: int, reply: Any) -> None:
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(5)

    def answer(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if path == "/v1/completions":
            prompt = body["prompt"]
            if isinstance(prompt, str):  # a text-only server: the prompt's length in chars
                ids, _, finish = model_reply([len(prompt)], body["max_tokens"])
                text = text_of([i for i in ids if i != EOS])
                return 200, {"choices": [{"index": 0, "text": text, "finish_reason": finish}]}
            if len(prompt) + body["max_tokens"] > self.context:
                return 400, {
                    "error": {
                        "message": f"This model's maximum context length is {self.context} tokens. "
                        f"However, you requested {len(prompt) + body['max_tokens']} tokens.",
                        "type": "BadRequestError",
                        "code": 400,
                    }
                }
            if prompt and prompt[0] == 999:  # a request the server refuses
                return 400, {"error": {"message": "token id 999 is out of vocabulary"}}
            ids, lps, finish = model_reply(prompt, body["max_tokens"])
            choice: dict[str, Any] = {
                "index": 0,
                "text": text_of(ids),
                "finish_reason": finish,
                "logprobs": {
                    "tokens": [f"token_id:{i}" for i in ids],
                    "token_logprobs": lps,
                    "top_logprobs": None,
                    "text_offset": list(range(len(ids))),
                },
            }
            if not self.old_vllm:
                choice["token_ids"] = ids
                choice["prompt_token_ids"] = prompt
            usage = {"prompt_tokens": len(prompt), "completion_tokens": len(ids)}
            return 200, {"object": "text_completion", "choices": [choice], "usage": usage}
        if path == "/generate":
            prompt = body["input_ids"]
            sp = body["sampling_params"]
            if len(prompt) > CONTEXT:
                return 400, {
                    "error": {
                        "message": f"The input ({len(prompt)} tokens) is longer than the "
                        f"model's context length ({CONTEXT} tokens)."
                    }
                }
            ids, lps, finish = model_reply(prompt, sp["max_new_tokens"])
            matched: Any = EOS if finish == "stop" else None
            meta = {
                "prompt_tokens": len(prompt),
                "completion_tokens": len(ids),
                "finish_reason": {"type": finish, "matched": matched}
                if finish == "stop"
                else {"type": "length", "length": len(ids)},
                "output_token_logprobs": [[lp, i, None] for lp, i in zip(lps, ids, strict=True)],
            }
            return 200, {"text": text_of(ids), "output_ids": ids, "meta_info": meta}
        if path == "/v1/chat/completions":
            n = sum(len(str(m["content"])) for m in body["messages"])
            ids, _, finish = model_reply([n], body["max_tokens"])
            text = text_of([i for i in ids if i != EOS])
            if body["messages"][-1]["content"] == "say nothing":  # tokens the server strips
                text = ""
            message = {"role": "assistant", "content": text}
            choice = {"index": 0, "message": message, "finish_reason": finish}
            usage = {"prompt_tokens": n, "completion_tokens": len(ids)}
            return 200, {"choices": [choice], "usage": usage}
        return 404, {"detail": "Not Found"}


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    s = ScriptedServer()
    yield s
    s.close()


FAST = RetryPolicy(max_retries=2, backoff_s=0.01, max_backoff_s=0.05)


def request(prompt: list[int] | None, max_tokens: int = 16, **sampling: Any) -> GenerationRequest:
    messages = [{"role": "user", "content": "guess a number"}]
    return GenerationRequest(
        prompt, messages, SamplingParams(max_tokens=max_tokens, **sampling), request_id="r"
    )


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def one(backend: Any, req: GenerationRequest) -> Any:
    try:
        return await backend.generate(req)
    finally:
        await backend.aclose()


# -- vLLM --------------------------------------------------------------------------------------
def test_vllm_sends_ids_and_reads_ids_and_logprobs(server: ScriptedServer) -> None:
    backend = VLLMBackend(server.url + "/v1", model="tiny", retry=FAST)
    assert isinstance(backend, LLMBackend)
    assert backend.capabilities.token_ids and backend.capabilities.logprobs
    prompt = [5, 6, 7]
    gen = run(one(backend, request(prompt, temperature=0.0, stop=("</answer>",), seed=3)))
    ids, lps, _ = model_reply(prompt, 16)
    assert gen.token_ids == ids and gen.token_ids[-1] == EOS
    assert gen.logprobs == lps
    assert gen.finish_reason == "stop" and gen.error is None and not gen.retokenized
    assert gen.text == text_of(ids) and gen.prompt_tokens == 3 and gen.latency_s > 0
    path, body = server.bodies[0]
    assert path == "/v1/completions"  # the /v1 of base_url is not doubled
    assert body["prompt"] == prompt and body["model"] == "tiny"
    assert body["logprobs"] == 0 and body["return_token_ids"] is True
    assert body["return_tokens_as_token_ids"] is True
    assert body["include_stop_str_in_output"] is True
    assert body["temperature"] == 0.0 and body["stop"] == ["</answer>"] and body["seed"] == 3


def test_vllm_before_return_token_ids_reads_token_id_strings(server: ScriptedServer) -> None:
    server.old_vllm = True
    gen = run(one(VLLMBackend(server.url, model="m", retry=FAST), request([1, 2])))
    assert gen.token_ids == model_reply([1, 2], 16)[0]
    assert gen.logprobs == model_reply([1, 2], 16)[1]


def test_vllm_reply_cut_by_max_tokens_is_length(server: ScriptedServer) -> None:
    gen = run(one(VLLMBackend(server.url, retry=FAST), request([3, 4], max_tokens=2)))
    assert gen.finish_reason == "length" and gen.error is None
    assert gen.token_ids == model_reply([3, 4], 2)[0] and len(gen.logprobs) == 2


def test_context_overflow_is_length_with_no_tokens_and_no_retry(server: ScriptedServer) -> None:
    gen = run(one(VLLMBackend(server.url, retry=FAST), request(list(range(60)), max_tokens=16)))
    assert gen.finish_reason == "length" and gen.token_ids == []
    assert "maximum context length is 64" in (gen.error or "")
    assert len(server.bodies) == 1  # a prompt that does not fit is never retried


def test_http_500s_are_retried_then_succeed(server: ScriptedServer) -> None:
    server.fail_first = 2
    backend = VLLMBackend(server.url, retry=FAST)
    gen = run(one(backend, request([1])))
    assert gen.finish_reason == "stop" and gen.token_ids == model_reply([1], 16)[0]
    assert backend.requests_sent == 3 and len(server.bodies) == 3


def test_http_500s_past_the_retries_fail_the_request(server: ScriptedServer) -> None:
    server.fail_first = 100
    backend = VLLMBackend(server.url, retry=FAST)
    gen = run(one(backend, request([1])))
    assert gen.finish_reason == "error" and gen.token_ids == []
    assert "HTTP 500" in (gen.error or "") and "engine crashed" in (gen.error or "")
    assert "after 3 attempts" in (gen.error or "")
    assert len(server.bodies) == 3


def test_a_refused_request_is_not_retried(server: ScriptedServer) -> None:
    gen = run(one(VLLMBackend(server.url, retry=FAST), request([999, 1])))
    assert gen.finish_reason == "error" and "HTTP 400" in (gen.error or "")
    assert "out of vocabulary" in (gen.error or "") and len(server.bodies) == 1


def test_hung_server_times_out_with_its_own_message(server: ScriptedServer) -> None:
    server.hang_s = 30.0
    backend = VLLMBackend(server.url, timeout_s=0.3, retry=RetryPolicy(1, 0.01, 0.01))
    t0 = time.perf_counter()
    gen = run(one(backend, request([1])))
    elapsed = time.perf_counter() - t0
    assert gen.finish_reason == "error"
    assert "did not answer within 0.3 s" in (gen.error or "")
    assert "cannot connect" not in (gen.error or "")
    assert 0.6 <= elapsed < 5.0  # two attempts of 0.3 s, not the server's 30 s
    assert backend.requests_sent == 2


def test_server_down_says_cannot_connect() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    backend = VLLMBackend(url, retry=RetryPolicy(2, 0.01, 0.01))
    gen = run(one(backend, request([1])))
    assert gen.finish_reason == "error"
    assert "cannot connect to" in (gen.error or "") and "is the server running" in (gen.error or "")
    assert "did not answer" not in (gen.error or "") and backend.requests_sent == 3


def test_requests_run_concurrently_up_to_the_limit_and_fail_alone(
    server: ScriptedServer,
) -> None:
    server.delay_s = 0.2  # long enough for requests to overlap on a busy machine
    backend = VLLMBackend(server.url, max_concurrency=4, retry=FAST)
    prompts = [[i + 1, 2 * i] for i in range(12)]
    prompts[5] = [999]  # refused: only this request fails

    async def go() -> list[Any]:
        try:
            return await backend.generate_many([request(p) for p in prompts])
        finally:
            await backend.aclose()

    gens = run(go())
    assert [g.finish_reason for g in gens].count("error") == 1 and gens[5].finish_reason == "error"
    for p, g in zip(prompts, gens, strict=True):
        if p != [999]:
            assert g.token_ids == model_reply(p, 16)[0]  # each reply to its own request
    assert 2 <= server.max_in_flight <= 4  # concurrent, never past the limit


def test_backend_works_across_event_loops(server: ScriptedServer) -> None:
    backend = VLLMBackend(server.url, retry=FAST)
    for p in ([1], [2]):  # each asyncio.run is a new loop: the client is made again
        assert run(backend.generate(request(p))).token_ids == model_reply(p, 16)[0]
    run(backend.aclose())


def test_token_backends_refuse_requests_without_ids_or_with_images(
    server: ScriptedServer,
) -> None:
    from gemgym.core import Image

    gen = run(one(VLLMBackend(server.url), request(None)))
    assert gen.finish_reason == "error" and "token ids" in (gen.error or "")
    req = GenerationRequest([1], [], SamplingParams(), images=(Image(b"\x89PNG", "image/png"),))
    gen = run(one(SGLangBackend(server.url), req))
    assert gen.finish_reason == "error" and "images" in (gen.error or "")
    assert server.bodies == []


def test_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="http"):
        VLLMBackend("127.0.0.1:8000")
    with pytest.raises(ConfigError, match="max_retries"):
        RetryPolicy(max_retries=-1)
    with pytest.raises(ConfigError, match="max_concurrency"):
        SGLangBackend("http://x", max_concurrency=0)
    with pytest.raises(ConfigError, match="api"):
        transformers_serve_backend("http://x", model="m", api="grpc")


def test_retry_delays_grow_with_jitter() -> None:
    import random

    policy = RetryPolicy(max_retries=5, backoff_s=1.0, max_backoff_s=4.0, jitter=0.5)
    rng = random.Random(0)
    delays = [policy.delay(k, rng) for k in range(4)]
    for k, d in enumerate(delays):
        cap = min(4.0, 2.0**k)
        assert cap * 0.5 <= d <= cap
    assert len({round(d / min(4.0, 2.0**k), 6) for k, d in enumerate(delays)}) > 1  # jittered


# -- SGLang ------------------------------------------------------------------------------------
def test_sglang_generate(server: ScriptedServer) -> None:
    backend = SGLangBackend(server.url, retry=FAST, extra={"top_k": 5})
    prompt = [9, 8, 7, 6]
    gen = run(one(backend, request(prompt, temperature=0.7, top_p=0.9, seed=11)))
    ids, lps, _ = model_reply(prompt, 16)
    assert gen.token_ids == ids and gen.logprobs == lps and gen.finish_reason == "stop"
    assert gen.prompt_tokens == 4
    path, body = server.bodies[0]
    assert path == "/generate" and body["input_ids"] == prompt and body["return_logprob"]
    sp = body["sampling_params"]
    assert sp["max_new_tokens"] == 16 and sp["temperature"] == 0.7 and sp["top_p"] == 0.9
    assert sp["sampling_seed"] == 11 and sp["top_k"] == 5


def test_sglang_length_overflow_and_500s(server: ScriptedServer) -> None:
    gen = run(one(SGLangBackend(server.url, retry=FAST), request([1, 2], max_tokens=3)))
    assert gen.finish_reason == "length" and len(gen.token_ids) == 3
    gen = run(one(SGLangBackend(server.url, retry=FAST), request(list(range(70)))))
    assert gen.finish_reason == "length" and gen.token_ids == []
    assert "context length" in (gen.error or "")
    server.fail_first = 1
    gen = run(one(SGLangBackend(server.url, retry=FAST), request([4])))
    assert gen.finish_reason == "stop" and gen.token_ids == model_reply([4], 16)[0]


# -- text-only servers -------------------------------------------------------------------------
class CharTokenizer:
    """One id per character (ord), the decode of ``<N>`` strings: enough to check what is sent
    and that the reply is tokenised here."""

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        assert add_special_tokens is False
        return [ord(c) for c in text]

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        assert skip_special_tokens is False
        return "".join(chr(i) for i in ids)


def test_chat_backend_sends_messages_and_retokenizes(server: ScriptedServer) -> None:
    backend = ChatCompletionsBackend(server.url, model="m", tokenizer=CharTokenizer())
    assert not backend.capabilities.token_ids and not backend.capabilities.logprobs
    gen = run(one(backend, request([1, 2, 3], max_tokens=8)))
    n = len("guess a number")
    text = text_of([i for i in model_reply([n], 8)[0] if i != EOS])
    assert gen.text == text and gen.retokenized and gen.logprobs is None
    assert gen.token_ids == [ord(c) for c in text] and gen.finish_reason == "stop"
    path, body = server.bodies[0]
    assert path == "/v1/chat/completions"
    assert body["messages"] == [{"role": "user", "content": "guess a number"}]
    assert "prompt" not in body and body["max_tokens"] == 8


def test_chat_backend_without_tokenizer_leaves_ids_to_the_engine(server: ScriptedServer) -> None:
    gen = run(one(ChatCompletionsBackend(server.url), request(None, max_tokens=2)))
    assert gen.token_ids == [] and gen.retokenized and gen.text and gen.finish_reason == "length"


def test_an_empty_text_reply_cut_by_max_tokens_is_an_error_not_an_overflow(
    server: ScriptedServer,
) -> None:
    req = GenerationRequest(
        None, [{"role": "user", "content": "say nothing"}], SamplingParams(max_tokens=2)
    )
    gen = run(one(ChatCompletionsBackend(server.url), req))
    assert gen.finish_reason == "error" and "text is empty" in (gen.error or "")


def test_chat_backend_refuses_images_unless_told(server: ScriptedServer) -> None:
    from gemgym.core import Image

    img = (Image(b"\x89PNG", "image/png"),)
    req = GenerationRequest(None, [{"role": "user", "content": "x"}], SamplingParams(), images=img)
    gen = run(one(ChatCompletionsBackend(server.url), req))
    assert gen.finish_reason == "error" and "images=True" in (gen.error or "")
    backend = ChatCompletionsBackend(server.url, images=True)
    assert backend.capabilities.images
    assert run(one(backend, req)).finish_reason == "stop"


def test_text_completions_backend_sends_the_decoded_prompt(server: ScriptedServer) -> None:
    backend = transformers_serve_backend(server.url, model="tiny", tokenizer=CharTokenizer())
    assert isinstance(backend, TextCompletionsBackend)
    prompt = [ord(c) for c in "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"]
    gen = run(one(backend, request(prompt, temperature=0.5, seed=1)))
    _, body = server.bodies[0]
    assert body["prompt"] == "".join(map(chr, prompt)) and body["model"] == "tiny"
    # only the standard fields: transformers serve answers 422 to any other
    assert set(body) == {"model", "prompt", "max_tokens", "temperature", "top_p", "seed"}
    text = text_of([i for i in model_reply([len(prompt)], 16)[0] if i != EOS])
    assert gen.text == text and gen.token_ids == [ord(c) for c in text] and gen.retokenized
    chat = transformers_serve_backend(server.url, model="tiny", api="chat")
    assert isinstance(chat, ChatCompletionsBackend)


def play_guess_the_number(backend: Any, episodes: int, sampling: SamplingParams) -> list[Any]:
    """``episodes`` GuessTheNumber episodes, all in flight at once (the backend is closed)."""
    from gemgym.llm.rollout import rollout_tokens

    return rollout_tokens(
        "game:GuessTheNumber-v0-easy",
        backend,
        episodes=episodes,
        seed=0,
        batch_size=episodes,
        sampling=sampling,
    )


@pytest.mark.slow
def test_transformers_serve_through_the_rollout_engine(tmp_path: Path) -> None:
    """A real ``transformers serve`` with the tiny chat model: episodes played through the
    completions API are recorded as re-tokenised, their ids the tokenizer's of the text."""
    needs_package("fastapi", '"transformers[serving]"')
    needs_package("uvicorn", '"transformers[serving]"')
    from transformers import AutoTokenizer

    from gemgym.llm.testing import build_tiny_chat_model
    from helpers.net import transformers_serve

    if not Path(sys.executable).with_name("transformers").is_file():
        pytest.skip("no transformers command")
    model = build_tiny_chat_model(tmp_path / "tiny")
    tok = AutoTokenizer.from_pretrained(model)
    with transformers_serve(model) as url:
        backend = transformers_serve_backend(url, model=str(model), tokenizer=tok, timeout_s=60)

        episodes = play_guess_the_number(backend, 2, SamplingParams(max_tokens=8, seed=1))
    assert [e.finish_reason for e in episodes] != ["error", "error"], episodes[0].error
    for ep in episodes:
        if ep.finish_reason == "error":
            continue
        assert ep.turns and ep.retokenized
        for turn in ep.turns:
            assert turn.logprobs is None and turn.retokenized
            assert turn.action_ids == tok.encode(turn.action_text, add_special_tokens=False)


# -- through the rollout engine ----------------------------------------------------------------
@pytest.fixture(scope="module")
def chat_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    needs_module("transformers", "llm")
    from transformers import AutoTokenizer

    from gemgym.llm.testing import build_tiny_chat_model

    path = build_tiny_chat_model(tmp_path_factory.mktemp("tiny") / "m", "chatml")
    tok = AutoTokenizer.from_pretrained(path)
    assert tok.eos_token_id == EOS  # the scripted model ends its replies with <|im_end|>
    return tok


def test_rollout_through_vllm_records_the_servers_ids_and_a_failure_ends_one_episode(
    server: ScriptedServer, chat_tokenizer: Any
) -> None:

    server.fail_first = 1  # the first request answers HTTP 500, and is not retried
    server.context = 4096
    backend = VLLMBackend(
        server.url, model="m", tokenizer=chat_tokenizer, retry=RetryPolicy(max_retries=0)
    )

    # no tokenizer given: the backend's is used
    episodes = play_guess_the_number(backend, 4, SamplingParams(max_tokens=16, max_context=4096))
    failed = [e for e in episodes if e.finish_reason == "error"]
    assert len(failed) == 1 and "HTTP 500" in (failed[0].error or "")
    sent = [b["prompt"] for p, b in server.bodies if p == "/v1/completions"]
    for ep in episodes:
        if ep.finish_reason == "error":
            continue
        assert ep.turns and not ep.retokenized
        prompt = list(ep.prompt_ids)
        for turn in ep.turns:
            assert prompt in sent  # what was sent is the record's context, verbatim
            ids, lps, _ = model_reply(prompt, 16)
            assert turn.action_ids == ids and turn.logprobs == lps
            prompt += turn.action_ids + turn.next_ids
