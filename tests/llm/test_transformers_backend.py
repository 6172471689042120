"""The transformers backend: recorded log-probs match a forward pass, batching changes nothing,
seeds reproduce, stop strings and max tokens end a turn."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gemgym.core import Image
from gemgym.errors import BackendError
from gemgym.llm.backend import Generation, GenerationRequest, SamplingParams
from gemgym.llm.rollout import rollout_tokens
from gemgym.llm.transformers_backend import TransformersBackend
from helpers.envs import CountingEnv
from helpers.extras import skip_without


def _backend(tiny: dict[str, tuple[Any, Any]], family: str = "chatml") -> TransformersBackend:
    model, tok = tiny[family]
    return TransformersBackend(model, tok, device="cpu")


def _generate(backend: TransformersBackend, requests: list[GenerationRequest]) -> list[Generation]:
    async def main() -> list[Generation]:
        try:
            return list(await asyncio.gather(*(backend.generate(r) for r in requests)))
        finally:
            await backend.aclose()

    return asyncio.run(main())


def _request(prompt: list[int], **sampling: Any) -> GenerationRequest:
    return GenerationRequest(prompt, (), SamplingParams(**sampling))


@pytest.mark.parametrize("family", ["qwen2", "llama3"])
def test_recorded_logprobs_match_a_forward_pass(
    tiny: dict[str, tuple[Any, Any]], family: str
) -> None:
    import torch

    model, tok = tiny[family]
    eps = rollout_tokens(
        CountingEnv(episode_length=3),
        TransformersBackend(model, tok, device="cpu"),
        episodes=4,
        batch_size=4,
        seed=0,
        sampling=SamplingParams(max_tokens=10, temperature=1.0, seed=3),
    )
    checked = 0
    for ep in eps:
        ids = torch.tensor([ep.input_ids])
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=ids).logits[0].float(), dim=-1)
        for pos, (tok_id, lp) in enumerate(zip(ep.input_ids, ep.logprobs, strict=True)):
            if lp is None:
                assert ep.loss_mask[pos] == 0
                continue
            assert ep.loss_mask[pos] == 1
            assert lp == pytest.approx(float(logp[pos - 1, tok_id]), abs=2e-4)
            checked += 1
    assert checked == sum(e.num_action_tokens for e in eps) > 0


def test_batching_and_padding_change_nothing(tiny: dict[str, tuple[Any, Any]]) -> None:
    _, tok = tiny["chatml"]
    prompts = [
        tok.apply_chat_template(
            [{"role": "user", "content": t}], tokenize=False, add_generation_prompt=True
        )
        for t in ["Hi", "A much longer prompt with many more tokens in it than the first one."]
    ]
    ids = [list(tok(p, add_special_tokens=False)["input_ids"]) for p in prompts]
    together = _generate(_backend(tiny), [_request(i, temperature=0, max_tokens=8) for i in ids])
    alone = [_generate(_backend(tiny), [_request(i, temperature=0, max_tokens=8)])[0] for i in ids]
    for a, b in zip(together, alone, strict=True):
        assert a.token_ids == b.token_ids
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)


def test_seeds_reproduce_and_differ(tiny: dict[str, tuple[Any, Any]]) -> None:
    ids = [1, 5, 9, 13, 20]
    a = _generate(_backend(tiny), [_request(ids, max_tokens=12, seed=7)])[0]
    b = _generate(_backend(tiny), [_request(ids, max_tokens=12, seed=7), _request(ids, seed=8)])
    assert a.token_ids == b[0].token_ids
    assert b[1].token_ids[:12] != a.token_ids


def test_max_tokens_and_stop_strings_end_a_turn(tiny: dict[str, tuple[Any, Any]]) -> None:
    backend = _backend(tiny)
    _, tok = tiny["chatml"]
    ids = [1, 5, 9, 13, 20]
    cut, free = _generate(backend, [_request(ids, max_tokens=3, seed=1), _request(ids, seed=1)])
    assert cut.finish_reason == "length" and len(cut.token_ids) == 3
    assert cut.token_ids == free.token_ids[:3]
    # a stop string taken from what the model samples anyway ends the turn right there
    text = tok.decode(free.token_ids[:6], skip_special_tokens=True)
    stop = text[-2:] if text.strip() else None
    if stop is None:
        pytest.skip("the model sampled only special tokens")
    stopped = _generate(_backend(tiny), [_request(ids, seed=1, stop=(stop,))])[0]
    assert stopped.finish_reason == "stop" and stop in stopped.text
    assert stopped.token_ids == free.token_ids[: len(stopped.token_ids)]
    assert len(stopped.token_ids) <= 6


def test_images_are_refused_clearly(tiny: dict[str, tuple[Any, Any]]) -> None:
    req = GenerationRequest([1, 2], (), SamplingParams(), images=(Image(b"\x89PNG"),))
    with pytest.raises(BackendError, match="text-only"):
        _generate(_backend(tiny), [req])


def test_one_backend_serves_several_blocking_rollouts(tiny: dict[str, tuple[Any, Any]]) -> None:
    backend = _backend(tiny)
    runs = [
        rollout_tokens(
            CountingEnv(episode_length=2),
            backend,
            episodes=2,
            seed=0,
            sampling=SamplingParams(max_tokens=4, seed=5),
        )
        for _ in range(2)
    ]
    assert [e.input_ids for e in runs[0]] == [e.input_ids for e in runs[1]]
    assert all(e.finish_reason == "env_end" for e in runs[0] + runs[1])


@skip_without("llm")  # torch
def test_top_p_keeps_the_nucleus_of_each_row() -> None:
    import torch

    from gemgym.llm.transformers_backend import _top_p

    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05], [0.5, 0.3, 0.15, 0.05], [0.1, 0.2, 0.3, 0.4]])
    out = _top_p(torch, probs, torch.tensor([1.0, 0.6, 0.35]))
    assert torch.equal(out[0], probs[0])
    assert out[1].tolist() == pytest.approx([0.5, 0.3, 0.0, 0.0])
    assert out[2].tolist() == pytest.approx([0.0, 0.0, 0.0, 0.4])
