"""``gemgym train --model PATH``: a Hugging Face chat model trained through :mod:`gemgym.llm`.

With ``policy.model`` set, the trainer's policy is a :class:`ChatPolicy`, an episode
engine policy (:mod:`gemgym.episodes.policy`) that the trainer's
:class:`~gemgym.rl.Collector` plays like any other:

* sampling: every episode of a batch is in flight at once on the episode engine, each turn a
  request to a :class:`~gemgym.llm.transformers_backend.TransformersBackend` on the policy's
  own model (CPU or GPU), recorded with the model's chat template by the policy's
  :attr:`ChatPolicy.recorder` (:class:`~gemgym.llm.render.ChatRenderer`: sampled ids verbatim,
  observations rendered by the template);
* learning: each episode's token record gives the training tokens
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
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gemgym.episodes.policy import Action, ActRequest
from gemgym.episodes.record import Episode, ObservationRole
from gemgym.errors import ConfigError, missing_dependency
from gemgym.llm.backend import SamplingParams
from gemgym.llm.render import ChatRenderer
from gemgym.llm.rollout import BackendPolicy, TokenRecorder
from gemgym.prompting import model_view
from gemgym.rl.collector import Collector
from gemgym.rl.trainer.codec import HFCodec
from gemgym.rl.trainer.policy import LMPolicy, model_positions

if TYPE_CHECKING:
    import torch

    from gemgym.llm.transformers_backend import TransformersBackend
    from gemgym.rl.tokens import TokenizedEpisode
    from gemgym.rl.trainer.config import TrainConfig

__all__ = ["ChatCollector", "ChatPolicy", "load_chat_model", "save_hf_model"]


def load_chat_model(config: TrainConfig) -> tuple[Any, HFCodec]:
    """``(model, codec)`` of ``config.policy.model``: the causal LM (with LoRA adapters when
    ``config.policy.lora_rank > 0``) and its tokenizer (:class:`HFCodec`, ``.tokenizer``)."""
    if config.policy.model is None:
        raise ConfigError("load_chat_model needs policy.model (a Hugging Face model)")
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as e:  # pragma: no cover - the train extra installs it
        raise missing_dependency("transformers", "train") from e
    _check_model_path(config.policy.model)
    try:
        tokenizer = AutoTokenizer.from_pretrained(config.policy.model)
    except (OSError, ValueError) as e:
        reason = (str(e).strip().splitlines() or [type(e).__name__])[0].rstrip(". ")
        raise ConfigError(
            f"policy.model {config.policy.model!r} could not be loaded ({reason}). Give a local "
            "Hugging Face model directory or a Hub id (offline: one already in the cache)"
        ) from e
    if getattr(tokenizer, "chat_template", None) is None:
        raise ConfigError(
            f"the tokenizer of {config.policy.model} has no chat template; gemgym train --model "
            "renders episodes as chats: use an instruct/chat model (or set "
            "tokenizer.chat_template)"
        )
    model: Any = AutoModelForCausalLM.from_pretrained(config.policy.model)
    if config.policy.lora_rank:
        try:
            from peft import LoraConfig, get_peft_model
        except ImportError as e:
            raise missing_dependency("peft", "peft") from e
        lora = LoraConfig(
            r=config.policy.lora_rank,
            lora_alpha=config.policy.lora_alpha,
            target_modules="all-linear",
            lora_dropout=0.0,
            task_type="CAUSAL_LM",
        )
        model = get_peft_model(model, lora)
    return model, HFCodec(tokenizer)


def _check_model_path(model: str) -> None:
    """A ``model`` written as a path (``/``, ``./``, ``../``, ``~``) must be a directory."""
    path = Path(model).expanduser()
    if (model.startswith(("/", "./", "../", "~")) or path.exists()) and not path.is_dir():
        what = "is not a directory" if path.exists() else "does not exist"
        raise ConfigError(
            f"policy.model {model!r} {what}: give a local Hugging Face model "
            "directory (with config.json and a tokenizer) or a Hub id such as "
            "'Qwen/Qwen2.5-0.5B-Instruct'"
        )


def _text(observation: Any, info: dict[str, Any] | None) -> str:
    """What the model is shown of an observation (as the rollout engine renders it)."""
    view = model_view(observation, info)
    return view if isinstance(view, str) else str(getattr(view, "text", view))


class ChatPolicy(LMPolicy):
    """The policy of ``gemgym train --model`` (see the module docstring).

    As an engine policy (``async act(request)`` with its :attr:`recorder`), it samples every
    turn in flight through a :class:`~gemgym.llm.transformers_backend.TransformersBackend`; a
    run draws its sampling seed from the policy's generator (:meth:`open_run`), so a seeded
    training run samples the same batches. As an :class:`LMPolicy` it also acts on episodes in
    progress (``policy(episodes)``), with the same chat rendering (:meth:`context`).

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
        self._backend: TransformersBackend | None = None
        self._backend_loop: asyncio.AbstractEventLoop | None = None
        self._run_policy: BackendPolicy | None = None
        self._was_training = True
        self.recorder = TokenRecorder(
            self.renderer,
            max_context=self.max_context,
            model=str(getattr(model, "name_or_path", "")),
        )
        """Renders the episodes this policy plays (the engine uses it)."""

    # -- playing on the episode engine ---------------------------------------------------------
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

    async def open_run(self) -> None:
        """Start a run: its sampling settings, and a backend on this event loop."""
        from gemgym.llm.transformers_backend import TransformersBackend

        loop = asyncio.get_running_loop()
        if self._backend is None or self._backend_loop is not loop:
            self._backend = TransformersBackend(
                self.model, self.tokenizer, device=str(self.device), max_batch_size=64
            )
            self._backend_loop = loop
        sampling = self.sampling()
        self.recorder.sampling = sampling.to_dict()
        self._run_policy = BackendPolicy(self._backend, sampling)
        self._was_training = self.model.training

    async def close_run(self) -> None:
        """End a run: close the backend, give the model back its training mode."""
        backend, self._backend, self._backend_loop = self._backend, None, None
        self._run_policy = None
        try:
            if backend is not None:
                await backend.aclose()
        finally:
            self.model.train(self._was_training)  # the backend put it in eval mode

    async def act(self, request: ActRequest) -> Action:
        """One turn, sampled by the run's backend (see :meth:`open_run`)."""
        if self._run_policy is None:
            raise ConfigError("ChatPolicy.act is called by the episode engine (open_run first)")
        return await self._run_policy.act(request)

    def record(self, episode: Episode) -> Episode:
        """The token record of ``episode``: itself when this policy played it on the engine,
        else :meth:`render`."""
        if episode.prompt_ids:
            return episode
        return self.render(episode)

    # -- rendering episodes it did not play ----------------------------------------------------
    def render(self, episode: Episode, *, ongoing: bool = False) -> Episode:
        """``episode`` rendered with the chat template as the rollout engine renders what it
        plays: each action's ids are the ones this policy sampled in a ``policy(episodes)``
        call, else its text tokenised and closed with the end-of-turn token. ``ongoing``: the
        episode goes on, so its last observation and the generation prompt follow."""
        r = self.renderer
        first = _text(episode.initial_observation, episode.reset_info)
        prompt, messages = r.prompt(first)
        rec = replace(
            episode,
            turns=[],
            reset_info=dict(episode.reset_info),
            model=str(getattr(self.model, "name_or_path", "")),
            prompt_ids=prompt,
            prompt_messages=messages,
            rendering="rerendered",
        )
        n = len(episode.turns)
        for t, tr in enumerate(episode.turns):
            ids = self.action_tokens(str(tr.action), episode, t)
            last = t == n - 1 and not ongoing
            nxt = "" if last else _text(tr.next_observation, tr.info)
            role: ObservationRole = "tool" if tr.info.get("use_tool") else "user"
            rec.turns.append(
                replace(
                    tr,
                    action_ids=ids,
                    logprobs=None,
                    finish_reason="stop",
                    next_ids=r.continuation(ids, None if last else nxt, role),
                    next_role=role,
                    retokenized=False,
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
        if not episode.prompt_ids:
            return super().sampled_log_probs(episode)
        out: list[float] = []
        for turn in episode.turns:
            if turn.logprobs is None:
                return None
            out.extend(turn.logprobs)
        return out


ChatCollector = Collector
"""The collector of a :class:`ChatPolicy`: the one :class:`~gemgym.rl.Collector` (kept as a
name; :attr:`~gemgym.rl.Collector.records` are the last batch's token records)."""


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
