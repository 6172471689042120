"""Tinker cookbook (0.6): gemgym envs as cookbook RL envs, rendered by the cookbook's renderers.

* :class:`GemgymMessageEnv` is a cookbook ``MessageEnv``: the env's observations become user
  messages, each assistant message (parsed by the renderer) is one env step; wrapped in the
  cookbook's ``EnvFromMessageEnv``, which renders with the cookbook renderer, builds the token
  observations and stop conditions, and handles parse errors and context limits;
* :class:`GemgymEnvGroupBuilder` makes ``group_size`` envs of one gemgym env from one seed (a
  GRPO group; picklable: it holds the env spec, the renderer name and the tokenizer path, and
  builds the rest in ``make_envs``);
* :class:`GemgymRLDataset` serves batches of builders that cycle through several envs
  (:func:`~gemgym.integrations.common.task_rows`), for runs that mix envs.

With the cookbook's trainer (``tinker_cookbook.rl.train``) the dataset plugs in where its
recipes put theirs; with any other sampler, ``do_group_rollout(builder, policy)`` plays the
group. Needs ``pip install "gemgym[tinker]"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gemgym.errors import ConfigError, missing_dependency
from gemgym.integrations.common import (
    PRESETS,
    EnvFactory,
    TextEpisode,
    env_factory,
    preset_envs,
    task_rows,
)

try:
    from tinker_cookbook import renderers
    from tinker_cookbook.completers import TokenCompleter, TokensWithLogprobs
    from tinker_cookbook.rl.message_env import EnvFromMessageEnv, MessageEnv, MessageStepResult
    from tinker_cookbook.rl.types import Env, EnvGroupBuilder, RLDataset
except ImportError as e:  # pragma: no cover - depends on the extra
    raise missing_dependency(e.name or "tinker_cookbook", "tinker") from e

__all__ = [
    "BackendTokenCompleter",
    "GemgymEnvGroupBuilder",
    "GemgymMessageEnv",
    "GemgymRLDataset",
]


class GemgymMessageEnv(MessageEnv):  # type: ignore[misc]
    """One gemgym episode at the message level (see the module docstring)."""

    def __init__(
        self,
        episode: TextEpisode,
        *,
        system_prompt: str | None = None,
        max_turns: int | None = None,
    ) -> None:
        self.episode = episode
        self.system_prompt = system_prompt
        self.max_turns = max_turns
        self.messages: list[dict[str, Any]] = []
        self.example_id = f"{episode.seed}"

    async def initial_observation(self) -> list[dict[str, Any]]:
        head = (
            []
            if self.system_prompt is None
            else [{"role": "system", "content": self.system_prompt}]
        )
        self.messages = [*head, {"role": "user", "content": await self.episode.areset()}]
        return list(self.messages)

    async def step(self, message: dict[str, Any]) -> Any:
        text = renderers.get_text_content(message)
        outcome = await self.episode.astep(text)
        self.messages.append({"role": "assistant", "content": text})
        done = outcome.done or self.episode.turn_cap_reached(self.max_turns)
        if not done:
            self.messages.append({"role": "user", "content": outcome.observation})
        else:
            self.episode.close()
        metrics = (
            {"success": float(self.episode.success), "gemgym_failed": float(self.episode.failed)}
            if done
            else {}
        )
        return MessageStepResult(
            reward=outcome.reward,
            episode_done=done,
            next_messages=list(self.messages),
            metrics=metrics,
        )


class GemgymEnvGroupBuilder(EnvGroupBuilder):  # type: ignore[misc]
    """``group_size`` episodes of ``env`` (a registered id) from ``seed``.

    Args:
        env: a registered env id or a :data:`~gemgym.integrations.common.PRESETS` name (kept
            as a string so the builder pickles).
        seed: the reset seed every env of the group shares.
        group_size: envs per group.
        renderer_name: a cookbook renderer (``"qwen3"``, ``"llama3"``, ``"role_colon"``, ...).
        tokenizer: the tokenizer's name or path (loaded in ``make_envs``), or a loaded one.
        max_turns: cut episodes after this many turns.
        system_prompt: a system message before the first observation.
        env_kwargs: keyword arguments for ``gemgym.make``.
        message_env_kwargs: keyword arguments for the cookbook's ``EnvFromMessageEnv``
            (``failed_parse_reward``, ``max_trajectory_tokens``, ...).
    """

    def __init__(
        self,
        env: str,
        seed: int,
        group_size: int,
        renderer_name: str,
        tokenizer: Any,
        *,
        max_turns: int | None = 8,
        system_prompt: str | None = None,
        env_kwargs: dict[str, Any] | None = None,
        message_env_kwargs: dict[str, Any] | None = None,
    ) -> None:
        if group_size < 1:
            raise ConfigError(f"group_size must be >= 1, got {group_size}")
        self.env = env
        self.seed = seed
        self.group_size = group_size
        self.renderer_name = renderer_name
        self.tokenizer = tokenizer
        self.max_turns = max_turns
        self.system_prompt = system_prompt
        self.env_kwargs = dict(env_kwargs or {})
        self.message_env_kwargs = dict(message_env_kwargs or {})

    async def make_envs(self) -> Sequence[Env]:
        import gemgym

        tokenizer = self.tokenizer
        if isinstance(tokenizer, str):
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(tokenizer)
        renderer = renderers.get_renderer(self.renderer_name, tokenizer)

        def make() -> Any:
            return gemgym.make(self.env, **self.env_kwargs)

        factory = preset_envs(self.env)[self.env] if self.env in PRESETS else make
        return [
            EnvFromMessageEnv(
                renderer,
                GemgymMessageEnv(
                    TextEpisode(factory, seed=self.seed),
                    system_prompt=self.system_prompt,
                    max_turns=self.max_turns,
                ),
                **self.message_env_kwargs,
            )
            for _ in range(self.group_size)
        ]

    def logging_tags(self) -> list[str]:
        return [self.env]


class GemgymRLDataset(RLDataset):  # type: ignore[misc]
    """Batches of :class:`GemgymEnvGroupBuilder`, cycling through ``envs``.

    Args:
        envs: registered env ids or preset names (one, or ``{name: id}`` to mix; factories do
            not pickle, so names only).
        batch_size: groups per batch.
        num_batches: batches in the dataset.
        group_size, renderer_name, tokenizer, max_turns, system_prompt: as for the builder.
        seed: the first group's seed.
    """

    def __init__(
        self,
        envs: str | dict[str, str],
        *,
        batch_size: int,
        num_batches: int,
        group_size: int,
        renderer_name: str,
        tokenizer: Any,
        max_turns: int | None = 8,
        system_prompt: str | None = None,
        seed: int = 0,
    ) -> None:
        ids = {envs: envs} if isinstance(envs, str) else envs
        if not isinstance(ids, dict) or not all(isinstance(v, str) for v in ids.values()):
            raise ConfigError("the Tinker dataset takes env ids (builders must pickle)")
        if batch_size < 1 or num_batches < 1:
            raise ConfigError("batch_size and num_batches must be >= 1")
        factories: dict[str, EnvFactory] = {name: env_factory(v) for name, v in ids.items()}
        rows = task_rows(factories, batch_size * num_batches, seed=seed, with_prompt=False)
        self.builders = [
            GemgymEnvGroupBuilder(
                ids[r["env"]],
                int(r["seed"]),
                group_size,
                renderer_name,
                tokenizer,
                max_turns=max_turns,
                system_prompt=system_prompt,
            )
            for r in rows
        ]
        self.batch_size = batch_size

    def get_batch(self, index: int) -> Sequence[GemgymEnvGroupBuilder]:
        if not 0 <= index < len(self):
            raise IndexError(f"batch {index} of {len(self)}")
        return self.builders[index * self.batch_size : (index + 1) * self.batch_size]

    def __len__(self) -> int:
        return len(self.builders) // self.batch_size


class BackendTokenCompleter(TokenCompleter):  # type: ignore[misc]
    """A cookbook ``TokenCompleter`` sampling from any :class:`gemgym.llm.LLMBackend` that takes
    token ids (the transformers backend, vLLM, SGLang): cookbook rollouts without the Tinker
    service, e.g. to evaluate, or to test on a CPU.

    Stop conditions given as strings become the request's stop strings; given as token ids,
    they must be among the backend's end-of-turn ids (the transformers backend stops on the
    model's EOS ids).
    """

    def __init__(self, backend: Any, sampling: Any = None) -> None:
        from gemgym.llm.backend import SamplingParams

        if not backend.capabilities.token_ids:
            raise ConfigError("the backend must take and return token ids (not a text server)")
        self.backend = backend
        self.sampling = sampling or SamplingParams()

    async def __call__(self, model_input: Any, stop: Any, *, max_tokens: int | None = None) -> Any:
        from gemgym.llm.backend import GenerationRequest

        strings = tuple(s for s in stop if isinstance(s, str))
        params = self.sampling.replace(
            stop=strings or self.sampling.stop,
            max_tokens=min(self.sampling.max_tokens, max_tokens or self.sampling.max_tokens),
        )
        gen = await self.backend.generate(GenerationRequest(model_input.to_ints(), (), params))
        if gen.finish_reason == "error":
            raise ConfigError(f"the backend failed: {gen.error}")
        reason = "length" if gen.finish_reason == "length" else "stop"
        return TokensWithLogprobs(list(gen.token_ids), gen.logprobs, stop_reason=reason)
