"""Token exactness per chat-template family: the record holds the sampled ids verbatim and the
observations exactly as the template renders them (checked against hand-written formats)."""

from __future__ import annotations

from typing import Any

import pytest

from gemgym.llm.backend import Generation, GenerationRequest, SamplingParams
from gemgym.llm.record import TokenEpisode, TokenTurn
from gemgym.llm.render import ChatRenderer, compare_with_full_render
from gemgym.llm.rollout import rollout_tokens
from gemgym.llm.testing import TEMPLATE_FAMILIES
from gemgym.llm.transformers_backend import TransformersBackend
from helpers.envs import CountingEnv

QWEN_DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."


def expected_prompt(family: str, system: str | None, obs: str) -> str:
    """The first prompt, written out by hand for each family."""
    if family == "llama3":
        sys = (
            ""
            if system is None
            else f"<|start_header_id|>system<|end_header_id|>\n\n{system}<|eot_id|>"
        )
        return (
            f"<|begin_of_text|>{sys}<|start_header_id|>user<|end_header_id|>\n\n{obs.strip()}"
            "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
        )
    if system is None and family == "qwen2":
        system = QWEN_DEFAULT_SYSTEM
    sys = "" if system is None else f"<|im_start|>system\n{system}<|im_end|>\n"
    return f"{sys}<|im_start|>user\n{obs}<|im_end|>\n<|im_start|>assistant\n"


def expected_continuation(family: str, eos_sampled: bool, obs: str | None, role: str) -> str:
    """What follows a sampled action: turn end, observation, generation prompt."""
    if family == "llama3":
        end = "" if eos_sampled else "<|eot_id|>"
        if obs is None:
            return end
        r = "ipython" if role == "tool" else "user"
        return (
            f"{end}<|start_header_id|>{r}<|end_header_id|>\n\n{obs.strip()}<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n"
        )
    end = "\n" if eos_sampled else "<|im_end|>\n"
    if obs is None:
        return end
    if role == "tool" and family in ("qwen2", "qwen3"):
        msg = f"<|im_start|>user\n<tool_response>\n{obs}\n</tool_response><|im_end|>\n"
    else:
        msg = f"<|im_start|>{role}\n{obs}<|im_end|>\n"
    return end + msg + "<|im_start|>assistant\n"


