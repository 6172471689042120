"""TRL: multi-turn GRPO on any gemgym env, through ``GRPOTrainer``'s ``rollout_func``.

:class:`GemgymGRPOTrainer` is a ``trl.GRPOTrainer`` whose rollouts are whole gemgym episodes
played by the model being trained (:mod:`gemgym.llm`: the prompt rendered by the model's chat
template, each sampled action kept verbatim, every observation and tool output rendered by the
template and masked out of the loss), and whose reward is the env's own:

    from trl import GRPOConfig
    from gemgym.integrations.trl import GemgymGRPOTrainer

    trainer = GemgymGRPOTrainer(
        model="path/to/model",                      # any local HF causal LM with a chat template
        envs={"guess": "game:GuessTheNumber-v0-easy", "sudoku": "game:Sudoku-v0-easy"},
        args=GRPOConfig(output_dir="out", num_generations=4, max_steps=3),
        num_tasks=64,                               # dataset rows, mixing the envs round-robin
        advantage="rebn", gamma=0.9,                # or "grpo" (TRL's own), "rebn_group", ...
    )
    trainer.train()

How it plugs in (TRL 1.16, ``rollout_func`` is experimental upstream):

* the dataset is :func:`gemgym.integrations.common.task_rows`: ``{"prompt", "env", "seed"}``;
  TRL repeats each row ``num_generations`` times, so a GRPO group is ``num_generations``
  episodes of one env from one seed;
* ``rollout_func`` plays those episodes (many in flight, one batched forward pass per token on
  the transformers backend) and returns ``prompt_ids`` (the first turn's prompt),
  ``completion_ids`` (every action and every observation after it), ``logprobs`` (sampled
  log-probs of the actions, 0 on env tokens), ``env_mask`` (1 on sampled tokens only; TRL
  multiplies it into the loss mask) and the per-episode ``env_return``;
* the reward function :func:`env_return` hands TRL the env's return; with ``advantage="grpo"``
  TRL's group normalisation makes the advantage, with a gemgym estimator (``"rebn"``,
  ``"rebn_group"``, ``"reinforce"``, ``"drgrpo"``, ``"rloo"``) the trainer replaces it by
  per-token advantages: each turn's (discounted, ``gamma``) return estimate on that turn's
  action tokens (:func:`gemgym.llm.token_advantages`), which the GRPO loss takes as ``(B, T)``.
  ReBN normalises over the process's batch.

Needs ``pip install "gemgym[trl]"`` (TRL, accelerate, transformers).
"""

from __future__ import annotations

import asyncio
import random
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gemgym.episodes.outcomes import check_max_turns, derive_seed
from gemgym.errors import ConfigError, missing_dependency
from gemgym.integrations.common import (
    EnvsArg,
    TextEpisode,
    completion_view,
    resolve_envs,
    task_rows,
)
from gemgym.llm.record import TokenEpisode

try:
    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer
except ImportError as e:  # pragma: no cover - depends on the extra
    raise missing_dependency(e.name or "trl", "trl") from e

__all__ = [
    "ADVANTAGES",
    "GemgymGRPOTrainer",
    "NoLearningSignalWarning",
    "constant_groups",
    "env_return",
    "episodes_to_rollout",
    "warm_start",
]

ADVANTAGES: tuple[str, ...] = ("grpo", "rebn", "rebn_group", "reinforce", "drgrpo", "rloo")
"""``"grpo"``: TRL's own group-normalised episode return; the others: gemgym's estimators
(:mod:`gemgym.rl.advantages`) over turns, broadcast onto the action tokens."""


class NoLearningSignalWarning(UserWarning):
    """Every episode of each group of a batch got the same return: every advantage is 0, so the
    update has no loss and no gradient (typically: no episode wrote a readable action)."""


