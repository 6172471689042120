"""``gemgym train --model PATH``: a Hugging Face chat model trained through :mod:`gemgym.llm`.

With ``TrainConfig.model`` set, the trainer's policy is a :class:`ChatPolicy` and its batches
come from a :class:`ChatCollector`:

* sampling: the rollout engine (:func:`gemgym.llm.rollout.arollout_tokens`) plays every
  episode of a batch at once over the collector's vector env, with a
  :class:`~gemgym.llm.transformers_backend.TransformersBackend` on the policy's own model (CPU
  or GPU) and the model's chat template (:class:`~gemgym.llm.render.ChatRenderer`: sampled ids
  verbatim, observations rendered by the template);
* learning: each episode's :class:`~gemgym.llm.record.TokenEpisode` gives the training tokens
  (:meth:`~gemgym.llm.record.TokenEpisode.to_tokenized`: the ids the model sampled and was
  conditioned on, observations and template tokens masked out) and the sampled log-probs (the
  behaviour policy of the clipped surrogate); the trainer's advantages (ReBN, GRPO,
  REINFORCE, ... as configured) weight the action tokens as for the default model;
* ``lora_rank > 0`` trains LoRA adapters (``peft``, on every linear layer) instead of every
  weight: ``pip install "gemgym[peft]"``.

Episodes not sampled by the policy (SFT traces from ``gemgym run --out``) are rendered with the
same chat template, each action's text tokenised and closed with the template's end-of-turn
token (:meth:`ChatPolicy.render`).

At the end of a run :func:`save_hf_model` writes ``OUT/model/`` (``save_pretrained``: the
whole model, LoRA adapters merged in, and its tokenizer), which ``from_pretrained``, vLLM and
``gemgym.llm`` load like the model the run started from.
"""

from __future__ import annotations

import asyncio
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gemgym.errors import ConfigError, missing_dependency
from gemgym.experience import Episode
from gemgym.llm.backend import SamplingParams
from gemgym.llm.record import ObservationRole, TokenEpisode, TokenTurn
from gemgym.llm.render import ChatRenderer
from gemgym.prompting import model_view
from gemgym.rl.collector import Batch, Collector
from gemgym.rl.trainer.codec import HFCodec
from gemgym.rl.trainer.policy import LMPolicy, model_positions

if TYPE_CHECKING:
    import torch

    from gemgym.llm.rollout import RolloutStats
    from gemgym.rl.tokens import TokenizedEpisode
    from gemgym.rl.trainer.config import TrainConfig
    from gemgym.vector import VectorEnv

__all__ = ["ChatCollector", "ChatPolicy", "load_chat_model", "save_hf_model"]


def load_chat_model(config: TrainConfig) -> tuple[Any, HFCodec]:
    """``(model, codec)`` of ``config.model``: the causal LM (with LoRA adapters when
    ``config.lora_rank > 0``) and its tokenizer (:class:`HFCodec`, ``.tokenizer``)."""
    if config.model is None:
        raise ConfigError("load_chat_model needs config.model (a Hugging Face model)")
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as e:  # pragma: no cover - the train extra installs it
        raise missing_dependency("transformers", "train") from e
    tokenizer = AutoTokenizer.from_pretrained(config.model)
    if getattr(tokenizer, "chat_template", None) is None:
        raise ConfigError(
            f"the tokenizer of {config.model} has no chat template; gemgym train --model renders "
            "episodes as chats: use an instruct/chat model (or set tokenizer.chat_template)"
        )
    model: Any = AutoModelForCausalLM.from_pretrained(config.model)
    if config.lora_rank:
        try:
            from peft import LoraConfig, get_peft_model
        except ImportError as e:
            raise missing_dependency("peft", "peft") from e
        lora = LoraConfig(
            r=config.lora_rank,
            lora_alpha=config.lora_alpha,
            target_modules="all-linear",
            lora_dropout=0.0,
            task_type="CAUSAL_LM",
        )
        model = get_peft_model(model, lora)
    return model, HFCodec(tokenizer)


def _text(observation: Any, info: dict[str, Any] | None) -> str:
    """What the model is shown of an observation (as the rollout engine renders it)."""
    view = model_view(observation, info)
    return view if isinstance(view, str) else str(getattr(view, "text", view))


