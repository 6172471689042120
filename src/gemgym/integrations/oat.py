"""Oat (0.2.4): an actor that steps gemgym vector envs, as the GEM paper's main example does.

Oat splits training into actors (a vLLM engine each, collecting experience) and learners
(DeepSpeed). Its multi-turn PPO (``oat.algorithms.ppo_multiturn``) asks the actor for
``collect_experience()``: finished episodes as lists of Oat ``Transition`` s, one per turn.

* :class:`GemgymOatActor` (an Oat ``PPOMultiTurnActor``) plays gemgym episodes with Oat's own
  vLLM engine through :class:`gemgym.llm.vllm_engine.VLLMEngineBackend` (token ids in, sampled
  ids and log-probs out, every turn of every env in flight batched into one ``generate``) and
  the token-level rollout engine (:func:`gemgym.llm.arollout_tokens`): each turn's prompt is
  the whole conversation so far rendered by the model's chat template, its response the sampled
  ids verbatim, its reward the env's. It keeps one vector env of ``num_envs`` copies per env
  name, and each collection plays a round of every name until ``rollout_batch_size_per_device``
  transitions are in, so one run **mixes envs** (``env="guess,math"``).
* :class:`GemgymOatLearner` (an Oat ``PPOMultiTurnLearner``) needs no prompt dataset (the
  envs make the prompts) and evaluates by asking each actor to play ``eval_episodes`` episodes
  per env from fixed seeds (:meth:`GemgymOatActor.evaluate_envs`). Oat's multi-turn learner
  computes each turn's discounted return (``gamma``) as its advantage (GAE with a critic);
  ``whiten_adv`` normalises them over the batch, which is ReBN.
* :class:`GemgymOatArgs` adds the env settings to Oat's ``PPOArgs`` (so to its command line).

Launch as any Oat program (``examples/oat/train.py``)::

    program, resources = oat.interface.get_program(args, GemgymOatLearner, GemgymOatActor)
    launchpad.launch(program, launch_type="local_mp", local_resources=resources)

Installing: Oat 0.2.4 declares Python < 3.11 and gemgym needs 3.11, so install it with
``pip install --no-deps --ignore-requires-python oat-llm==0.2.4`` and its runtime modules
(``docs/integrations.md`` lists them). Oat's launcher, ``dm-launchpad``, has no build for
Python 3.11: this module and its tests run there (launchpad is imported, never called, by the
modules it uses), a whole Oat program does not yet.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from gemgym.episodes.outcomes import check_max_turns, derive_seed
from gemgym.errors import ConfigError, DependencyNotInstalled, GemGymError, missing_dependency
from gemgym.integrations.common import EnvFactory, env_names, named_envs

try:
    import numpy as np
    import torch
    from oat.algorithms.ppo import PPOArgs
    from oat.algorithms.ppo_multiturn import PPOMultiTurnActor, PPOMultiTurnLearner
    from oat.types import Transition
except ImportError as e:  # pragma: no cover - depends on the extra
    if e.name in (None, "oat") or (e.name or "").startswith("oat."):
        raise DependencyNotInstalled(
            "Oat is not installed. It declares Python < 3.11, so install it with: "
            'pip install "gemgym[oat]" && pip install --no-deps --ignore-requires-python '
            "oat-llm==0.2.4 (see docs/integrations.md)"
        ) from e
    raise missing_dependency(e.name, "oat") from e

if TYPE_CHECKING:
    from gemgym.llm.record import TokenEpisode

__all__ = [
    "GemgymOatActor",
    "GemgymOatArgs",
    "GemgymOatLearner",
    "episode_metrics",
    "oat_transitions",
]

log = logging.getLogger(__name__)

EVAL_SEED = 1_000_000_000
"""Evaluation episodes play from seeds ``EVAL_SEED + i``: the same states at every evaluation,
far from the training seeds."""


@dataclass
class GemgymOatArgs(PPOArgs):  # type: ignore[misc]
    """Oat's PPO arguments plus the envs (each field is also a command-line flag)."""

    env: str = "guess"
    """Comma-separated presets (guess, math, qa) or registered env ids; a run mixes them."""
    num_envs: int = 8
    """Episodes in flight per env name on each actor (the vector env's size)."""
    max_turns: int = 8
    """The most turns of an episode (then it ends as truncated)."""
    group_size: int = 1
    """Episodes played from each initial state (for group baselines)."""
    system_prompt: Optional[str] = None  # noqa: UP045 - tyro reads this annotation
    """A system message before the first observation."""
    vector_backend: str = "sync"
    """How each actor steps its envs: sync, thread or process."""
    keep_errors: bool = False
    """Train on failed episodes too (their env or model call broke; by default they are left
    out, and counted in ``actor/gemgym_failed_episodes``)."""
    eval_env: str = ""
    """Envs to evaluate on (default: the training envs)."""
    eval_episodes: int = 16
    """Evaluation episodes per env and actor, from fixed seeds."""


