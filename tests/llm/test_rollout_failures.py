"""Failures of token rollouts stay in their episode, and records stay within the context.

Each test here failed before the episode engine: an env whose reset raised aborted the whole
rollout (the finished episodes were lost), one raising model batch failed every episode in it,
and a first prompt longer than ``max_context`` was kept whole."""

from __future__ import annotations

import asyncio
from typing import Any

from gemgym.llm.backend import SamplingParams
from gemgym.llm.rollout import rollout_tokens
from gemgym.llm.transformers_backend import TransformersBackend
from helpers.envs import CountingEnv


class _ResetBreaks(CountingEnv):
    """Its reset raises for seed 2."""

    def __init__(self) -> None:
        super().__init__(episode_length=2)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        if seed == 2:
            raise RuntimeError("the reset broke")
        return super().reset(seed=seed, options=options)


def test_an_env_whose_reset_raises_fails_only_its_episode(
    tiny: dict[str, tuple[Any, Any]],
) -> None:
    model, tok = tiny["chatml"]
    eps = rollout_tokens(
        _ResetBreaks(),
        TransformersBackend(model, tok, device="cpu"),
        episodes=5,
        batch_size=2,
        seed=0,
        sampling=SamplingParams(max_tokens=4, seed=0),
    )
    assert [e.index for e in eps] == [0, 1, 2, 3, 4]  # nothing finished was lost
    bad = eps[2]
    assert (bad.finish_reason, bad.error_stage, bad.turns) == ("error", "reset", [])
    assert "the reset broke" in str(bad.error)
    assert all(e.finish_reason == "env_end" and len(e.turns) == 2 for i, e in enumerate(eps)
               if i != 2)  # fmt: skip


def test_a_raising_model_batch_fails_only_the_bad_request(
    tiny: dict[str, tuple[Any, Any]],
) -> None:
    model, tok = tiny["chatml"]
    backend = TransformersBackend(model, tok, device="cpu", max_batch_size=8)
    queue = backend._queue
    run_batch = queue._run_batch
    batches: list[list[str]] = []

    def poisoned(requests: Any) -> Any:
        batches.append([r.request_id for r in requests])
        if any(r.request_id == "1-0" for r in requests):  # episode 1's first turn
            raise RuntimeError("CUDA error: the poisoned request")
        return run_batch(requests)

    queue._run_batch = poisoned
    # the first turns' four requests are queued together, however the loop schedules the resets
    # (on a loaded machine the first one could otherwise form a batch alone)
    submit, arrived, everyone_in = queue.submit, [], asyncio.Event()

    async def together(request: Any) -> Any:
        arrived.append(request.request_id)
        if len(arrived) < 4:
            await everyone_in.wait()
        else:
            everyone_in.set()
        return await submit(request)

    queue.submit = together  # type: ignore[method-assign]
    eps = rollout_tokens(
        CountingEnv(episode_length=2),
        backend,
        episodes=4,
        batch_size=4,
        seed=0,
        sampling=SamplingParams(max_tokens=4, seed=0),
    )
    assert len(batches[0]) > 1  # the poisoned request shared its batch with others
    assert [e.finish_reason for e in eps] == ["env_end", "error", "env_end", "env_end"]
    assert "the poisoned request" in str(eps[1].error) and eps[1].error_stage == "model"


def test_a_first_prompt_that_cannot_fit_is_truncated_with_nothing_sampled(
    tiny: dict[str, tuple[Any, Any]],
) -> None:
    model, tok = tiny["chatml"]

    class Wordy(CountingEnv):
        def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
            obs, info = super().reset(seed=seed, options=options)
            return obs + " and more" * 200, info

    eps = rollout_tokens(
        Wordy(episode_length=3),
        TransformersBackend(model, tok, device="cpu"),
        episodes=2,
        seed=0,
        sampling=SamplingParams(max_tokens=8, max_context=64, seed=0),
    )
    for ep in eps:
        assert (ep.finish_reason, ep.truncation) == ("truncation", "prompt")
        assert ep.turns == [] and ep.num_action_tokens == 0
        assert len(ep.input_ids) <= 64 and ep.prompt_ids  # cut to the context, flagged


def test_no_record_exceeds_max_context(tiny: dict[str, tuple[Any, Any]]) -> None:
    model, tok = tiny["chatml"]
    for max_context in (40, 57, 90, 131):
        eps = rollout_tokens(
            CountingEnv(episode_length=50),
            TransformersBackend(model, tok, device="cpu"),
            episodes=3,
            batch_size=3,
            seed=1,
            sampling=SamplingParams(max_tokens=12, max_context=max_context, seed=1),
        )
        for ep in eps:
            assert ep.num_tokens <= max_context
            assert ep.finish_reason == "truncation" and ep.truncation in ("context", "prompt")
