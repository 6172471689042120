"""A causal-LM policy that writes text actions token by token (torch + transformers).

:class:`LMPolicy` renders an episode in progress as one token sequence (see
:mod:`gemgym.rl.trainer.codec`), samples the next action until ``EOS`` with a KV cache, and turns
finished episodes into :class:`~gemgym.rl.tokens.TokenizedEpisode` for training, so generation and
training see the same tokens (the sampled ids of each action are kept). Observations are cut to their first ``obs_max_tokens`` tokens (the
head of a game's rules carries the range and the turn limit).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gemgym.experience import Episode
from gemgym.rl.tokens import Segment, TokenizedEpisode, tokenize_segments
from gemgym.rl.trainer.codec import ByteTokenizer, Codec, HFCodec, make_codec
from gemgym.wrappers.history import _text

if TYPE_CHECKING:
    import torch

__all__ = ["LMPolicy", "build_model", "observation_text"]


def observation_text(obs: Any) -> str:
    """The text of an observation (chat lists are joined, images dropped)."""
    return _text(obs)


def build_model(
    model: str | None = None,
    *,
    n_layer: int = 2,
    n_embd: int = 64,
    n_head: int = 4,
    n_positions: int = 512,
    tokenizer: str = "bytes",
) -> tuple[Any, Codec]:
    """``(model, codec)``: a Hugging Face model path, or (``None``) a small random GPT.

    The default model is a :class:`~gemgym.rl.trainer.tinygpt.TinyGPT` (GPT-2's architecture
    in plain torch) and needs no download: ``tokenizer="bytes"`` (:class:`ByteTokenizer`) or
    ``"words"`` (:class:`~gemgym.rl.trainer.codec.WordTokenizer`: observations as hashed
    words, about 3x shorter episodes). With the defaults it has about 150k parameters
    (2 layers, width 64, 512 positions; 215k with ``"words"``). A Hugging Face model brings
    its own tokenizer, so ``tokenizer`` must then stay ``"bytes"`` (the default).
    """
    if model is not None and tokenizer != "bytes":
        from gemgym.errors import ConfigError

        raise ConfigError(
            f"tokenizer={tokenizer!r} is for the default model; a Hugging Face model "
            f"({model}) uses its own tokenizer: drop the tokenizer setting"
        )
    if model is None:
        from gemgym.rl.trainer.tinygpt import TinyGPT, TinyGPTConfig

        codec: ByteTokenizer = make_codec(tokenizer)
        config = TinyGPTConfig(
            vocab_size=codec.vocab_size,
            n_layer=n_layer,
            n_embd=n_embd,
            n_head=n_head,
            n_positions=n_positions,
        )
        return TinyGPT(config), codec
    try:
        import transformers
    except ImportError as e:  # pragma: no cover - the train extra installs it
        from gemgym.errors import missing_dependency

        raise missing_dependency("transformers", "train") from e
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(model)
    return transformers.AutoModelForCausalLM.from_pretrained(model), HFCodec(hf_tokenizer)


def _generation_kwargs(model: Any) -> tuple[str, dict[str, int]]:
    """The model's cache keyword (``"cache"`` in transformers >= 5.2x, else
    ``"past_key_values"``) and ``{"logits_to_keep": 1}`` where supported (a prompt needs one
    row of logits)."""
    import inspect

    params = inspect.signature(model.forward).parameters
    cache_kw = "cache" if "cache" in params else "past_key_values"
    return cache_kw, ({"logits_to_keep": 1} if "logits_to_keep" in params else {})


MIN_COMMON_HEAD = 16


def _common_head(contexts: Sequence[Sequence[int]]) -> int:
    """How many leading tokens all contexts share, leaving each at least one of its own; 0
    when that is under :data:`MIN_COMMON_HEAD` or there is one context."""
    if len(contexts) < 2:
        return 0
    first = contexts[0]
    n = min(len(x) for x in contexts) - 1
    for x in contexts[1:]:
        k = 0
        while k < n and x[k] == first[k]:
            k += 1
        n = k
        if n < MIN_COMMON_HEAD:
            return 0
    return n


class LMPolicy:
    """A batched policy for :class:`~gemgym.rl.Collector` with ``history=True``.

    Args:
        model: a causal LM taking ``input_ids``, ``attention_mask``, ``position_ids`` and
            ``past_key_values`` (any Hugging Face ``*ForCausalLM``).
        codec: its tokenizer (:class:`ByteTokenizer` or :class:`HFCodec`).
        max_new_tokens: longest action, in tokens.
        temperature: sampling temperature; ``greedy=True`` takes the argmax instead.
        obs_max_tokens: keep this many leading tokens of each observation.
        seed: seed of the sampling generator.
    """

    def __init__(
        self,
        model: Any,
        codec: Codec,
        *,
        max_new_tokens: int = 16,
        temperature: float = 1.0,
        greedy: bool = False,
        obs_max_tokens: int = 128,
        seed: int = 0,
        device: str | torch.device = "cpu",
    ) -> None:
        import torch

        self.model = model
        self.codec = codec
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.greedy = greedy
        self.obs_max_tokens = obs_max_tokens
        self.device = torch.device(device)
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed)
        # the ids this policy sampled, per episode object and turn, so that training sees the
        # exact tokens even when decoding is lossy (special ids are dropped from the text, so
        # two different samples may read the same): id(episode) -> (weak ref, {turn: (text, ids)})
        self._sampled: dict[int, tuple[weakref.ref[Episode], dict[int, tuple[str, list[int]]]]] = {}

    # -- rendering -------------------------------------------------------------------------
    def _obs_tokens(self, obs: Any) -> list[int]:
        c = self.codec
        return (
            c.obs_marker
            + c.encode_observation(observation_text(obs))[: self.obs_max_tokens]
            + c.act_marker
        )

    def segments(self, episode: Episode, *, upto: int | None = None) -> list[Segment]:
        """The episode's segments: prompt, then observation/action pairs for turns ``< upto``,
        then (when ``upto`` is given) the observation that the next action answers."""
        c = self.codec
        segs: list[Segment] = [("prompt", c.bos)] if c.bos else []
        obs = episode.initial_observation
        turns = episode.transitions if upto is None else episode.transitions[:upto]
        for t, tr in enumerate(turns):
            segs.append(("observation", self._obs_tokens(obs)))
            segs.append(("action", self.action_tokens(str(tr.action), episode, t)))
            obs = tr.next_observation
        if upto is not None:
            segs.append(("observation", self._obs_tokens(obs)))
        return segs

    def action_tokens(
        self, action: str, episode: Episode | None = None, turn: int | None = None
    ) -> list[int]:
        """The tokens of an action: the ids this policy sampled for turn ``turn`` of
        ``episode`` (``EOS`` included only if it was sampled), else the encoded text and
        ``EOS`` (actions written by someone else, e.g. SFT traces)."""
        if episode is not None and turn is not None:
            entry = self._sampled.get(id(episode))
            if entry is not None and entry[0]() is episode:
                text_ids = entry[1].get(turn)
                if text_ids is not None and text_ids[0] == action:
                    return list(text_ids[1])
        return [*self.codec.encode(action), self.codec.eos_id]

    def _remember(self, episode: Episode, text: str, ids: list[int]) -> None:
        entry = self._sampled.get(id(episode))
        if entry is None or entry[0]() is not episode:
            if len(self._sampled) > 10_000:  # forget episodes that no longer exist
                self._sampled = {k: v for k, v in self._sampled.items() if v[0]() is not None}
            entry = (weakref.ref(episode), {})
            self._sampled[id(episode)] = entry
        entry[1][episode.length] = (text, ids)

    def tokenize(self, episode: Episode) -> TokenizedEpisode:
        """The finished episode as training tokens (actions re-encoded from their text)."""
        return tokenize_segments(self.segments(episode))

    def context(self, episode: Episode) -> list[int]:
        """The tokens the policy conditions on for the episode's next action."""
        return [int(t) for _, toks in self.segments(episode, upto=episode.length) for t in toks]

    # -- acting ----------------------------------------------------------------------------
    def __call__(self, episodes: list[Any]) -> list[str]:
        """One action per episode in progress."""
        if not episodes:
            return []
        outs = self.generate([self.context(e) for e in episodes])
        actions = []
        for ep, ids in zip(episodes, outs, strict=True):
            text = self.codec.decode([i for i in ids if i != self.codec.eos_id])
            if isinstance(ep, Episode):
                self._remember(ep, text, ids)
            actions.append(text)
        return actions

    def generate(self, contexts: Sequence[Sequence[int]]) -> list[list[int]]:
        """Sample a continuation of each context until ``EOS`` (included when sampled)."""
        import torch

        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                return self._generate(contexts)
        finally:
            self.model.train(was_training)

    def _generate(self, contexts: Sequence[Sequence[int]]) -> list[list[int]]:
        import torch

        c = self.codec
        dev = self.device
        b = len(contexts)
        cache_kw, keep = _generation_kwargs(self.model)
        # a head that every context shares (an env's rules text) is computed once, for one row,
        # and its keys and values are broadcast to the batch (TinyGPT only)
        split = 0
        if hasattr(getattr(self.model, "transformer", None), "forward_shared_prefix"):
            split = _common_head(contexts)
        past: Any = None
        if split:
            head = torch.tensor([list(contexts[0][:split])], dtype=torch.long, device=dev)
            one = self.model(input_ids=head, use_cache=True, logits_to_keep=1)[cache_kw]
            past = [(k.expand(b, *k.shape[1:]), v.expand(b, *v.shape[1:])) for k, v in one]
            contexts = [x[split:] for x in contexts]
        length = max(len(x) for x in contexts)
        ids = torch.full((b, length), c.pad_id, dtype=torch.long)
        att = torch.zeros((b, length), dtype=torch.long)
        for i, x in enumerate(contexts):  # left padding
            if x:
                ids[i, length - len(x) :] = torch.tensor(list(x), dtype=torch.long)
                att[i, length - len(x) :] = 1
        ids, att = ids.to(dev), att.to(dev)
        pos = (att.cumsum(-1) - 1).clamp(min=0) + split
        if split:
            att = torch.cat([torch.ones((b, split), dtype=att.dtype, device=dev), att], dim=1)
            keep = {**keep, cache_kw: past}
        limit = getattr(c, "action_vocab_size", None)
        out = self.model(
            input_ids=ids, attention_mask=att, position_ids=pos, use_cache=True, **keep
        )
        past = out[cache_kw]
        logits = out.logits[:, -1, :]
        next_pos = pos[:, -1:] + 1
        done = torch.zeros(b, dtype=torch.bool, device=dev)
        gen: list[list[int]] = [[] for _ in range(b)]
        for step in range(self.max_new_tokens):
            if limit:
                logits = logits[:, :limit]
            if self.greedy:
                tok = logits.argmax(-1)
            else:  # inverse-CDF sampling (torch.multinomial is several times slower on CPU)
                probs = torch.softmax(logits.float() / self.temperature, dim=-1)
                u = torch.rand((b, 1), generator=self.generator, device=dev)
                cdf = probs.cumsum(-1)
                tok = torch.searchsorted(cdf, u * cdf[:, -1:], right=True).squeeze(-1)
                tok = tok.clamp(max=probs.shape[-1] - 1)
            toks = tok.tolist()
            finished = done.tolist()
            for i in range(b):
                if not finished[i]:
                    gen[i].append(int(toks[i]))
            done = done | (tok == c.eos_id)
            if bool(done.all()) or step == self.max_new_tokens - 1:
                break
            att = torch.cat([att, torch.ones((b, 1), dtype=att.dtype, device=dev)], dim=1)
            out = self.model(
                input_ids=tok[:, None],
                attention_mask=att,
                position_ids=next_pos,
                use_cache=True,
                **{cache_kw: past},
            )
            past = out[cache_kw]
            logits = out.logits[:, -1, :]
            next_pos = next_pos + 1
        return gen