def constant_groups(returns: Sequence[float], groups: Sequence[Any]) -> bool:
    """Whether every group (episodes with the same key in ``groups``) has one return for all
    its episodes: then every group-normalised advantage (GRPO, RLOO, Dr. GRPO) is 0."""
    seen: dict[Any, float] = {}
    return all(seen.setdefault(key, r) == r for key, r in zip(groups, returns, strict=True))


def episodes_to_rollout(
    episodes: Sequence[TokenEpisode],
    eos_token_id: int,
    *,
    keep_errors: bool = False,
    groups: Sequence[Any] | None = None,
) -> dict[str, Any]:
    """The ``rollout_func`` output for ``episodes``: one row per episode.

    ``completion_ids`` is everything after the first prompt, except the context the template
    adds after the last action (no model conditions on it); an episode that produced no token
    (its first request failed) gets one masked ``eos_token_id`` so TRL's tensors stay
    rectangular, and return 0.

    A failed episode (``finish_reason == "error"``: its env or model call broke) is left out of
    training unless ``keep_errors``: its ``env_mask`` is all 0 (no loss on its tokens) and its
    ``env_return`` is the mean return of the other episodes of its group (``groups``: one key
    per episode, e.g. ``(env, seed)``), so it neither earns an advantage nor shifts its group's.
    """
    out: dict[str, list[Any]] = {
        "prompt_ids": [],
        "completion_ids": [],
        "logprobs": [],
        "env_mask": [],
        "env_return": [],
        "gemgym_finish": [],
    }
    keys = list(groups) if groups is not None else list(range(len(episodes)))
    if len(keys) != len(episodes):
        raise ConfigError(f"{len(keys)} group keys for {len(episodes)} episodes")
    drop = [ep.failed and not keep_errors for ep in episodes]
    kept: dict[Any, list[float]] = {}
    for key, ep, dropped in zip(keys, episodes, drop, strict=True):
        if not dropped:
            kept.setdefault(key, []).append(ep.total_return)
    for key, ep, dropped in zip(keys, episodes, drop, strict=True):
        view = completion_view(ep, eos_token_id)
        out["prompt_ids"].append(view.prompt_ids)
        out["completion_ids"].append(view.response_ids)
        out["logprobs"].append(view.logprobs)
        if dropped:
            others = kept.get(key, [])
            out["env_mask"].append([0] * len(view.mask))
            out["env_return"].append(sum(others) / len(others) if others else 0.0)
        else:
            out["env_mask"].append(view.mask)
            out["env_return"].append(ep.total_return)
        out["gemgym_finish"].append(ep.finish_reason)
    return out


def env_return(completions: Sequence[Any], env_return: Sequence[float], **_: Any) -> list[float]:
    """TRL reward function: the env's return of each episode (from ``rollout_func``)."""
    return [float(r) for r in env_return]


