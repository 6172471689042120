"""A causal-LM policy that writes text actions token by token (torch + transformers).

:class:`LMPolicy` renders an episode in progress as one token sequence (see
:mod:`gemgym.rl.trainer.codec`), samples the next action until ``EOS`` with a KV cache, and turns
finished episodes into :class:`~gemgym.rl.tokens.TokenizedEpisode` for training, so generation and
training see the same tokens (the sampled ids of each action are kept). Observations are cut to their first ``obs_max_tokens`` tokens (the
head of a game's rules carries the range and the turn limit).
"""

from __future__ import annotations

import math
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

_Sample = tuple[str, list[int], list[float]]


def observation_text(obs: Any) -> str:
    """The text of an observation (chat lists are joined, images dropped)."""
    return _text(obs)


def model_positions(model: Any) -> int | None:
    """How many positions ``model`` has (GPT-2's ``n_positions``, or
    ``max_position_embeddings``); ``None`` when its config does not say."""
    cfg = getattr(model, "config", None)
    limit = getattr(cfg, "n_positions", None) or getattr(cfg, "max_position_embeddings", None)
    return limit if isinstance(limit, int) else None


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
        min_p: sample only among the tokens whose probability (at temperature 1) is at least
            ``min_p`` times the most likely one's (min-p sampling; 0: all tokens). With a
            temperature above 1 it spreads the samples over the choices the policy hesitates
            between, not over tokens it rules out (such as a format's alternatives).
        obs_max_tokens: keep this many leading tokens of each observation.
        seed: seed of the sampling generator.
        kv_cache: keep each episode's keys and values between its turns, so that a turn
            encodes only the tokens added since the last one (TinyGPT; same samples up to
            float rounding).
    """

    def __init__(
        self,
        model: Any,
        codec: Codec,
        *,
        max_new_tokens: int = 16,
        temperature: float = 1.0,
        min_p: float = 0.0,
        greedy: bool = False,
        obs_max_tokens: int = 128,
        seed: int = 0,
        device: str | torch.device = "cpu",
        kv_cache: bool = True,
    ) -> None:
        import torch

        self.model = model
        self.kv_cache = kv_cache
        # TinyGPT only: an episode's keys and values from its last turn, so that the next turn
        # encodes only its new tokens: id(episode) -> (weak ref, tokens, [(keys, values)] per
        # layer, each (heads, len(tokens), dim)); valid while the weights stay the same
        self._kv: dict[int, tuple[weakref.ref[Episode], list[int], list[Any]]] = {}
        self._kv_version: tuple[int, ...] = ()
        self.codec = codec
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.min_p = min_p
        self.greedy = greedy
        self.obs_max_tokens = obs_max_tokens
        self.device = torch.device(device)
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed)
        # the ids this policy sampled, per episode object and turn, so that training sees the
        # exact tokens even when decoding is lossy (special ids are dropped from the text, so
        # two different samples may read the same), and their log-probs under the sampling
        # model: id(episode) -> (weak ref, {turn: (text, ids, log-probs)})
        self._sampled: dict[int, tuple[weakref.ref[Episode], dict[int, _Sample]]] = {}

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

    def _remember(self, episode: Episode, text: str, ids: list[int], logps: list[float]) -> None:
        entry = self._sampled.get(id(episode))
        if entry is None or entry[0]() is not episode:
            if len(self._sampled) > 10_000:  # forget episodes that no longer exist
                self._sampled = {k: v for k, v in self._sampled.items() if v[0]() is not None}
            entry = (weakref.ref(episode), {})
            self._sampled[id(episode)] = entry
        entry[1][episode.length] = (text, ids, logps)

    def sampled_log_probs(self, episode: Episode) -> list[float] | None:
        """The log-probs (temperature 1, over the action vocabulary) that the sampling model
        gave each action token of ``episode``, in order, as recorded while sampling; ``None``
        when some action was not sampled by this policy (or its text was changed since)."""
        entry = self._sampled.get(id(episode))
        if entry is None or entry[0]() is not episode:
            return None
        out: list[float] = []
        for t, tr in enumerate(episode.transitions):
            rec = entry[1].get(t)
            if rec is None or rec[0] != str(tr.action):
                return None
            out.extend(rec[2])
        return out

    def tokenize(self, episode: Episode) -> TokenizedEpisode:
        """The finished episode as training tokens (actions re-encoded from their text)."""
        return tokenize_segments(self.segments(episode))

    def context(self, episode: Episode) -> list[int]:
        """The tokens the policy conditions on for the episode's next action."""
        return [int(t) for _, toks in self.segments(episode, upto=episode.length) for t in toks]

    # -- acting ----------------------------------------------------------------------------
    def __call__(self, episodes: Sequence[Episode]) -> list[str]:
        """One action per episode in progress (the engine's records, which the collector
        passes with ``history=True``)."""
        if not episodes:
            return []
        outs, logps = self._sample([self.context(e) for e in episodes], episodes)
        actions = []
        for ep, ids, lp in zip(episodes, outs, logps, strict=True):
            text = self.codec.decode([i for i in ids if i != self.codec.eos_id])
            self._remember(ep, text, ids, lp)
            actions.append(text)
        return actions

    def generate(self, contexts: Sequence[Sequence[int]]) -> list[list[int]]:
        """Sample a continuation of each context until ``EOS`` (included when sampled)."""
        return self._sample(contexts)[0]

    def clear_cache(self) -> None:
        """Forget the keys and values kept between turns (done by itself when weights change)."""
        self._kv = {}

    def _sample(
        self, contexts: Sequence[Sequence[int]], episodes: Sequence[Episode] | None = None
    ) -> tuple[list[list[int]], list[list[float]]]:
        import torch

        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                return self._generate(contexts, episodes)
        finally:
            self.model.train(was_training)

    def _weights_version(self) -> tuple[int, ...]:
        """Changes whenever a parameter is modified in place (an optimizer step, a copy)."""
        return tuple(p._version for p in self.model.parameters())

    def _cached(self, contexts: Sequence[Sequence[int]], episodes: Sequence[Episode]) -> list[Any]:
        """Per context, the ``(tokens, keys and values)`` kept from the episode's previous turn
        when those tokens begin the context (else ``None``); entries of episodes that are not
        in this call, and all entries once the weights have changed, are dropped."""
        version = self._weights_version()
        if version != self._kv_version:
            self._kv, self._kv_version = {}, version
        kept, out = {}, []
        for x, ep in zip(contexts, episodes, strict=True):
            entry = self._kv.get(id(ep))
            hit = None
            if entry is not None and entry[0]() is ep:
                kept[id(ep)] = entry
                toks = entry[1]
                if len(toks) < len(x) and list(x[: len(toks)]) == toks:
                    hit = entry
            out.append(hit)
        self._kv = kept
        return out

    def _generate(
        self, contexts: Sequence[Sequence[int]], episodes: Sequence[Episode] | None = None
    ) -> tuple[list[list[int]], list[list[float]]]:
        """The sampled ids of each context's continuation and their log-probs (temperature 1,
        over the sampled vocabulary: what the trainer's scoring computes).

        For TinyGPT, a head that every fresh context shares (an env's rules text) is computed
        once and broadcast, and with ``episodes`` each episode's keys and values are kept for
        its next turn, which then encodes only its new tokens (the last observation). Its
        decoding writes each token's keys and values into buffers allocated once per call
        (:class:`~gemgym.rl.trainer.tinygpt.KVBuffer`), not into a concatenated copy.
        """
        import torch

        from gemgym.rl.trainer.tinygpt import KVBuffer

        c = self.codec
        dev = self.device
        b = len(contexts)
        self._check_length(max(len(x) for x in contexts))
        cache_kw, keep = _generation_kwargs(self.model)
        tiny = hasattr(getattr(self.model, "transformer", None), "forward_shared_prefix")
        # the episodes whose keys and values are kept between turns (TinyGPT only)
        cached_eps = episodes if tiny and self.kv_cache else None
        hits: list[Any] = [None] * b
        if cached_eps is not None:
            hits = self._cached(contexts, cached_eps)
        # per row: the keys and values it starts from (each (heads, P_i, dim) per layer)
        pasts: list[Any] = [None] * b
        plen = [0] * b
        new: list[Sequence[int]] = list(contexts)
        for i, hit in enumerate(hits):
            if hit is not None:
                pasts[i], plen[i], new[i] = hit[2], len(hit[1]), contexts[i][len(hit[1]) :]
        fresh = [i for i in range(b) if hits[i] is None]
        split = _common_head([contexts[i] for i in fresh]) if tiny else 0
        if split:
            head = torch.tensor([list(contexts[fresh[0]][:split])], dtype=torch.long, device=dev)
            one = self.model(input_ids=head, use_cache=True, logits_to_keep=1)[cache_kw]
            head_kv = [(k[0], v[0]) for k, v in one]
            for i in fresh:
                pasts[i], plen[i], new[i] = head_kv, split, contexts[i][split:]
        p = max(plen)
        length = max(len(x) for x in new)
        past: Any = None
        if p:  # left-padded (b, heads, p, dim) keys and values per layer
            # TinyGPT: with room for the prompt and the action, decoded into in place
            room = length + self.max_new_tokens if tiny else 0
            past = []
            for layer in range(len(next(x for x in pasts if x is not None))):
                k0, v0 = next(x for x in pasts if x is not None)[layer]
                k = k0.new_zeros((b, k0.shape[0], p + room, k0.shape[2]))
                v = v0.new_zeros((b, v0.shape[0], p + room, v0.shape[2]))
                for i in range(b):
                    if plen[i]:
                        k[i, :, p - plen[i] : p] = pasts[i][layer][0]
                        v[i, :, p - plen[i] : p] = pasts[i][layer][1]
                past.append((k, v))
            if tiny:
                past = KVBuffer(past, p)
        ids = torch.full((b, length), c.pad_id, dtype=torch.long)
        att = torch.zeros((b, p + length), dtype=torch.long)
        pos = torch.zeros((b, length), dtype=torch.long)
        for i, x in enumerate(new):  # left padding
            ids[i, length - len(x) :] = torch.tensor(list(x), dtype=torch.long)
            att[i, p - plen[i] : p] = 1
            att[i, p + length - len(x) :] = 1
            pos[i, length - len(x) :] = torch.arange(plen[i], plen[i] + len(x))
        ids, att, pos = ids.to(dev), att.to(dev), pos.to(dev)
        if past is not None:
            keep = {**keep, cache_kw: past}
        limit = getattr(c, "action_vocab_size", None)
        out = self.model(
            input_ids=ids, attention_mask=att, position_ids=pos, use_cache=True, **keep
        )
        past = out[cache_kw]
        if tiny and not p:  # decode into buffers allocated once, not a concatenation per token
            past = KVBuffer.from_cache(past, att.shape[1] + self.max_new_tokens)
        # the attention mask of every step to come: each sampled token is a real key
        att = torch.cat([att, att.new_ones((b, self.max_new_tokens))], dim=1)
        seen = p + length
        logits = out.logits[:, -1, :]
        next_pos = pos[:, -1:] + 1
        done = torch.zeros(b, dtype=torch.bool, device=dev)
        gen: list[list[int]] = [[] for _ in range(b)]
        gen_lp: list[list[float]] = [[] for _ in range(b)]
        for step in range(self.max_new_tokens):
            if limit:
                logits = logits[:, :limit]
            if self.greedy:
                tok = logits.argmax(-1)
            else:  # inverse-CDF sampling (faster than torch.multinomial on CPU; docs/benchmarks.md)
                scaled = logits.float()
                if self.min_p > 0:  # rule out tokens far less likely than the best one
                    cut = scaled.max(-1, keepdim=True).values + math.log(self.min_p)
                    scaled = scaled.masked_fill(scaled < cut, float("-inf"))
                probs = torch.softmax(scaled / self.temperature, dim=-1)
                u = torch.rand((b, 1), generator=self.generator, device=dev)
                cdf = probs.cumsum(-1)
                tok = torch.searchsorted(cdf, u * cdf[:, -1:], right=True).squeeze(-1)
                tok = tok.clamp(max=probs.shape[-1] - 1)
            lp = torch.log_softmax(logits.float(), dim=-1).gather(-1, tok[:, None]).squeeze(-1)
            toks, lps = tok.tolist(), lp.tolist()
            finished = done.tolist()
            for i in range(b):
                if not finished[i]:
                    gen[i].append(int(toks[i]))
                    gen_lp[i].append(float(lps[i]))
            done = done | (tok == c.eos_id)
            if bool(done.all()) or step == self.max_new_tokens - 1:
                break
            seen += 1
            out = self.model(
                input_ids=tok[:, None],
                attention_mask=att[:, :seen],
                position_ids=next_pos,
                use_cache=True,
                **{cache_kw: past},
            )
            past = out[cache_kw]
            logits = out.logits[:, -1, :]
            next_pos = next_pos + 1
        if cached_eps is not None:
            self._keep(contexts, cached_eps, new, plen, gen, att[:, :seen], past)
        return gen, gen_lp

    def _check_length(self, longest: int) -> None:
        """Fail with what to change when a context and its action may not fit the model's
        positions (a learned position table has no entry past them)."""
        limit = model_positions(self.model)
        if limit is not None and longest + self.max_new_tokens > limit:
            from gemgym.errors import ConfigError

            raise ConfigError(
                f"an episode's context reached {longest} tokens and its action may take "
                f"{self.max_new_tokens} more, past the model's {limit} positions: give the model "
                "more positions (policy.n_positions), keep fewer tokens of "
                "each observation (policy.obs_max_tokens), or allow fewer turns"
            )

    def _keep(
        self,
        contexts: Sequence[Sequence[int]],
        episodes: Sequence[Episode],
        new: Sequence[Sequence[int]],
        plen: list[int],
        gen: list[list[int]],
        att: Any,
        past: Any,
    ) -> None:
        """Keep each episode's keys and values (its context and the tokens it sampled, but the
        last, which was never fed back) for its next turn."""
        for i, ep in enumerate(episodes):
            n = plen[i] + len(new[i]) + len(gen[i]) - 1
            idx = att[i].nonzero().squeeze(-1)[:n]
            kv = [(k[i][:, idx], v[i][:, idx]) for k, v in past]
            self._kv[id(ep)] = (weakref.ref(ep), [*contexts[i], *gen[i][:-1]], kv)
