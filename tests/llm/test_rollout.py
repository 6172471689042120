"""The rollout engine: tools masked out, context overflow, failures that end only their own
episode, text-only backends, images, JSONL and token advantages."""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import Any

import pytest

import gemgym
from gemgym.errors import BackendError, ConfigError
from gemgym.llm.backend import BackendCapabilities, Generation, GenerationRequest, SamplingParams
from gemgym.llm.record import read_token_jsonl, token_advantages, write_token_jsonl
from gemgym.llm.rollout import RolloutStats, rollout_tokens
from gemgym.llm.transformers_backend import TransformersBackend
from gemgym.vector import make_vector_env
from helpers.envs import CountingEnv, FaultyEnv


class Scripted:
    """A fake LLM: replies with the script's text for ``(episode, turn)`` (tokenised here, the
    end-of-turn token appended), for engine logic a random model cannot reach (tool calls)."""

    def __init__(self, tok: Any, script: Any, *, token_ids: bool = True) -> None:
        self.tokenizer = tok
        self.script = script
        self.name = "scripted"
        self.capabilities = BackendCapabilities(token_ids=token_ids, logprobs=False)

    async def generate(self, request: GenerationRequest) -> Generation:
        ep, turn = map(int, request.request_id.split("-"))
        text = self.script(ep, turn)
        if not self.capabilities.token_ids:
            return Generation([], None, text, "stop")
        ids = [*self.tokenizer(text, add_special_tokens=False)["input_ids"]]
        return Generation([*ids, self.tokenizer.eos_token_id], None, text, "stop")

    async def aclose(self) -> None:
        pass