class GemgymGRPOTrainer(GRPOTrainer):  # type: ignore[misc]
    """``trl.GRPOTrainer`` training on gemgym episodes (see the module docstring).

    Args:
        model: a model path or a loaded ``PreTrainedModel`` (as for ``GRPOTrainer``).
        envs: one env id, a factory, or ``{name: id or factory}`` to mix envs (each dataset row
            names its env).
        args: the ``GRPOConfig``.
        num_tasks: dataset rows to make when ``train_dataset`` is not given.
        task_seed: the first row's seed.
        train_dataset: rows with ``"prompt"``, ``"env"`` and ``"seed"`` columns (default:
            :func:`~gemgym.integrations.common.task_rows`).
        max_turns: the most turns an episode may take (then it is cut as truncated).
        system_prompt: a system message before each first observation.
        advantage: one of :data:`ADVANTAGES`.
        gamma: the discount of the turn-level estimators.
        sampling: overrides of :class:`gemgym.llm.SamplingParams` (default: the config's
            ``temperature``, ``top_p`` and ``max_completion_length`` per turn).
        episode_log: a list the trainer appends every played :class:`TokenEpisode` to.
        keep_errors: train on failed episodes too (``finish_reason == "error"``: their env or
            model call broke) with their partial return; by default they are left out (no loss
            on their tokens, no advantage; see :func:`episodes_to_rollout`).
        **kwargs: passed to ``GRPOTrainer`` (``processing_class``, ``callbacks``, ...).
    """

    def __init__(
        self,
        model: Any,
        envs: EnvsArg,
        args: GRPOConfig,
        *,
        num_tasks: int = 256,
        task_seed: int = 0,
        train_dataset: Any = None,
        max_turns: int = 8,
        system_prompt: str | None = None,
        advantage: str = "grpo",
        gamma: float = 1.0,
        sampling: Mapping[str, Any] | None = None,
        episode_log: list[TokenEpisode] | None = None,
        keep_errors: bool = False,
        **kwargs: Any,
    ) -> None:
        if advantage not in ADVANTAGES:
            raise ConfigError(f"unknown advantage {advantage!r}; choose one of {list(ADVANTAGES)}")
        if not 0.0 <= gamma <= 1.0:
            raise ConfigError(f"gamma must be in [0, 1], got {gamma}")
        check_max_turns(max_turns)
        for key in ("rollout_func", "reward_funcs", "environment_factory"):
            if key in kwargs:
                raise ConfigError(f"{key} is set by GemgymGRPOTrainer; the env owns the rewards")
        self.gemgym_envs = resolve_envs(envs)
        if train_dataset is None:
            train_dataset = Dataset.from_list(
                task_rows(self.gemgym_envs, num_tasks, seed=task_seed)
            )
        self.gemgym_max_turns = max_turns
        self.gemgym_system_prompt = system_prompt
        self.gemgym_advantage = advantage
        self.gemgym_gamma = gamma
        self.gemgym_sampling = dict(sampling or {})
        self.gemgym_episodes: list[TokenEpisode] = []
        self.gemgym_episode_log = episode_log
        self.gemgym_keep_errors = keep_errors
        self.gemgym_no_signal_steps = 0
        """Updates whose batch had one return per group (no learning signal)."""
        self._gemgym_rows: list[dict[str, Any]] = []
        super().__init__(
            model=model,
            reward_funcs=[env_return],
            args=args,
            train_dataset=train_dataset,
            rollout_func=_rollout_func,
            **kwargs,
        )

    # -- rollouts ----------------------------------------------------------------------------
    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        self._gemgym_rows = inputs
        output: dict[str, Any] = super()._generate_and_score_completions(inputs)
        if self.gemgym_advantage != "grpo":
            output["advantages"] = self._token_advantages(output["completion_ids"])
        return output

    def _token_advantages(self, completion_ids: torch.Tensor) -> torch.Tensor:
        """Per-token advantages ``(B, T)`` aligned with the padded ``completion_ids``."""
        from gemgym.llm.record import token_advantages

        episodes = self.gemgym_episodes
        rows = self._gemgym_rows
        groups = [(str(r["env"]), int(r["seed"])) for r in rows]
        # failed episodes are left out of the estimate and get no advantage (keep_errors: kept)
        kept = [i for i, ep in enumerate(episodes) if self.gemgym_keep_errors or not ep.failed]
        if not kept:
            return torch.zeros(completion_ids.shape, dtype=torch.float32).to(completion_ids.device)
        advs = token_advantages(
            [episodes[i] for i in kept],
            self.gemgym_advantage,
            gamma=self.gemgym_gamma,
            group_ids=[groups[i] for i in kept],
        )
        out = torch.zeros(completion_ids.shape, dtype=torch.float32)
        for i, a in zip(kept, advs, strict=True):
            ep = episodes[i]
            tail = a[len(ep.prompt_ids) :]
            width = min(len(tail), out.shape[1])
            out[i, :width] = torch.as_tensor(tail[:width], dtype=torch.float32)
        return out.to(completion_ids.device)

    def play(self, rows: Sequence[Mapping[str, Any]]) -> list[TokenEpisode]:
        """Play one episode per row with the current weights, from the row's env and seed.

        Rows that share ``(env, seed)`` (TRL's group) run as one :func:`arollout_tokens` call
        on a vector env of their own; every call runs at once on one transformers backend,
        which batches whatever is in flight.
        """
        from gemgym.llm.backend import SamplingParams
        from gemgym.llm.rollout import arollout_tokens
        from gemgym.llm.transformers_backend import TransformersBackend
        from gemgym.vector import make_vector_env

        tokenizer = _tokenizer(self)
        settings: dict[str, Any] = {
            "temperature": self.args.temperature,
            "top_p": self.args.top_p,
            "max_tokens": self.args.max_completion_length,
            **self.gemgym_sampling,
        }
        sampling = SamplingParams(**settings)
        # one sampling seed per group and step: episodes differ across groups and updates
        step_seed = derive_seed(int(self.args.seed), "stream", "step", int(self.state.global_step))
        groups: dict[tuple[str, int], list[int]] = {}
        for i, r in enumerate(rows):
            groups.setdefault((str(r["env"]), int(r["seed"])), []).append(i)
        model = self.accelerator.unwrap_model(self.model)
        was_training = model.training  # the backend puts the model in eval mode
        backend = TransformersBackend(
            model, tokenizer, device=str(self.accelerator.device), name=str(model.name_or_path)
        )

        async def one(k: int, name: str, seed: int, n: int) -> list[TokenEpisode]:
            venv = make_vector_env(env_fns=[self.gemgym_envs[name]] * n, autoreset_mode="disabled")
            try:
                return await arollout_tokens(
                    venv,
                    backend,
                    tokenizer,
                    episodes=n,
                    seed=seed,
                    group_size=n,
                    sampling=sampling.replace(seed=derive_seed(step_seed, "group", k)),
                    system_prompt=self.gemgym_system_prompt,
                    max_turns=self.gemgym_max_turns,
                )
            finally:
                venv.close()

        async def run() -> list[list[TokenEpisode]]:
            try:
                return await asyncio.gather(
                    *(
                        one(k, name, seed, len(idx))
                        for k, ((name, seed), idx) in enumerate(groups.items())
                    )
                )
            finally:
                await backend.aclose()

        try:
            played = asyncio.run(run())
        finally:
            model.train(was_training)
        out: list[TokenEpisode | None] = [None] * len(rows)
        for (name, _), idx, eps in zip(groups, groups.values(), played, strict=True):
            for i, ep in zip(idx, eps, strict=True):
                ep.env_id, ep.index = name, i
                out[i] = ep
        return [ep for ep in out if ep is not None]