def oat_transitions(episode: TokenEpisode, tokenizer: Any) -> list[Any]:
    """One Oat ``Transition`` per turn of a token episode.

    A turn's ``prompt_ids`` is everything the model was conditioned on (the first prompt, every
    earlier action and the context after it), ``response_ids`` and ``response_logprobs`` what
    it sampled, verbatim; ``rewards`` the env's reward for the turn; ``done`` marks the
    episode's last turn. ``action_is_formatted`` is false where the env reported a format
    error; ``response_is_truncated`` where the turn hit ``max_tokens``.
    """
    out: list[Any] = []
    context = list(episode.prompt_ids)
    shown = str(episode.prompt_messages[-1]["content"]) if episode.prompt_messages else ""
    last = len(episode.turns) - 1
    for k, turn in enumerate(episode.turns):
        logprobs = list(turn.logprobs) if turn.logprobs is not None else []
        out.append(
            Transition(
                obs=shown,
                action=turn.action_text,
                rewards=float(turn.reward),
                done=k == last and episode.finish_reason != "cut",
                prompt=tokenizer.decode(context),
                prompt_ids=list(context),
                response=turn.action_text,
                response_ids=list(turn.action_ids),
                response_logprobs=logprobs,
                response_is_truncated=turn.finish_reason == "length",
                action_is_formatted=not turn.info.get("format_error", False),
                info={},
            )
        )
        context += turn.action_ids
        context += turn.next_ids
        shown = turn.next_observation
    return out


METRICS = ("return", "success", "turns", "episodes")
"""What :func:`episode_metrics` reports per env."""


def episode_metrics(episodes: Sequence[TokenEpisode], prefix: str) -> dict[str, float]:
    """Mean return, success rate and turns, and the count, of ``episodes`` under the keys
    ``prefix + name`` for each name of :data:`METRICS` (zeros for no episode)."""
    n = len(episodes)
    values = (
        (
            float(np.mean([e.total_return for e in episodes])),
            float(np.mean([e.success for e in episodes])),
            float(np.mean([len(e.turns) for e in episodes])),
        )
        if n
        else (0.0, 0.0, 0.0)
    )
    return {prefix + m: v for m, v in zip(METRICS, (*values, float(n)), strict=True)}