class Faulty:
    """The real backend, except for chosen requests: ``raise``, ``fail`` or ``hang``."""

    def __init__(self, inner: TransformersBackend, faults: dict[str, str]) -> None:
        self.inner, self.faults = inner, faults
        self.name, self.capabilities, self.tokenizer = (
            inner.name,
            inner.capabilities,
            inner.tokenizer,
        )

    async def generate(self, request: GenerationRequest) -> Generation:
        fault = self.faults.get(request.request_id)
        if fault == "raise":
            raise BackendError("HTTP 500 from the server")
        if fault == "fail":
            return Generation.failed("the server lost the request")
        if fault == "hang":
            await asyncio.sleep(60)
        return await self.inner.generate(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def test_tool_outputs_are_masked_out(tiny: dict[str, tuple[Any, Any]]) -> None:
    from gemgym.sandbox.bwrap import bwrap_available
    from gemgym.wrappers.tools import python_tool_wrapper

    if not bwrap_available():
        pytest.skip("bubblewrap is not installed")
    _, tok = tiny["qwen2"]
    script = {0: "<python>print(6 * 7)</python>", 1: "\\boxed{42}"}
    eps = rollout_tokens(
        "math:GSM8K",
        Scripted(tok, lambda ep, turn: script[turn]),
        episodes=2,
        batch_size=2,
        seed=0,
        dataset="sample",
        wrappers=[python_tool_wrapper(timeout=5)],
    )
    for ep in eps:
        assert [t.next_role for t in ep.turns] == ["tool", "user"]
        assert ep.turns[0].info["use_tool"] and ep.turns[0].next_observation.startswith(
            "Code execution result: 42"
        )
        tool_part = tok.decode(ep.turns[0].next_ids, skip_special_tokens=False)
        assert "<tool_response>\nCode execution result: 42" in tool_part
        mask, ids = ep.loss_mask, ep.input_ids
        trained = [i for i, m in zip(ids, mask, strict=True) if m]
        assert trained == ep.turns[0].action_ids + ep.turns[1].action_ids
        start = len(ep.prompt_ids) + len(ep.turns[0].action_ids)
        assert mask[start : start + len(ep.turns[0].next_ids)] == [0] * len(ep.turns[0].next_ids)
        assert ep.finish_reason == "env_end"


def test_context_overflow_ends_the_episode_as_truncated(tiny: dict[str, tuple[Any, Any]]) -> None:
    model, tok = tiny["chatml"]
    eps = rollout_tokens(
        CountingEnv(episode_length=100),
        TransformersBackend(model, tok, device="cpu"),
        episodes=3,
        batch_size=3,
        seed=0,
        sampling=SamplingParams(max_tokens=16, max_context=120, seed=0),
    )
    for ep in eps:
        assert (ep.finish_reason, ep.truncation) == ("truncation", "context")
        assert 1 <= len(ep.turns) < 100
        last = ep.turns[-1]
        # the observation that did not fit is text only; the ids end with (as much of) the turn
        # end (as fits): no record is longer than max_context
        assert last.next_observation and ep.num_tokens <= 120
        turn_end = tok(
            "\n" if last.action_ids[-1] == tok.eos_token_id else "<|im_end|>\n",
            add_special_tokens=False,
        )["input_ids"]
        assert last.next_ids == turn_end[: len(last.next_ids)]
        assert len(last.next_ids) == min(len(turn_end), 120 - (ep.num_tokens - len(last.next_ids)))


def test_failed_requests_end_only_their_own_episode(tiny: dict[str, tuple[Any, Any]]) -> None:
    model, tok = tiny["chatml"]
    faults = {"1-0": "raise", "2-1": "fail", "3-0": "hang"}
    backend = Faulty(TransformersBackend(model, tok, device="cpu"), faults)
    eps = rollout_tokens(
        CountingEnv(episode_length=3),
        backend,
        episodes=6,
        batch_size=4,
        seed=0,
        sampling=SamplingParams(max_tokens=6),
        request_timeout=1.0,
    )
    by = {e.index: e for e in eps}
    assert len(by) == 6
    assert by[1].finish_reason == "error" and "HTTP 500" in (by[1].error or "")
    assert by[2].finish_reason == "error" and len(by[2].turns) == 1
    assert by[2].error == "the server lost the request"
    assert by[3].finish_reason == "error" and "request_timeout" in (by[3].error or "")
    for k in (0, 4, 5):
        assert by[k].finish_reason == "env_end" and len(by[k].turns) == 3 and by[k].error is None


def test_an_env_that_raises_ends_only_its_episode(tiny: dict[str, tuple[Any, Any]]) -> None:
    _, tok = tiny["chatml"]
    venv = make_vector_env(env_fns=[functools.partial(FaultyEnv, 2)] * 2, autoreset_mode="disabled")
    with venv:
        eps = rollout_tokens(
            venv,
            Scripted(tok, lambda ep, turn: "raise" if ep == 1 else "ok"),
            episodes=4,
            seed=0,
        )
    assert [e.finish_reason for e in eps] == ["env_end", "error", "env_end", "env_end"]
    assert "FaultyEnv was asked to raise" in (eps[1].error or "")


def test_text_only_backends_are_retokenised_and_say_so(tiny: dict[str, tuple[Any, Any]]) -> None:
    _, tok = tiny["llama3"]
    eps = rollout_tokens(
        CountingEnv(episode_length=2),
        Scripted(tok, lambda ep, turn: f"answer {turn}", token_ids=False),
        episodes=1,
    )
    (ep,) = eps
    assert ep.retokenized and all(t.retokenized and t.logprobs is None for t in ep.turns)
    assert ep.turns[0].action_ids == tok("answer 0", add_special_tokens=False)["input_ids"]
    # the template closes the turn the model's text did not close
    assert tok.decode(ep.turns[1].next_ids, skip_special_tokens=False) == "<|eot_id|>"


def test_images_with_a_text_only_backend_stop_with_a_clear_error(
    tiny: dict[str, tuple[Any, Any]],
) -> None:
    model, tok = tiny["chatml"]
    with pytest.raises(ConfigError, match="does not take"):
        rollout_tokens(
            "math:Geometry3K",
            TransformersBackend(model, tok, device="cpu"),
            episodes=2,
            dataset="sample",
        )


def test_model_sees_the_board_in_info_suffix(tiny: dict[str, tuple[Any, Any]]) -> None:
    _, tok = tiny["chatml"]
    (ep,) = rollout_tokens(
        "game:Sudoku-v0-easy", Scripted(tok, lambda ep, turn: "no move"), episodes=1, seed=0
    )
    env = gemgym.make("game:Sudoku-v0-easy")
    obs, info = env.reset(seed=0)
    assert info["suffix"] and ep.prompt_messages[-1]["content"] == f"{obs}\n{info['suffix']}"
    assert info["suffix"] in tok.decode(ep.prompt_ids)


def test_groups_max_turns_jsonl_and_token_advantages(
    tiny: dict[str, tuple[Any, Any]], tmp_path: Path
) -> None:
    model, tok = tiny["qwen3"]
    stats = RolloutStats()
    eps = rollout_tokens(
        CountingEnv(episode_length=5),
        TransformersBackend(model, tok, device="cpu"),
        episodes=4,
        group_size=2,
        batch_size=2,
        seed=10,
        max_turns=2,
        sampling=SamplingParams(max_tokens=5, seed=0),
        stats=stats,
    )
    assert [e.group for e in eps] == [0, 0, 1, 1]
    assert [e.seed for e in eps] == [10, 10, 11, 11]
    assert eps[0].prompt_messages == eps[1].prompt_messages  # same initial state per group
    assert all(
        (e.finish_reason, e.truncation, len(e.turns)) == ("truncation", "max_turns", 2) for e in eps
    )
    assert (stats.episodes, stats.turns, stats.requests) == (4, 8, 8) and stats.wall_s > 0
    path = tmp_path / "eps.jsonl"
    assert write_token_jsonl(eps, path) == 4
    back = list(read_token_jsonl(path))
    assert [b.to_dict() for b in back] == [e.to_dict() for e in eps]
    advs = token_advantages(back, "grpo")
    for ep, adv in zip(back, advs, strict=True):
        assert len(adv) == ep.num_tokens
        assert all(a == 0 for a, m in zip(adv, ep.loss_mask, strict=True) if not m)
    with pytest.raises(ConfigError, match="group"):
        token_advantages(
            [*back[:1], back[0].__class__.from_dict({**back[0].to_dict(), "group": None})], "grpo"
        )


def test_images_go_to_backends_that_take_them(tiny: dict[str, tuple[Any, Any]]) -> None:
    _, tok = tiny["chatml"]
    seen: list[GenerationRequest] = []

    class Vision(Scripted):
        async def generate(self, request: GenerationRequest) -> Generation:
            seen.append(request)
            return await super().generate(request)

    backend = Vision(tok, lambda ep, turn: "\\boxed{3}", token_ids=False)
    backend.capabilities = BackendCapabilities(token_ids=False, logprobs=False, images=True)
    (ep,) = rollout_tokens("math:Geometry3K", backend, episodes=1, seed=0, dataset="sample")
    (request,) = seen
    assert request.prompt_ids is None and request.images
    content = request.messages[-1]["content"]
    assert content[0]["type"] == "text" and content[1]["type"] == "image_url"
    assert content[1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert ep.finish_reason == "env_end" and ep.turns[0].retokenized


def test_a_reply_cut_by_max_tokens_is_closed_by_the_template(
    tiny: dict[str, tuple[Any, Any]],
) -> None:
    model, tok = tiny["qwen2"]
    eps = rollout_tokens(
        CountingEnv(episode_length=2),
        TransformersBackend(model, tok, device="cpu"),
        episodes=4,
        batch_size=4,
        seed=0,
        sampling=SamplingParams(max_tokens=1, seed=0),
    )
    cut = [t for e in eps for t in e.turns if t.action_ids[-1] != tok.eos_token_id]
    assert cut and all(t.finish_reason == "length" and len(t.action_ids) == 1 for t in cut)
    for t in cut:  # the model did not close its turn, so the template's <|im_end|> does
        assert tok.decode(t.next_ids, skip_special_tokens=False).startswith("<|im_end|>\n")
    assert all(e.finish_reason == "env_end" and len(e.turns) == 2 for e in eps)


class _FillsTheContext:
    """A fake LLM whose reply takes every token it may (``max_tokens``: the room left), cut
    there (``finish_reason="length"``, no end-of-turn token)."""

    name = "fills"
    capabilities = BackendCapabilities(token_ids=True, logprobs=False)

    def __init__(self, tok: Any) -> None:
        self.tokenizer = tok
        self.x = tok("x", add_special_tokens=False)["input_ids"][0]

    async def generate(self, request: GenerationRequest) -> Generation:
        n = request.sampling.max_tokens
        return Generation([self.x] * n, None, "x" * n, "length")

    async def aclose(self) -> None:
        pass


@pytest.mark.parametrize("max_context", [60, 97, 150])
def test_an_action_that_fills_the_context_gets_no_turn_end_past_it(
    tiny: dict[str, tuple[Any, Any]], max_context: int
) -> None:
    _, tok = tiny["chatml"]
    eps = rollout_tokens(
        CountingEnv(episode_length=10),
        _FillsTheContext(tok),
        episodes=2,
        batch_size=2,
        seed=0,
        sampling=SamplingParams(max_tokens=max_context, max_context=max_context, seed=0),
    )
    for ep in eps:
        (turn,) = ep.turns  # the first reply took the whole room
        assert len(ep.prompt_ids) + len(turn.action_ids) == max_context
        assert turn.next_ids == []  # the turn end does not fit: none is appended
        assert len(ep.input_ids) == ep.num_tokens == max_context
        assert (ep.finish_reason, ep.truncation) == ("truncation", "context")
