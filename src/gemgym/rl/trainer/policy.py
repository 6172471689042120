"""A causal-LM policy that writes text actions token by token (torch + transformers).

:class:`LMPolicy` renders an episode in progress as one token sequence (see
:mod:`gemgym.rl.trainer.codec`), samples the next action until ``EOS`` with a KV cache, and turns
finished episodes into :class:`~gemgym.rl.tokens.TokenizedEpisode` for training, so generation and
training see the same tokens (the sampled ids of each action are kept). Observations are cut to their first ``obs_max_tokens`` tokens (the
head of a game's rules carries the range and the turn limit).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gemgym.experience import Episode
from gemgym.rl.tokens import Segment, TokenizedEpisode, tokenize_segments
from gemgym.rl.trainer.codec import ByteTokenizer, Codec, HFCodec
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
) -> tuple[Any, Codec]:
    """``(model, codec)``: a Hugging Face model path, or (``None``) a small random GPT-2.

    The default model uses :class:`ByteTokenizer` and needs no download; with the defaults it
    has about 150k parameters (2 layers, width 64, 512 positions).
    """
    try:
        import transformers
    except ImportError as e:  # pragma: no cover - the train extra installs it
        from gemgym.errors import missing_dependency

        raise missing_dependency("transformers", "train") from e
    if model is None:
        codec: Codec = ByteTokenizer()
        config = transformers.GPT2Config(
            vocab_size=codec.vocab_size,
            n_positions=n_positions,
            n_embd=n_embd,
            n_layer=n_layer,
            n_head=n_head,
            bos_token_id=ByteTokenizer.BOS,
            eos_token_id=ByteTokenizer.EOS,
            pad_token_id=ByteTokenizer.PAD,
            # no dropout: it would make the training log-probs differ from the sampling ones
            # (and dropout in attention forces the slow attention path on CPU)
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            activation_function="gelu",
        )
        return transformers.GPT2LMHeadModel(config), codec
    tokenizer = transformers.AutoTokenizer.from_pretrained(model)
    return transformers.AutoModelForCausalLM.from_pretrained(model), HFCodec(tokenizer)


def _cache_keyword(model: Any) -> str:
    """``"cache"`` (transformers >= 5.2x) or ``"past_key_values"`` (older releases)."""
    import inspect

    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


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
        # text -> sampled ids, so training sees the exact tokens even when decoding is lossy
        self._sampled: dict[str, list[int]] = {}

    # -- rendering -------------------------------------------------------------------------
    def _obs_tokens(self, obs: Any) -> list[int]:
        c = self.codec
        return c.obs_marker + c.encode(observation_text(obs))[: self.obs_max_tokens] + c.act_marker

    def segments(self, episode: Episode, *, upto: int | None = None) -> list[Segment]:
        """The episode's segments: prompt, then observation/action pairs for turns ``< upto``,
        then (when ``upto`` is given) the observation that the next action answers."""
        c = self.codec
        segs: list[Segment] = [("prompt", c.bos)] if c.bos else []
        obs = episode.initial_observation
        turns = episode.transitions if upto is None else episode.transitions[:upto]
        for tr in turns:
            segs.append(("observation", self._obs_tokens(obs)))
            segs.append(("action", self.action_tokens(str(tr.action))))
            obs = tr.next_observation
        if upto is not None:
            segs.append(("observation", self._obs_tokens(obs)))
        return segs

    def action_tokens(self, action: str) -> list[int]:
        """The tokens of an action: the sampled ones for actions this policy wrote (``EOS``
        included only if it was sampled), else the encoded text and ``EOS``."""
        ids = self._sampled.get(action)
        return list(ids) if ids is not None else [*self.codec.encode(action), self.codec.eos_id]

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
        if len(self._sampled) > 100_000:
            self._sampled.clear()
        actions = []
        for ids in outs:
            text = self.codec.decode([i for i in ids if i != self.codec.eos_id])
            self._sampled[text] = ids
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
        length = max(len(x) for x in contexts)
        ids = torch.full((b, length), c.pad_id, dtype=torch.long)
        att = torch.zeros((b, length), dtype=torch.long)
        for i, x in enumerate(contexts):  # left padding
            if x:
                ids[i, length - len(x) :] = torch.tensor(list(x), dtype=torch.long)
                att[i, length - len(x) :] = 1
        ids, att = ids.to(dev), att.to(dev)
        pos = (att.cumsum(-1) - 1).clamp(min=0)
        cache_kw = _cache_keyword(self.model)
        out = self.model(input_ids=ids, attention_mask=att, position_ids=pos, use_cache=True)
        past = out[cache_kw]
        logits = out.logits[:, -1, :]
        next_pos = pos[:, -1:] + 1
        done = torch.zeros(b, dtype=torch.bool, device=dev)
        gen: list[list[int]] = [[] for _ in range(b)]
        for step in range(self.max_new_tokens):
            if self.greedy:
                tok = logits.argmax(-1)
            else:
                probs = torch.softmax(logits.float() / self.temperature, dim=-1)
                tok = torch.multinomial(probs, 1, generator=self.generator).squeeze(-1)
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