class GemgymOatActor(PPOMultiTurnActor):  # type: ignore[misc]
    """Oat's multi-turn actor over gemgym envs (see the module docstring)."""

    args: GemgymOatArgs

    def init(self, actor_id: int, save_path: str) -> None:
        """Oat's init (its vLLM engine, tokenizer and sampling settings), then the envs."""
        super().init(actor_id, save_path)
        self.oracle = None  # the envs give the rewards
        args = self.args
        for name in ("num_envs", "group_size", "eval_episodes"):
            if int(getattr(args, name)) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(args, name)}")
        check_max_turns(args.max_turns)
        self.train_envs: dict[str, EnvFactory] = named_envs(args.env)
        self.eval_env_factories: dict[str, EnvFactory] = named_envs(args.eval_env or args.env)
        self._venvs: dict[tuple[str, str], Any] = {}
        self.backend = self.make_backend()
        # a separate stream of reset seeds per actor: actors never replay each other's states
        self._next_seed = derive_seed(int(args.seed), "stream", "actor", int(actor_id)) or 0

    def make_backend(self) -> Any:
        """The backend episodes sample from: Oat's vLLM engine (LoRA adapters included)."""
        from gemgym.llm.vllm_engine import VLLMEngineBackend

        extra = {"top_k": self.args.top_k} if self.args.top_k and self.args.top_k > 0 else {}
        return VLLMEngineBackend(
            self.llm, name=self.args.pretrain, lora_request=self._lora_request, sampling_extra=extra
        )

    def _lora_request(self) -> Any:
        if not (getattr(self, "use_lora_req", False) and getattr(self, "lora_path", None)):
            return None
        import os

        from vllm.lora.request import LoRARequest

        path = str(self.lora_path)
        return LoRARequest(os.path.basename(path), hash(path), path)

    def _venv(self, kind: str, name: str, factory: EnvFactory) -> Any:
        key = (kind, name)
        if key not in self._venvs:
            from gemgym.vector import make_vector_env

            self._venvs[key] = make_vector_env(
                env_fns=[factory] * self.args.num_envs,
                autoreset_mode="disabled",
                backend=self.args.vector_backend,
            )
        return self._venvs[key]

    def _sampling(self, evaluation: bool) -> Any:
        from gemgym.llm.backend import SamplingParams

        a = self.args
        return SamplingParams(
            temperature=a.eval_temperature if evaluation else a.temperature,
            top_p=a.eval_top_p if evaluation else a.top_p,
            max_tokens=a.eval_generate_max_length if evaluation else a.generate_max_length,
            max_context=a.max_model_len,
        )

    def play(
        self, kind: str, envs: dict[str, EnvFactory], episodes: int, seed: int, evaluation: bool
    ) -> dict[str, list[TokenEpisode]]:
        """``episodes`` episodes of every env in ``envs``, all in flight together; each
        episode's ``env_id`` is its env's name in ``envs``."""
        from gemgym.llm.rollout import arollout_tokens

        sampling = self._sampling(evaluation)

        async def run() -> list[list[TokenEpisode]]:
            return await asyncio.gather(
                *(
                    arollout_tokens(
                        self._venv(kind, name, factory),
                        self.backend,
                        self.tokenizer,
                        episodes=episodes,
                        seed=seed,
                        group_size=1 if evaluation else self.args.group_size,
                        sampling=sampling,
                        system_prompt=self.args.system_prompt,
                        max_turns=self.args.max_turns,
                    )
                    for name, factory in envs.items()
                )
            )

        played = dict(zip(envs, asyncio.run(run()), strict=True))
        for name, eps in played.items():
            for ep in eps:
                ep.env_id = name  # the name the run gave the env (a preset or an env id)
        return played

    def collect_experience(self) -> tuple[list[list[Any]], dict[str, Any]]:
        """Rounds of ``num_envs`` episodes per env until ``rollout_batch_size_per_device``
        transitions are in; returns Oat's episodes and the collection's metrics (per env:
        ``actor/<env>/return``, ``success``, ``turns``, ``episodes``). The token episodes
        they came from stay in :attr:`last_episodes` (same order), for dumps and checks."""
        args = self.args
        target = int(args.rollout_batch_size_per_device)
        t0 = time.perf_counter()
        finished: list[list[Any]] = []
        per_env: dict[str, list[TokenEpisode]] = {name: [] for name in self.train_envs}
        kept: list[TokenEpisode] = []
        failed = 0
        first_error: TokenEpisode | None = None
        while sum(len(ep) for ep in finished) < target:
            seed = self._next_seed
            self._next_seed += math.ceil(args.num_envs / args.group_size)
            played = self.play("train", self.train_envs, args.num_envs, seed, evaluation=False)
            for name, eps in played.items():
                for ep in eps:
                    if not ep.turns or (ep.failed and not args.keep_errors):
                        failed += 1  # a failed episode, or no room for a first turn
                        if ep.failed and first_error is None:
                            first_error = ep
                        continue
                    per_env[name].append(ep)
                    kept.append(ep)
                    finished.append(oat_transitions(ep, self.tokenizer))
            if not finished and failed:
                why = (
                    "no episode had room for a first turn: raise max_model_len or shorten "
                    "the prompts"
                    if first_error is None
                    else f"the first at {first_error.error_stage}: {first_error.error}"
                )
                raise GemGymError(f"every episode of the round failed ({failed}); {why}")
        self.last_episodes = kept
        info: dict[str, Any] = {
            "actor/gemgym_failed_episodes": float(failed),
            "actor/gemgym_collect_s": time.perf_counter() - t0,
        }
        for name, eps in per_env.items():
            info.update(episode_metrics(eps, f"actor/{name}/"))
        return finished, info

    def evaluate_envs(self) -> dict[str, float]:
        """``eval_episodes`` episodes per eval env from seeds ``EVAL_SEED + i`` with the eval
        sampling settings; ``eval/<env>/return``, ``success``, ``turns``, ``episodes``."""
        played = self.play(
            "eval", self.eval_env_factories, self.args.eval_episodes, EVAL_SEED, evaluation=True
        )
        out: dict[str, float] = {}
        for name, eps in played.items():
            out.update(episode_metrics(eps, f"eval/{name}/"))
        return out

    def close_envs(self) -> None:
        """Close every vector env (they are rebuilt on the next use)."""
        venvs, self._venvs = self._venvs, {}
        for venv in venvs.values():
            venv.close()