class ChatPolicy(LMPolicy):
    """The policy of ``gemgym train --model`` (see the module docstring).

    Batches are played by :class:`ChatCollector` through the rollout engine. As an
    :class:`LMPolicy` it also acts on episodes in progress (``policy(episodes)``, a plain
    :class:`~gemgym.rl.Collector`), with the same chat rendering (:meth:`context`).

    Args:
        model, codec: from :func:`load_chat_model`.
        system_prompt: a system message before the first observation.
        others: as :class:`LMPolicy` (``temperature``, ``max_new_tokens``, ``seed``,
            ``device``; ``greedy`` decodes with temperature 0).
    """

    def __init__(
        self,
        model: Any,
        codec: HFCodec,
        *,
        max_new_tokens: int = 16,
        temperature: float = 1.0,
        seed: int = 0,
        device: str | torch.device = "cpu",
        system_prompt: str | None = None,
    ) -> None:
        super().__init__(
            model,
            codec,
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            seed=seed,
            device=device,
            kv_cache=False,
        )
        self.tokenizer = codec.tokenizer
        self.system_prompt = system_prompt
        self.renderer = ChatRenderer(self.tokenizer, system_prompt=system_prompt)
        self.max_context = model_positions(model)
        self.stats: RolloutStats | None = None
        """Where the last :meth:`play`'s wall time went (env, rendering, requests)."""
        # the token record of each episode the policy played: id(episode) -> (ref, record)
        self._records: dict[int, tuple[weakref.ref[Episode], TokenEpisode]] = {}

    # -- playing through gemgym.llm ------------------------------------------------------------
    def sampling(self) -> SamplingParams:
        """This batch's sampling settings (temperature 0 when ``greedy``; a fresh base seed
        from the policy's generator, so that a seeded run samples the same batches)."""
        import torch

        seed = int(torch.randint(0, 2**31 - 1, (1,), generator=self.generator).item())
        return SamplingParams(
            temperature=0.0 if self.greedy else self.temperature,
            max_tokens=self.max_new_tokens,
            max_context=self.max_context,
            seed=seed,
        )

    def play(
        self, env: VectorEnv, episodes: int, *, seed: int, group_size: int = 1
    ) -> list[TokenEpisode]:
        """Play ``episodes`` episodes on ``env`` (every slot in flight at once; episode ``k``
        reset with ``seed + k // group_size``) and return their token records."""
        from gemgym.llm.rollout import RolloutStats, arollout_tokens
        from gemgym.llm.transformers_backend import TransformersBackend

        backend = TransformersBackend(
            self.model,
            self.tokenizer,
            device=str(self.device),
            max_batch_size=max(1, env.num_envs),
        )
        stats = RolloutStats()
        sampling = self.sampling()

        async def main() -> list[TokenEpisode]:
            try:
                return await arollout_tokens(
                    env,
                    backend,
                    self.tokenizer,
                    episodes=episodes,
                    seed=seed,
                    group_size=group_size,
                    sampling=sampling,
                    system_prompt=self.system_prompt,
                    stats=stats,
                )
            finally:
                await backend.aclose()

        was_training = self.model.training
        try:
            records = asyncio.run(main())
        finally:
            self.model.train(was_training)  # the backend put it in eval mode
        self.stats = stats
        return records

    def remember(self, record: TokenEpisode) -> Episode:
        """The :class:`~gemgym.experience.Episode` of a token record, which :meth:`tokenize`
        and :meth:`sampled_log_probs` will read from ``record``."""
        ep = record.to_episode()
        if len(self._records) > 10_000:  # forget episodes that no longer exist
            self._records = {k: v for k, v in self._records.items() if v[0]() is not None}
        self._records[id(ep)] = (weakref.ref(ep), record)
        return ep

    def record(self, episode: Episode) -> TokenEpisode:
        """The token record of ``episode``: the one it was played with, else
        :meth:`render`."""
        entry = self._records.get(id(episode))
        if entry is not None and entry[0]() is episode:
            return entry[1]
        return self.render(episode)

    # -- rendering episodes it did not play ----------------------------------------------------
    def render(self, episode: Episode, *, ongoing: bool = False) -> TokenEpisode:
        """``episode`` rendered with the chat template as the rollout engine renders what it
        plays: each action's ids are the ones this policy sampled in a ``policy(episodes)``
        call, else its text tokenised and closed with the end-of-turn token. ``ongoing``: the
        episode goes on, so its last observation and the generation prompt follow."""
        r = self.renderer
        first = _text(episode.initial_observation, episode.reset_info)
        prompt, messages = r.prompt(first)
        rec = TokenEpisode(
            episode.env_id,
            episode.index,
            episode.seed,
            str(getattr(self.model, "name_or_path", "")),
            prompt,
            prompt_messages=messages,
            reset_info=dict(episode.reset_info),
        )
        n = len(episode.transitions)
        for t, tr in enumerate(episode.transitions):
            ids = self.action_tokens(str(tr.action), episode, t)
            last = t == n - 1 and not ongoing
            nxt = "" if last else _text(tr.next_observation, tr.info)
            role: ObservationRole = "tool" if tr.info.get("use_tool") else "user"
            rec.turns.append(
                TokenTurn(
                    ids,
                    None,
                    "stop",
                    str(tr.action),
                    reward=tr.reward,
                    terminated=tr.terminated,
                    truncated=tr.truncated,
                    info=tr.info,
                    next_ids=r.continuation(ids, None if last else nxt, role),
                    next_observation=nxt,
                    next_role=role,
                )
            )
        return rec

    # -- what the trainer reads ----------------------------------------------------------------
    def context(self, episode: Episode) -> list[int]:
        """The ids the policy conditions the episode's next action on (chat template)."""
        rec = self.render(episode, ongoing=True)
        if not episode.transitions:
            return list(rec.prompt_ids)
        return rec.input_ids

    def tokenize(self, episode: Episode) -> TokenizedEpisode:
        """The episode's training tokens: its token record's ids and action mask."""
        return self.record(episode).to_tokenized()

    def sampled_log_probs(self, episode: Episode) -> list[float] | None:
        """The sampled log-probs of the episode's action tokens, in order (``None`` when it
        was not sampled by this policy)."""
        entry = self._records.get(id(episode))
        if entry is None or entry[0]() is not episode:
            return super().sampled_log_probs(episode)
        out: list[float] = []
        for turn in entry[1].turns:
            if turn.logprobs is None:
                return None
            out.extend(turn.logprobs)
        return out