class Recording:
    """A backend wrapper that keeps every generation by request id."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.capabilities = inner.capabilities
        self.tokenizer = inner.tokenizer
        self.seen: dict[str, Generation] = {}
        self.prompts: dict[str, list[int]] = {}

    async def generate(self, request: GenerationRequest) -> Generation:
        gen = await self.inner.generate(request)
        self.seen[request.request_id] = gen
        self.prompts[request.request_id] = list(request.prompt_ids or [])
        return gen

    async def aclose(self) -> None:
        await self.inner.aclose()


def _encode(tok: Any, text: str) -> list[int]:
    return list(tok(text, add_special_tokens=False)["input_ids"])


@pytest.mark.parametrize("system", [None, "Answer briefly."])
@pytest.mark.parametrize("family", TEMPLATE_FAMILIES)
def test_record_is_sampled_ids_and_template_rendering(
    tiny: dict[str, tuple[Any, Any]], family: str, system: str | None
) -> None:
    model, tok = tiny[family]
    backend = Recording(TransformersBackend(model, tok, device="cpu"))
    eps = rollout_tokens(
        CountingEnv(episode_length=3),
        backend,
        episodes=3,
        batch_size=3,
        seed=0,
        system_prompt=system,
        sampling=SamplingParams(max_tokens=12, seed=1),
    )
    assert [len(e.turns) for e in eps] == [3, 3, 3]
    eos = tok.eos_token_id
    for ep in eps:
        assert ep.finish_reason == "env_end"
        first = ep.prompt_messages[-1]["content"]
        assert ep.prompt_ids == _encode(tok, expected_prompt(family, system, first))
        context = list(ep.prompt_ids)
        for t, turn in enumerate(ep.turns):
            gen = backend.seen[f"{ep.index}-{t}"]
            # what the model was conditioned on is exactly the record's prefix
            assert backend.prompts[f"{ep.index}-{t}"] == context
            assert turn.action_ids == gen.token_ids and turn.logprobs == gen.logprobs
            assert not turn.retokenized
            last = t == len(ep.turns) - 1
            want = expected_continuation(
                family,
                bool(turn.action_ids) and turn.action_ids[-1] == eos,
                None if last else turn.next_observation,
                "user",
            )
            assert tok.decode(turn.next_ids, skip_special_tokens=False) == want
            assert turn.next_ids == _encode(tok, want)
            context += turn.action_ids + turn.next_ids
        assert ep.input_ids == context
        mask = [0] * len(ep.prompt_ids)
        for turn in ep.turns:
            mask += [1] * len(turn.action_ids) + [0] * len(turn.next_ids)
        assert ep.loss_mask == mask


@pytest.mark.parametrize("family", TEMPLATE_FAMILIES)
def test_tool_outputs_render_as_tool_messages(
    tiny: dict[str, tuple[Any, Any]], family: str
) -> None:
    _, tok = tiny[family]
    r = ChatRenderer(tok)
    ids = r.continuation([tok.eos_token_id], "Code execution result: 4\n", "tool")
    assert tok.decode(ids, skip_special_tokens=False) == expected_continuation(
        family, True, "Code execution result: 4\n", "tool"
    )


def _episode(tok: Any, r: ChatRenderer, actions: list[str]) -> TokenEpisode:
    """An episode whose actions are the tokenizer's own encoding of ``actions``."""
    prompt, msgs = r.prompt("Guess a number.")
    ep = TokenEpisode("test", 0, 0, model="m", prompt_ids=prompt, prompt_messages=msgs)
    for i, a in enumerate(actions):
        ids = [*_encode(tok, a), tok.eos_token_id]
        last = i == len(actions) - 1
        obs = None if last else f"Feedback {i}."
        ep.turns.append(
            TokenTurn(
                action=a,
                action_ids=ids,
                finish_reason="stop",
                next_ids=r.continuation(ids, obs),
                next_observation=obs or "",
            )
        )
    return ep


@pytest.mark.parametrize("family", ["chatml", "qwen2"])
def test_canonical_actions_match_the_full_render(
    tiny: dict[str, tuple[Any, Any]], family: str
) -> None:
    _, tok = tiny[family]
    r = ChatRenderer(tok, system_prompt="Be brief.")
    ep = _episode(tok, r, ["I guess \\boxed{5}.", "Then \\boxed{7}.", "\\boxed{6}"])
    diff = compare_with_full_render(ep, r)
    assert diff.equal and diff.changed_turns == 0
    full = r.rerender(ep)
    assert full.rendering == "rerendered" and full.input_ids == ep.input_ids
    assert full.loss_mask == ep.loss_mask


def test_qwen3_drops_past_reasoning_and_rerender_says_so(tiny: dict[str, tuple[Any, Any]]) -> None:
    _, tok = tiny["qwen3"]
    r = ChatRenderer(tok)
    acts = [
        "<think>\nlow or high\n</think>\n\n\\boxed{5}",
        "<think>\nhigher\n</think>\n\n\\boxed{8}",
    ]
    ep = _episode(tok, r, acts)
    diff = compare_with_full_render(ep, r)
    assert not diff.equal and diff.changed_turns == 1  # the first turn lost its reasoning
    assert diff.first_mismatch == len(ep.prompt_ids) and diff.full_tokens < diff.incremental_tokens
    full = r.rerender(ep)
    assert full.rendering == "rerendered"
    assert [t.logprobs for t in full.turns] == [None, None]
    first = tok.decode(full.turns[0].action_ids, skip_special_tokens=False)
    assert first == "\\boxed{5}<|im_end|>"  # the mask covers the content and its end token
    assert full.turns[1].action_ids == ep.turns[1].action_ids


def test_llama3_trims_whitespace_of_past_turns(tiny: dict[str, tuple[Any, Any]]) -> None:
    _, tok = tiny["llama3"]
    r = ChatRenderer(tok)
    ep = _episode(tok, r, ["\\boxed{5} ", "\\boxed{6}"])
    diff = compare_with_full_render(ep, r)
    assert not diff.equal and diff.changed_turns == 1