def warm_start(
    model: Any,
    envs: EnvsArg,
    reply: Callable[[dict[str, Any], random.Random], str],
    output_dir: str,
    *,
    num_tasks: int = 64,
    steps: int = 40,
    learning_rate: float = 5e-2,
    max_history: int = 2,
    seed: int = 0,
    system_prompt: str | None = None,
    **config: Any,
) -> str:
    """Teach a model the envs' action format with ``trl.SFTTrainer``; returns the saved path.

    Each example is a task row's conversation (the first observation, then up to
    ``max_history`` earlier turns played with ``reply``; the prompt, no loss) answered by
    ``reply(row, rng)`` (the completion, trained on; e.g.
    ``"\\boxed{7}"`` for a random guess). A random-initialised model never writes a valid action,
    so every episode would end with the same format penalty and GRPO would see no signal; a few
    SFT steps on the format fix that. ``config`` goes to ``trl.SFTConfig``.
    """
    from trl import SFTConfig, SFTTrainer

    if max_history < 0:
        raise ConfigError(f"max_history must be >= 0, got {max_history}")
    rng = random.Random(seed)
    head = [] if system_prompt is None else [{"role": "system", "content": system_prompt}]
    factories = resolve_envs(envs)
    examples = []
    for r in task_rows(factories, num_tasks, seed=seed, with_prompt=False):
        # a conversation of 0..max_history earlier turns (replies drawn the same way), so the
        # model learns the format at every turn, not only the first
        episode = TextEpisode(factories[r["env"]], seed=int(r["seed"]))
        messages = [*head, {"role": "user", "content": episode.reset()}]
        for _ in range(rng.randint(0, max_history)):
            action = reply(r, rng)
            outcome = episode.step(action)
            if outcome.done:
                break
            messages += [
                {"role": "assistant", "content": action},
                {"role": "user", "content": outcome.observation},
            ]
        episode.close()
        completion = [{"role": "assistant", "content": reply(r, rng)}]
        examples.append({"prompt": messages, "completion": completion})
    data = Dataset.from_list(examples)
    args = SFTConfig(
        output_dir=output_dir,
        max_steps=steps,
        learning_rate=learning_rate,
        per_device_train_batch_size=config.pop("per_device_train_batch_size", 8),
        logging_steps=config.pop("logging_steps", steps),
        save_strategy="no",
        report_to=[],
        seed=seed,
        **config,
    )
    trainer = SFTTrainer(model=model, args=args, train_dataset=data)
    trainer.train()
    trainer.save_model(output_dir)
    tokenizer = trainer.processing_class
    if tokenizer is not None:
        tokenizer.save_pretrained(output_dir)
    return output_dir