class ChatCollector(Collector):
    """Collects a :class:`ChatPolicy`'s batches through the rollout engine: every episode of a
    batch in flight at once over the collector's vector env (seeds and groups as
    :class:`~gemgym.rl.Collector`'s)."""

    def __init__(self, env: str | VectorEnv, policy: LMPolicy, **kwargs: Any) -> None:
        if not isinstance(policy, ChatPolicy):
            raise ConfigError(f"ChatCollector plays a ChatPolicy, got {type(policy).__name__}")
        super().__init__(env, policy, **kwargs)
        self.chat_policy = policy
        self.records: list[TokenEpisode] = []
        """The token records of the last batch."""

    def collect(self, num_episodes: int) -> Batch:
        """Play ``num_episodes`` episodes (a multiple of ``group_size``)."""
        if num_episodes < 1 or num_episodes % self.group_size:
            raise ConfigError(
                f"num_episodes ({num_episodes}) must be a positive multiple of group_size "
                f"({self.group_size})"
            )
        first = self.next_group
        records = self.chat_policy.play(
            self.env, num_episodes, seed=self._seed + first, group_size=self.group_size
        )
        self.load_state_dict({"next_group": first + num_episodes // self.group_size})
        self.records = records
        episodes = [self.chat_policy.remember(r) for r in records]
        return Batch(episodes, [first + int(r.group or 0) for r in records])


def save_hf_model(model: Any, tokenizer: Any, path: str | Path) -> Path:
    """Write ``model`` (LoRA adapters merged into a copy) and ``tokenizer`` with
    ``save_pretrained`` to ``path``; returns it."""
    import copy

    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    if hasattr(model, "merge_and_unload"):  # a PEFT model: the merged weights, adapters kept
        model = copy.deepcopy(model).merge_and_unload()
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