class _EnvPrompts(torch.utils.data.Dataset[tuple[str, str, str]]):
    """Oat's learner loops over a prompt dataset; with envs the prompts come from the actors,
    so each item is an empty ``(formatted prompt, prompt, reference)``: ``size`` items make
    ``size / rollout_batch_size`` collections."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, idx: int) -> tuple[str, str, str]:
        return "", "", ""


class GemgymOatLearner(PPOMultiTurnLearner):  # type: ignore[misc]
    """Oat's multi-turn PPO learner for gemgym actors (see the module docstring)."""

    def prepare_data(self, strategy: Any, tokenizer: Any) -> None:
        """No prompt dataset: ``max_train`` sets how many transitions to train on."""
        del tokenizer
        self.prompts_dataset = _EnvPrompts(int(self.args.max_train))
        self.eval_prompts_dataset = _EnvPrompts(1)
        self.prompts_dataloader = strategy.setup_dataloader(
            self.prompts_dataset, strategy.args.rollout_batch_size_per_device, shuffle=False
        )
        self.eval_prompts_dataloader = strategy.setup_dataloader(
            self.eval_prompts_dataset, batch_size=1, shuffle=False, drop_last=False
        )

    def evaluate(self, dataloader: Any, steps: int) -> dict[str, float]:
        """Rank 0 has every actor play its eval episodes and averages their metrics over the
        actors; the other ranks get them by broadcast (every rank knows the keys)."""
        del dataloader
        t0 = time.time()
        self._pre_evaluate()
        names = env_names(self.args.eval_env or self.args.env)
        metrics = {f"eval/{n}/{m}": 0.0 for n in names for m in METRICS}
        if self.strategy.is_rank_0():
            self.strategy.print(f"evaluating on gemgym envs at step {steps}")
            futures = [actor.futures.evaluate_envs() for actor in self.actors]
            results = [f.result() for f in futures]
            for key in metrics:
                metrics[key] = float(np.mean([r[key] for r in results]))
        torch.distributed.barrier(group=self._same_actor_group)
        torch.distributed.barrier()
        metrics = {k: float(v) for k, v in self.strategy.broadcast(metrics).items()}
        self._post_evaluate()
        metrics["eval/elapse"] = time.time() - t0
        return metrics