def _rollout_func(prompts: list[Any], trainer: GemgymGRPOTrainer) -> dict[str, Any]:
    """TRL's ``rollout_func``: the rows come from the trainer (TRL passes only the prompts)."""
    rows = trainer._gemgym_rows
    if len(rows) != len(prompts):
        raise ConfigError(f"{len(prompts)} prompts for {len(rows)} dataset rows")
    episodes = trainer.play(rows)
    trainer.gemgym_episodes = episodes
    if trainer.gemgym_episode_log is not None:
        trainer.gemgym_episode_log.extend(episodes)
    groups = [(str(r["env"]), int(r["seed"])) for r in rows]
    out = episodes_to_rollout(
        episodes,
        int(_tokenizer(trainer).eos_token_id),
        keep_errors=trainer.gemgym_keep_errors,
        groups=groups,
    )
    _check_signal(trainer, out["env_return"], groups)
    return out


def _check_signal(trainer: GemgymGRPOTrainer, returns: Sequence[float], groups: list[Any]) -> None:
    """Count (and on the first, warn about) a batch from which the estimator gets no signal:
    one return per group (group estimators), or one return for the whole batch."""
    per_group = trainer.gemgym_advantage in ("grpo", "rebn_group", "drgrpo", "rloo")
    flat = constant_groups(returns, groups if per_group else [0] * len(returns))
    if not flat or not returns:
        return
    trainer.gemgym_no_signal_steps += 1
    if trainer.gemgym_no_signal_steps > 1:
        return
    values = sorted({round(float(r), 4) for r in returns})
    where = "of each group" if per_group else "of the batch"
    hint = (
        " All are negative: most likely no episode wrote an action the env could read (a "
        "format error); teach the format first (warm_start, or an SFT on recorded episodes)."
        if max(values) < 0
        else ""
    )
    warnings.warn(
        f"step {int(trainer.state.global_step) + 1}: every episode {where} got the same return "
        f"({', '.join(map(str, values))}), so every {trainer.gemgym_advantage} advantage is 0: "
        f"no loss, no gradient, nothing learned.{hint} trainer.gemgym_no_signal_steps counts "
        "such updates.",
        NoLearningSignalWarning,
        stacklevel=2,
    )


def _tokenizer(trainer: Any) -> Any:
    """The trainer's tokenizer (a processor's, for multimodal models)."""
    processing: Any = trainer.processing_class
    return getattr(processing, "tokenizer", processing)
