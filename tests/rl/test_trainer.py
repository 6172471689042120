"""The reference trainer on a toy model: tokens, gradient direction, SFT, run/resume, CLI."""

from __future__ import annotations

import copy
import csv
import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from helpers.extras import needs_module

torch = needs_module("torch", "train")
needs_module("transformers", "train")

from gemgym.agents import make_agent  # noqa: E402
from gemgym.errors import ConfigError  # noqa: E402
from gemgym.experience import Episode, rollout, write_jsonl  # noqa: E402
from gemgym.rl import token_weights  # noqa: E402
from gemgym.rl.trainer import (  # noqa: E402
    ByteTokenizer,
    LMPolicy,
    TrainConfig,
    Trainer,
    build_model,
    clipped_policy_loss,
    policy_gradient_loss,
)

# an untrained toy model writes malformed actions: most runs here warn that a batch held only
# format errors (tested on its own in test_a_batch_of_only_format_errors_warns)
pytestmark = pytest.mark.filterwarnings("ignore::gemgym.rl.trainer.FormatErrorWarning")

ENV = "game:GuessTheNumber-v0-easy"
TINY = {"n_layer": 1, "n_embd": 16, "n_head": 2, "n_positions": 512}


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


def _episodes(agent: str, n: int) -> list[Episode]:
    return list(rollout(ENV, make_agent(agent), episodes=n, seed=3))


def test_byte_tokenizer_round_trip() -> None:
    tok = ByteTokenizer()
    ids = tok.encode("I guess \\boxed{7} — ok")
    assert all(0 <= i < 256 for i in ids)
    assert tok.decode([tok.BOS, *ids, tok.EOS]) == "I guess \\boxed{7} — ok"
    assert tok.vocab_size > max(tok.PAD, tok.BOS, tok.EOS, tok.OBS, tok.ACT)


def test_word_tokenizer_reads_observations_as_words_and_writes_bytes() -> None:
    from gemgym.rl.trainer.codec import WordTokenizer, make_codec

    tok = make_codec("words")
    assert isinstance(tok, WordTokenizer)
    obs = tok.encode_observation("At turn 3, you guessed 7, and the target is higher than 7.")
    words = [i for i in obs if i >= tok.word_base]
    assert len(obs) == 16 and len(words) == 10  # 10 words; "3", ",", "7", ",", "7", "."
    assert obs[2] == ord("3") and obs[-2] == ord("7") and obs[-1] == ord(".")
    assert max(obs) < tok.vocab_size
    # the same word always maps to the same id, different words (here) to different ids
    assert tok.encode_observation("higher")[0] == tok.encode_observation("x higher")[1]
    assert tok.encode_observation("higher") != tok.encode_observation("lower")
    # actions stay bytes: what the policy writes decodes exactly
    assert tok.encode("\\boxed{10}") == list(b"\\boxed{10}")
    assert tok.decode(tok.encode("\\boxed{10}")) == "\\boxed{10}"
    from gemgym.errors import ConfigError

    with pytest.raises(ConfigError, match="bytes"):
        make_codec("bpe")


def test_tiny_gpt_cached_decoding_with_left_padding_matches_a_full_forward() -> None:
    from gemgym.rl.trainer.tinygpt import TinyGPT, TinyGPTConfig

    torch.manual_seed(0)
    m = TinyGPT(TinyGPTConfig(vocab_size=40, n_layer=2, n_embd=16, n_head=2, n_positions=32))
    m.eval()
    a, b = [3, 4, 5, 6, 7, 8], [9, 10, 11]
    ids = torch.tensor([a, [0, 0, 0, *b]])
    att = torch.tensor([[1] * 6, [0, 0, 0, 1, 1, 1]])
    pos = (att.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        out = m(ids, attention_mask=att, position_ids=pos, use_cache=True, logits_to_keep=1)
        assert out.logits.shape == (2, 1, 40)
        for row, seq in ((0, a), (1, b)):
            ref = m(torch.tensor([seq])).logits[0, -1]
            assert torch.allclose(out.logits[row, -1], ref, atol=1e-5)
        nxt = torch.tensor([12, 13])
        att2 = torch.cat([att, torch.ones(2, 1, dtype=att.dtype)], dim=1)
        step = m(
            nxt[:, None],
            attention_mask=att2,
            position_ids=pos[:, -1:] + 1,
            past_key_values=out.past_key_values,
            use_cache=True,
        )
        for row, seq in ((0, [*a, 12]), (1, [*b, 13])):
            ref = m(torch.tensor([seq])).logits[0, -1]
            assert torch.allclose(step.logits[row, -1], ref, atol=1e-5)


def test_tiny_gpt_decoding_into_a_kv_buffer_equals_the_concatenated_cache() -> None:
    from gemgym.rl.trainer.tinygpt import KVBuffer, TinyGPT, TinyGPTConfig

    torch.manual_seed(0)
    m = TinyGPT(TinyGPTConfig(vocab_size=40, n_layer=2, n_embd=16, n_head=2, n_positions=32))
    m.eval()
    ids = torch.tensor([[3, 4, 5, 6], [0, 9, 10, 11]])
    att = torch.tensor([[1, 1, 1, 1], [0, 1, 1, 1]])
    pos = (att.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        first = m(ids, attention_mask=att, position_ids=pos, use_cache=True)
        plain: object = first.past_key_values
        buf = KVBuffer.from_cache(first.past_key_values, capacity=7)
        assert buf.length == 4 and len(buf) == 2
        nxt, p = torch.tensor([[12], [13]]), pos[:, -1:]
        for step in range(3):
            att = torch.cat([att, torch.ones(2, 1, dtype=att.dtype)], dim=1)
            p = p + 1
            a = m(nxt, attention_mask=att, position_ids=p, past_key_values=plain, use_cache=True)
            b = m(nxt, attention_mask=att, position_ids=p, past_key_values=buf, use_cache=True)
            assert b.past_key_values is buf and buf.length == 5 + step
            assert torch.equal(a.logits, b.logits)
            plain = a.past_key_values
            for (k1, v1), (k2, v2) in zip(plain, buf, strict=True):  # type: ignore[call-overload]
                assert torch.equal(k1, k2) and torch.equal(v1, v2)
            nxt = a.logits[:, -1:].argmax(-1)
        # full: a fourth token has no room, and says so instead of writing past the end
        with pytest.raises(ValueError, match="7 positions"):
            m(nxt, attention_mask=att, position_ids=p + 1, past_key_values=buf, use_cache=True)
        wrapped = KVBuffer(buf.layers, 4)
        assert wrapped.length == 4 and wrapped.capacity == 7
        assert torch.equal(wrapped[0][0], buf.layers[0][0][:, :, :4])
        with pytest.raises(ValueError, match="under the 8"):
            KVBuffer(buf.layers, 8)


@pytest.mark.parametrize("tokenizer", ["bytes", "words"])
def test_masked_log_probs_equal_the_full_computation(tokenizer: str) -> None:
    from gemgym.rl.trainer.loop import token_log_probs

    torch.manual_seed(0)
    model, codec = build_model(**TINY, tokenizer=tokenizer)
    ids = torch.randint(0, codec.vocab_size, (3, 20))
    mask = torch.rand(3, 19) > 0.5
    full = token_log_probs(model, ids)
    assert full.shape == (3, 19) and bool((full < 0).all())
    part = token_log_probs(model, ids, mask)
    assert torch.allclose(part, full * mask, atol=1e-6)
    assert bool((part[~mask] == 0).all())


def _shared_head_batch(vocab: int, head: int = 24) -> tuple[object, object]:
    """Right-padded rows that begin with the same ``head`` tokens, scored after it."""
    g = torch.Generator().manual_seed(1)
    common = torch.randint(0, vocab, (head,), generator=g)
    lengths = [5, 17, 9, 30]
    ids = torch.zeros(len(lengths), head + max(lengths), dtype=torch.long)
    mask = torch.zeros(len(lengths), ids.shape[1] - 1, dtype=torch.bool)
    for i, n in enumerate(lengths):
        ids[i, : head + n] = torch.cat([common, torch.randint(0, vocab, (n,), generator=g)])
        mask[i, head - 1 : head + n - 1] = torch.rand(n, generator=g) < 0.6
    return ids, mask


def test_a_shared_head_is_computed_once_with_the_same_log_probs_and_gradients(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gemgym.rl.trainer import logprobs

    torch.manual_seed(0)
    model, codec = build_model(**TINY)
    ids, mask = _shared_head_batch(codec.vocab_size)
    assert logprobs.shared_prefix(model.transformer, ids, mask) == 23  # up to the first scored
    weights = torch.randn(mask.shape)
    calls: list[int] = []
    real = type(model.transformer).forward_shared_prefix

    def spy(self: object, input_ids: object, split: int) -> object:
        calls.append(split)
        return real(self, input_ids, split)

    monkeypatch.setattr(type(model.transformer), "forward_shared_prefix", spy)

    def run(min_shared: int) -> tuple[object, list[object]]:
        monkeypatch.setattr(logprobs, "MIN_SHARED_PREFIX", min_shared)
        model.zero_grad()
        logp = logprobs.token_log_probs(model, ids, mask)
        (logp * weights).sum().backward()
        return logp.detach(), [p.grad.clone() for p in model.parameters()]

    full, full_grads = run(10**9)
    assert calls == []
    shared, shared_grads = run(16)
    assert calls == [23]
    assert torch.allclose(full, shared, atol=1e-5)
    assert bool((shared[~mask] == 0).all())
    for a, b in zip(full_grads, shared_grads, strict=True):
        assert torch.allclose(a, b, atol=1e-4)
    # rows that differ early, or a scored position early, share nothing
    other = ids.clone()
    other[1, 3] = (other[1, 3] + 1) % codec.vocab_size
    assert logprobs.shared_prefix(model.transformer, other, mask) == 0
    early = mask.clone()
    early[2, 5] = True
    assert logprobs.shared_prefix(model.transformer, ids, early) == 0


@pytest.mark.parametrize("greedy", [True, False])
def test_generation_computes_a_common_context_head_once_and_samples_the_same(
    monkeypatch: pytest.MonkeyPatch, greedy: bool
) -> None:
    from gemgym.rl.trainer import policy

    assert policy._common_head([[1] * 20 + [2], [1] * 20 + [3, 4]]) == 20
    assert policy._common_head([[1] * 20, [1] * 20]) == 19  # each keeps a token of its own
    assert policy._common_head([[1] * 20 + [2], [1] * 5 + [3] * 16]) == 0  # under 16
    assert policy._common_head([[1] * 40]) == 0
    torch.manual_seed(0)
    model, codec = build_model(**TINY)
    head = list(range(3, 40))
    contexts = [head + [50 + i] * i for i in range(1, 7)] + [[*head, 9]]

    def generate(min_head: int) -> list[list[int]]:
        monkeypatch.setattr(policy, "MIN_COMMON_HEAD", min_head)
        pol = LMPolicy(model, codec, greedy=greedy, seed=5, max_new_tokens=8)
        return pol.generate(contexts)

    assert generate(16) == generate(10**9)


def test_min_p_samples_only_tokens_close_to_the_best_one() -> None:
    torch.manual_seed(0)
    model, codec = build_model(**TINY)
    context = [*codec.bos, *codec.encode("pick a number"), *codec.act_marker]
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([context])).logits[0, -1]
    probs = torch.softmax(logits[: codec.action_vocab_size or None].float(), -1)
    ranked = probs.sort(descending=True).values
    min_p = float((ranked[5] + ranked[6]) / 2 / ranked[0])  # keeps the 6 most likely tokens
    allowed = set(torch.nonzero(probs >= min_p * probs.max()).flatten().tolist())
    assert len(allowed) == 6

    def sample(**kw: float) -> tuple[list[int], list[float]]:
        pol = LMPolicy(model, codec, seed=1, max_new_tokens=1, **kw)  # type: ignore[arg-type]
        outs, logps = pol._sample([context] * 400)
        return [o[0] for o in outs], [lp[0] for lp in logps]

    hot, logps = sample(temperature=50.0, min_p=min_p)
    assert set(hot) == allowed  # all of them, and nothing else, at a high temperature
    wide, _ = sample(temperature=50.0)
    assert len(set(wide) - allowed) > 20  # without min_p a high temperature samples anything
    # the recorded log-probs are the policy's own (temperature 1, nothing ruled out)
    assert torch.allclose(torch.tensor(logps), torch.log(probs[hot]), atol=1e-4)


def test_keys_and_values_kept_between_turns_give_the_same_samples() -> None:
    """A turn encodes only the tokens added since the episode's last turn; samples and their
    log-probs are those of encoding the whole context, also after the weights change."""
    from gemgym.experience import Transition

    torch.manual_seed(0)
    model, codec = build_model(**TINY)
    ep = _episodes("oracle", 1)[0]
    encoded: list[int] = []
    forward = model.forward

    def spy(input_ids: torch.Tensor, *args: object, **kw: object) -> object:
        if input_ids.shape[1] > 1:  # a prompt, not a decoding step
            encoded[-1] += int(input_ids.numel())
        return forward(input_ids, *args, **kw)

    model.forward = spy  # type: ignore[method-assign]
    runs = {}
    for kv in (True, False):
        with torch.no_grad():  # the same weights for both runs
            for q in model.parameters():
                q.copy_(torch.linspace(-0.3, 0.3, q.numel()).reshape(q.shape).sin())
        pol = LMPolicy(model, codec, seed=7, max_new_tokens=6, kv_cache=kv)
        eps = [Episode(ep.env_id, i, ep.seed, ep.initial_observation, []) for i in range(3)]
        encoded.clear()
        for turn in range(4):
            encoded.append(0)  # tokens encoded by this turn's prompts
            if turn == 2:  # an update: kept keys and values are stale and must be dropped
                with torch.no_grad():
                    for q in model.parameters():
                        q.add_(torch.linspace(0, 5, q.numel()).reshape(q.shape).cos() * 0.2)
            actions = pol(eps)
            for i, (e, a) in enumerate(zip(eps, actions, strict=True)):
                obs = f"turn {turn}: the target is higher than {i}"
                e.transitions.append(Transition("o", a, 0.0, False, False, {}, obs))
        runs[kv] = (
            [[str(t.action) for t in e.transitions] for e in eps],
            [pol.sampled_log_probs(e) for e in eps],
            list(encoded),
        )
    (acts_kv, lp_kv, enc_kv), (acts, lp, enc) = runs[True], runs[False]
    assert acts_kv == acts
    for x, y in zip(lp_kv, lp, strict=True):
        assert x is not None and y is not None
        assert np.allclose(x, y, atol=1e-5)
    # turns 1 and 3 reuse the last turn's keys; turn 2 (new weights) encodes everything again
    assert enc_kv[0] == enc[0] and enc_kv[2] == enc[2]
    assert enc_kv[1] < enc[1] / 2 and enc_kv[3] < enc[3] / 3


def test_policy_context_is_a_prefix_of_the_training_tokens() -> None:
    torch.manual_seed(0)
    model, codec = build_model(**TINY)
    policy = LMPolicy(model, codec, obs_max_tokens=40)
    ep = _episodes("oracle", 1)[0]
    assert ep.length >= 2
    full = policy.tokenize(ep)
    for t in range(ep.length):
        partial = Episode(ep.env_id, 0, ep.seed, ep.initial_observation, ep.transitions[:t])
        ctx = policy.context(partial)
        assert full.input_ids[: len(ctx)].tolist() == ctx
        # the next tokens are action t, then EOS
        action = [*codec.encode(ep.transitions[t].action), codec.eos_id]
        assert full.input_ids[len(ctx) : len(ctx) + len(action)].tolist() == action
        assert set(full.turn_index[len(ctx) : len(ctx) + len(action)].tolist()) == {t}
    # observations are cut to obs_max_tokens and never trained on
    assert (full.turn_index == -1).sum() <= ep.length * (40 + 2) + 1
    # generation returns text, one action per episode; training reuses the sampled ids
    policy.max_new_tokens = 6
    eps = [Episode(ep.env_id, i, ep.seed, ep.initial_observation, []) for i in range(2)]
    actions = policy(eps)
    assert len(actions) == 2 and all(isinstance(a, str) for a in actions)
    for e, a in zip(eps, actions, strict=True):
        ids = policy.action_tokens(a, e, 0)
        assert 1 <= len(ids) <= 6
        assert codec.decode(ids) == a
        assert codec.eos_id not in ids[:-1]  # generation stops at EOS


def test_a_context_longer_than_the_models_positions_is_a_clear_error() -> None:
    torch.manual_seed(0)
    model, codec = build_model(**{**TINY, "n_positions": 160})
    policy = LMPolicy(model, codec, obs_max_tokens=128, max_new_tokens=16)
    ep = Episode(ENV, 0, 1, "x" * 200, [])
    # BOS + OBS + 128 observation bytes + ACT = 131 tokens: with 16 new ones, 147 <= 160
    assert len(policy.context(ep)) == 131
    assert len(policy([ep])) == 1
    policy.max_new_tokens = 30  # 131 + 30 > 160: said before any position overflows
    with pytest.raises(ConfigError, match=r"131 tokens .* 30 more, past the model's 160 .*"):
        policy([ep])


def test_training_tokens_are_the_ids_each_episode_sampled() -> None:
    """Two samples that decode to the same text keep their own ids (special ids are dropped
    from the text): crediting one episode's advantage to another's tokens taught the policy to
    stop writing EOS."""
    from gemgym.experience import Transition

    model, codec = build_model(**TINY)
    policy = LMPolicy(model, codec)
    ep = _episodes("oracle", 1)[0]
    a, b = (Episode(ep.env_id, i, ep.seed, ep.initial_observation, []) for i in range(2))
    with_eos = [*codec.encode("\\boxed{4}"), codec.eos_id]
    with_junk = [*codec.encode("\\boxed{4}"), ByteTokenizer.ACT, ByteTokenizer.OBS]
    sampled = ([with_eos, with_junk], [[-0.5] * len(with_eos), [-0.25] * len(with_junk)])
    policy._sample = lambda contexts, episodes=None: sampled  # type: ignore[method-assign]
    texts = policy([a, b])
    assert texts == ["\\boxed{4}", "\\boxed{4}"]
    for e, text in ((a, texts[0]), (b, texts[1])):
        e.transitions.append(Transition(e.initial_observation, text, 0.0, False, False, {}, "x"))
    ids_a = policy.tokenize(a).input_ids.tolist()
    ids_b = policy.tokenize(b).input_ids.tolist()
    assert ids_a[-len(with_eos) :] == with_eos
    assert ids_b[-len(with_junk) :] == with_junk
    assert policy.sampled_log_probs(a) == [-0.5] * len(with_eos)
    assert policy.sampled_log_probs(b) == [-0.25] * len(with_junk)
    # an action the policy did not write (e.g. an SFT trace) is encoded, with EOS
    c = Episode(ep.env_id, 2, ep.seed, ep.initial_observation, [])
    c.transitions.append(
        Transition(c.initial_observation, "\\boxed{4}", 0.0, False, False, {}, "x")
    )
    assert policy.tokenize(c).input_ids.tolist()[-len(with_eos) :] == with_eos


def test_policy_gradient_step_moves_log_prob_with_the_advantage_sign() -> None:
    torch.manual_seed(0)
    model, codec = build_model(**TINY)
    policy = LMPolicy(model, codec)
    ep = _episodes("oracle", 1)[0]
    tokens = [policy.tokenize(ep)]

    def action_logp() -> float:
        with torch.no_grad():
            ones = [t.action_mask.astype(np.float64) for t in tokens]
            return -float(
                policy_gradient_loss(model, tokens, ones, pad_id=codec.pad_id, device="cpu")
            )

    for sign in (+1.0, -1.0):
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        before = action_logp()
        w = [token_weights(tokens[0], [sign] * ep.length)]
        loss = policy_gradient_loss(model, tokens, w, pad_id=codec.pad_id, device="cpu")
        opt.zero_grad()
        loss.backward()
        opt.step()
        after = action_logp()
        assert (after - before) * sign > 0, (sign, before, after)


def test_clipped_loss_starts_as_the_policy_gradient_and_clips() -> None:
    from gemgym.rl import pad_batch
    from gemgym.rl.trainer.loop import token_log_probs

    torch.manual_seed(0)
    model, codec = build_model(**TINY)
    policy = LMPolicy(model, codec)
    eps = _episodes("random", 3)
    tokens = [policy.tokenize(e) for e in eps]
    w = [token_weights(t, np.linspace(-1, 1, t.num_turns)) for t in tokens]

    def grads(loss: torch.Tensor) -> list[torch.Tensor]:
        model.zero_grad()
        loss.backward()
        return [p.grad.clone() for p in model.parameters() if p.grad is not None]

    g_pg = grads(policy_gradient_loss(model, tokens, w, pad_id=codec.pad_id, device="cpu"))
    ids_np, _, w_np = pad_batch(tokens, w, pad_id=codec.pad_id)
    ids, wt = torch.from_numpy(ids_np), torch.from_numpy(w_np).float()
    with torch.no_grad():
        old = token_log_probs(model, ids)
    g_clip = grads(clipped_policy_loss(model, ids, wt, old))
    assert len(g_pg) == len(g_clip)
    for a, b in zip(g_pg, g_clip, strict=True):
        assert torch.allclose(a, b, atol=1e-6)
    # past the clip range (ratio e^1 with a positive weight) the loss gives no gradient
    g_far = grads(clipped_policy_loss(model, ids, wt.abs(), old - 1.0))
    assert all(float(g.abs().max()) == 0.0 for g in g_far)
    # a negative weight with the ratio at e^2: unbounded (r w) without the dual clip; with it
    # the term is c w, a constant, so it gives no gradient
    neg = -wt.abs()
    plain = clipped_policy_loss(model, ids, neg, old - 2.0)
    dual = clipped_policy_loss(model, ids, neg, old - 2.0, dual_clip=3.0)
    n = float((neg != 0).sum())
    total = float(wt.abs().sum())
    assert float(dual.detach()) == pytest.approx(3.0 * total / n, rel=1e-5)
    assert float(plain.detach()) == pytest.approx(float(np.e**2) * total / n, rel=1e-4)
    assert all(float(g.abs().max()) == 0.0 for g in grads(dual))
    # within the bound (ratio e^0.5 < 3) the dual clip changes nothing
    a = clipped_policy_loss(model, ids, neg, old - 0.5)
    b = clipped_policy_loss(model, ids, neg, old - 0.5, dual_clip=3.0)
    assert float(a.detach()) == pytest.approx(float(b.detach()))


def test_entropy_bonus_values_and_direction() -> None:
    from gemgym.rl import pad_batch
    from gemgym.rl.trainer.loop import token_log_probs, token_log_probs_and_entropy

    torch.manual_seed(0)
    model, codec = build_model(**TINY)
    ids = torch.randint(0, codec.vocab_size, (2, 12))
    mask = torch.rand(2, 11) > 0.4
    logp, ent = token_log_probs_and_entropy(model, ids, mask)
    assert torch.allclose(logp, token_log_probs(model, ids, mask))
    with torch.no_grad():
        full = torch.log_softmax(model(input_ids=ids).logits[:, :-1].float(), dim=-1)
    expect = -(full.exp() * full).sum(-1) * mask
    assert torch.allclose(ent, expect, atol=1e-5)
    assert bool((ent[mask] > 0).all()) and bool((ent[~mask] == 0).all())
    # the bonus is subtracted from the loss: c * mean entropy over the weighted tokens
    policy = LMPolicy(model, codec)
    tokens = [policy.tokenize(e) for e in _episodes("random", 2)]
    w = [token_weights(t, [0.5] * t.num_turns) for t in tokens]
    ids_np, _, w_np = pad_batch(tokens, w, pad_id=codec.pad_id)
    ids2, wt = torch.from_numpy(ids_np), torch.from_numpy(w_np).float()
    with torch.no_grad():
        old = token_log_probs(model, ids2, wt[:, 1:] != 0)
        _, ent2 = token_log_probs_and_entropy(model, ids2, wt[:, 1:] != 0)
        n = float((wt[:, 1:] != 0).sum())
        base_pg = float(policy_gradient_loss(model, tokens, w, pad_id=codec.pad_id, device="cpu"))
        bonus_pg = float(
            policy_gradient_loss(
                model, tokens, w, pad_id=codec.pad_id, device="cpu", entropy_coef=0.1
            )
        )
        base_clip = float(clipped_policy_loss(model, ids2, wt, old))
        bonus_clip = float(clipped_policy_loss(model, ids2, wt, old, entropy_coef=0.1))
    mean_ent = float(ent2.sum()) / n
    assert bonus_pg == pytest.approx(base_pg - 0.1 * mean_ent, rel=1e-5)
    assert bonus_clip == pytest.approx(base_clip - 0.1 * mean_ent, rel=1e-5)
    # with (almost) zero advantages only the bonus acts: a few steps raise the entropy
    tiny = [token_weights(t, [1e-9] * t.num_turns) for t in tokens]
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    for _ in range(3):
        loss = policy_gradient_loss(
            model, tokens, tiny, pad_id=codec.pad_id, device="cpu", entropy_coef=1.0
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        _, after = token_log_probs_and_entropy(model, ids2, wt[:, 1:] != 0)
    assert float(after.sum()) > float(ent2.sum())


def test_ppo_style_updates_run(tmp_path: Path) -> None:
    cfg = TrainConfig.from_flags(
        out=str(tmp_path),
        updates=2,
        estimator="reinforce",  # an untrained model's episodes all fail alike: ReBN gives 0
        episodes_per_update=4,
        epochs=2,
        minibatches=2,
        entropy_coef=0.01,
        eval_episodes=0,
        max_new_tokens=8,
        **TINY,
    )
    trainer = Trainer(cfg)
    before = [p.clone() for p in trainer.model.parameters()]
    trainer.run()
    assert trainer.update == 2
    assert all(r["learn_s"] >= 0 and r["collect_s"] > 0 for r in trainer.rows)
    assert any(
        not torch.equal(a, b) for a, b in zip(before, trainer.model.parameters(), strict=True)
    )
    with pytest.raises(Exception, match="minibatches"):
        TrainConfig.from_flags(updates=1, episodes_per_update=4, minibatches=8).validate()


def test_observation_tokens_get_no_gradient_signal() -> None:
    torch.manual_seed(0)
    model, codec = build_model(**TINY)
    policy = LMPolicy(model, codec)
    tok = policy.tokenize(_episodes("oracle", 1)[0])
    zero = [token_weights(tok, [0.0] * tok.num_turns)]
    loss = policy_gradient_loss(model, [tok], zero, pad_id=codec.pad_id, device="cpu")
    loss.backward()
    assert float(loss.detach()) == 0.0
    assert all(p.grad is None or float(p.grad.abs().sum()) == 0.0 for p in model.parameters())


def test_sft_lowers_the_loss_on_traces(tmp_path: Path) -> None:
    cfg = TrainConfig.from_flags(
        out=str(tmp_path), updates=1, sft_batch_size=8, sft_lr=3e-3, **TINY
    )
    trainer = Trainer(cfg)
    eps = _episodes("random", 16)
    tokens = [trainer.policy.tokenize(e) for e in eps]
    ones = [t.action_mask.astype(np.float64) for t in tokens]

    def loss() -> float:
        with torch.no_grad():
            return float(
                policy_gradient_loss(trainer.model, tokens, ones, pad_id=256, device="cpu")
            )

    before = loss()
    trainer.sft(eps, steps=15)
    assert loss() < before - 0.5


def test_sft_on_episodes_longer_than_the_models_positions_warns(tmp_path: Path) -> None:
    eps = _episodes("random", 4)
    short = Trainer(
        TrainConfig.from_flags(out=str(tmp_path / "s"), updates=1, sft_batch_size=4, **TINY)
    )
    longest = max(len(short.policy.tokenize(e)) for e in eps)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # episodes that fit: no warning
        short.sft(eps, steps=1)
    tiny = {**TINY, "n_positions": longest - 1}
    cut = Trainer(
        TrainConfig.from_flags(out=str(tmp_path / "c"), updates=1, sft_batch_size=4, **tiny)
    )
    n_long = sum(len(cut.policy.tokenize(e)) > longest - 1 for e in eps)
    with pytest.warns(
        UserWarning,
        match=rf"{n_long} of 4 SFT episodes are longer than the model's {longest - 1} positions",
    ):
        cut.sft(eps, steps=1)


def test_run_writes_curves_checkpoint_and_resumes(tmp_path: Path) -> None:
    traces = tmp_path / "random.jsonl"
    write_jsonl(_episodes("random", 16), traces)
    base = dict(
        out=str(tmp_path / "run"),
        estimator="grpo",
        group_size=2,
        episodes_per_update=4,
        sft=str(traces),
        sft_steps=3,
        sft_batch_size=4,
        eval_episodes=4,
        checkpoint_every=1,
        max_new_tokens=8,
        **TINY,
    )
    final = Trainer(TrainConfig.from_flags(updates=2, **base)).run()  # type: ignore[arg-type]
    run = tmp_path / "run"
    assert final["updates"] == 2 and final["eval"]["episodes"] == 4
    assert final["eval_greedy"]["episodes"] == 4
    assert {"curves.csv", "curves.png", "checkpoint.pt", "final.json"} <= {
        p.name for p in run.iterdir()
    }
    assert json.loads((run / "final.json").read_text())["updates"] == 2
    resumed = Trainer(TrainConfig.from_flags(updates=3, **base))  # type: ignore[arg-type]
    final = resumed.run(resume=True)
    assert final["updates"] == 3
    with open(run / "curves.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["update"]) for r in rows] == [1, 2, 3]
    assert all(0.0 <= float(r["success"]) <= 1.0 for r in rows)
    assert resumed.collector.next_group == 3 * 2  # seeds continue, never reused
    # a new run can start from a checkpoint's weights (a shared SFT warm start)
    init = dict(base, sft=None, out=str(tmp_path / "from_init"))
    started = Trainer(TrainConfig.from_flags(updates=0, init=str(run / "checkpoint.pt"), **init))  # type: ignore[arg-type]
    started.run()
    for a, b in zip(started.model.parameters(), resumed.model.parameters(), strict=True):
        assert torch.equal(a, b)


def test_config_errors() -> None:
    from gemgym.errors import ConfigError

    with pytest.raises(ConfigError, match="group_size"):
        TrainConfig.from_flags(estimator="grpo", group_size=1, updates=1).validate()
    # without a group size, a group estimator's is 8 (as gemgym train's always was)
    assert TrainConfig.from_flags(estimator="grpo", updates=1).rl.group_size_for_estimator == 8
    assert TrainConfig.from_flags(updates=1).rl.group_size_for_estimator == 1
    with pytest.raises(ConfigError, match="critic"):
        TrainConfig.from_flags(estimator="gae", updates=1).validate()
    with pytest.raises(ConfigError, match="updates or a time budget"):
        TrainConfig.from_flags().validate()
    with pytest.raises(ConfigError, match=r"\['bytes', 'words'\].*'bpe'"):
        TrainConfig.from_flags(tokenizer="bpe", updates=1).validate()
    with pytest.raises(ConfigError, match="its own tokenizer"):
        TrainConfig.from_flags(model="gpt2", tokenizer="words", updates=1).validate()
    with pytest.raises(ConfigError, match="its own tokenizer"):  # never silently ignored
        build_model("gpt2", tokenizer="words")


def test_cli_train(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gemgym.cli import main

    out = tmp_path / "cli"
    argv = ["train", ENV, "--out", str(out), "--updates", "1", "--episodes-per-update", "4"]
    argv += ["--n-layer", "1", "--n-embd", "16", "--eval-episodes", "4", "--quiet"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "1 updates" in printed and "eval on 4 episodes: success" in printed
    assert (out / "curves.csv").exists()
    assert main(["train", ENV, "--out", str(out)]) == 2  # neither updates nor a budget
    over = tmp_path / "cli_overlap"
    argv = ["train", ENV, "--out", str(over), "--updates", "2", "--episodes-per-update", "4"]
    argv += ["--n-layer", "1", "--n-embd", "16", "--eval-episodes", "0", "--quiet"]
    argv += ["--overlap", "--warmup-updates", "4", "--entropy-coef", "0.01", "--kl-coef", "0.05"]
    argv += ["--temperature", "1.3", "--min-p", "0.01", "--eval-temperature", "1.0"]
    argv += ["--n-head", "2", "--n-positions", "300"]
    argv += ["--entropy-ref-min", "0.5", "--entropy-schedule", "linear"]
    argv += ["--entropy-decay-until", "0.5", "--entropy-turns", "3", "--kl-schedule", "linear"]
    argv += ["--kl-decay-until", "0.75", "--kl-estimator", "exact"]
    capsys.readouterr()
    assert main(argv) == 0
    # --eval-episodes 0: no final evaluation, neither printed nor in final.json
    printed = capsys.readouterr().out
    assert "2 updates in" in printed and f"results in {over}" in printed
    assert "eval on" not in printed and "greedy decoding" not in printed
    assert not {"eval", "eval_greedy"} & set(json.loads((over / "final.json").read_text()))
    saved = json.loads((over / "final.json").read_text())["config"]
    assert saved["policy"]["n_head"] == 2 and saved["policy"]["n_positions"] == 300
    assert saved["run"]["overlap"] is True and saved["optim"]["warmup_updates"] == 4
    assert saved["entropy"]["coef"] == 0.01 and saved["kl"]["coef"] == 0.05
    assert saved["sampling"]["temperature"] == 1.3 and saved["sampling"]["min_p"] == 0.01
    assert saved["eval"]["temperature"] == 1.0
    assert saved["entropy"]["ref_min"] == 0.5 and saved["entropy"]["schedule"] == "linear"
    assert saved["entropy"]["decay_until"] == 0.5 and saved["entropy"]["turns"] == 3
    assert saved["kl"]["schedule"] == "linear"
    assert saved["kl"]["decay_until"] == 0.75 and saved["kl"]["estimator"] == "exact"
    target = tmp_path / "cli_target"
    argv = ["train", ENV, "--out", str(target), "--updates", "1", "--episodes-per-update", "4"]
    argv += ["--n-layer", "1", "--n-embd", "16", "--eval-episodes", "0", "--quiet"]
    argv += ["--entropy-coef", "0.1", "--entropy-turns", "2"]
    argv += ["--entropy-target", "1.5", "0.25", "--entropy-target-lr", "0.2"]
    assert main(argv) == 0
    saved = json.loads((target / "final.json").read_text())["config"]
    assert saved["entropy"]["target"] == [1.5, 0.25] and saved["entropy"]["target_lr"] == 0.2


def _overlap_config(tmp_path: Path, **kw: object) -> TrainConfig:
    base: dict[str, object] = dict(
        out=str(tmp_path),
        updates=3,
        estimator="reinforce",
        episodes_per_update=4,
        eval_episodes=0,
        max_new_tokens=8,
        checkpoint_every=0,
        **TINY,
    )
    base.update(kw)
    return TrainConfig.from_flags(**base)  # type: ignore[arg-type]


def test_overlap_collects_the_same_episodes_as_a_plain_run(tmp_path: Path) -> None:
    # with lr 0 the weights never change, so both modes must play exactly the same batches
    plain = Trainer(_overlap_config(tmp_path / "a", lr=0.0))
    plain.run()
    over = Trainer(_overlap_config(tmp_path / "b", lr=0.0, overlap=True))
    over.run()
    keys = ("success", "mean_turns", "mean_return")
    assert [[r[k] for k in keys] for r in over.rows] == [[r[k] for k in keys] for r in plain.rows]
    assert over.rollout_policy is not over.policy and plain.rollout_policy is plain.policy


def test_overlap_learns_from_batches_one_update_old(tmp_path: Path) -> None:
    trainer = Trainer(_overlap_config(tmp_path, lr=1e-2, updates=4, overlap=True))
    before_update: list[list[torch.Tensor]] = []  # learner weights when update u starts
    collected_with: list[list[torch.Tensor]] = []  # rollout weights of each collection
    rl_update, collect = trainer.rl_update, trainer.collection.collect_scored

    def spy_update() -> dict[str, object]:
        before_update.append([p.detach().clone() for p in trainer.model.parameters()])
        return rl_update()

    def spy_collect(n: int) -> object:
        model = trainer.rollout_policy.model
        collected_with.append([p.detach().clone() for p in model.parameters()])
        return collect(n)

    trainer.rl_update = spy_update  # type: ignore[method-assign]
    trainer.collection.collect_scored = spy_collect  # type: ignore[method-assign]
    trainer.run()
    assert trainer.update == 4
    assert not trainer.collection.in_flight and not trainer.collection.thread_running
    # collection 1 (update 1, in the foreground) and 2 (started during update 1) use the
    # weights update 1 started from; collection c > 1 uses those update c - 1 started from
    assert len(collected_with) == 5  # the last one is drained when the run ends
    for c, weights in enumerate(collected_with, start=1):
        expected = before_update[max(c - 1, 1) - 1]
        assert all(torch.equal(a, b) for a, b in zip(weights, expected, strict=True))
    assert not all(  # the weights did move
        torch.equal(a, b) for a, b in zip(before_update[0], before_update[-1], strict=True)
    )


def test_close_stops_the_collection_thread(tmp_path: Path) -> None:
    trainer = Trainer(_overlap_config(tmp_path, overlap=True))
    trainer.rl_update()  # leaves a collection running in the background
    assert trainer.collection.in_flight and trainer.collection.thread_running
    group = trainer.collection.state()[0]["next_group"]  # as before the pending collection
    trainer.close()
    assert not trainer.collection.in_flight and not trainer.collection.thread_running
    assert trainer.collector.next_group == group  # the unused batch's seeds are free again
    trainer.close()  # idempotent


def test_overlap_runs_are_reproducible_and_resume(tmp_path: Path) -> None:
    runs = []
    for name in ("a", "b"):
        t = Trainer(_overlap_config(tmp_path / name, lr=1e-2, overlap=True, checkpoint_every=1))
        t.run()
        runs.append(t)
    for a, b in zip(runs[0].model.parameters(), runs[1].model.parameters(), strict=True):
        assert torch.equal(a, b)
    assert [r["mean_return"] for r in runs[0].rows] == [r["mean_return"] for r in runs[1].rows]
    state = torch.load(tmp_path / "a" / "checkpoint.pt", weights_only=False)
    assert state["collector_group"] == 3 * 4  # the drained batch is collected again on resume
    resumed = Trainer(
        _overlap_config(tmp_path / "a", lr=1e-2, overlap=True, checkpoint_every=1, updates=4)
    )
    resumed.run(resume=True)
    assert [int(r["update"]) for r in resumed.rows] == [1, 2, 3, 4]


def test_learning_rate_warm_up(tmp_path: Path) -> None:
    trainer = Trainer(_overlap_config(tmp_path, lr=1e-3, warmup_updates=4, updates=1))
    trainer.run()
    assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(1e-3 / 4)
    trainer.config.run.updates = 6
    trainer.run(resume=True)
    assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(1e-3)
    from gemgym.errors import ConfigError

    with pytest.raises(ConfigError, match="warmup_updates"):
        TrainConfig.from_flags(updates=1, warmup_updates=-1).validate()
    with pytest.raises(ConfigError, match="dual_clip must be > 1"):
        TrainConfig.from_flags(updates=1, dual_clip=0.5).validate()
    with pytest.raises(ConfigError, match=r"entropy\.coef must be >= 0"):
        TrainConfig.from_flags(updates=1, entropy_coef=-0.1).validate()
    with pytest.raises(ConfigError, match=r"one of \['constant', 'cosine'\].*'linear'"):
        TrainConfig.from_flags(updates=1, lr_schedule="linear").validate()


def test_env_kwargs_reach_training_and_evaluation_envs(tmp_path: Path) -> None:
    trainer = Trainer(_overlap_config(tmp_path, env_kwargs={"partial_credit": False}, updates=1))
    final = trainer.run()
    env = trainer.collector.env.envs[0].unwrapped  # type: ignore[attr-defined]
    assert env.config.partial_credit is False
    assert final["updates"] == 1
    # every return is a win (1), a format error (-0.1) or nothing: no partial credit
    batch = trainer.collector.collect(4)
    assert {round(e.total_return, 6) for e in batch.episodes} <= {1.0, -0.1, 0.0}
    from gemgym.errors import ConfigError

    with pytest.raises(ConfigError, match="Did you mean 'partial_credit'"):
        Trainer(_overlap_config(tmp_path / "bad", env_kwargs={"partial": False}))


def test_cosine_learning_rate_schedule(tmp_path: Path) -> None:
    trainer = Trainer(_overlap_config(tmp_path, lr=1e-3, lr_schedule="cosine", updates=4))
    assert trainer.learning_rate() == pytest.approx(1e-3)
    trainer.update = 2  # half-way through 4 updates
    assert trainer.learning_rate() == pytest.approx(0.5e-3)
    trainer.config.optim.warmup_updates = 6  # warm-up multiplies: 3/6 of the cosine value
    assert trainer.learning_rate() == pytest.approx(0.25e-3)
    timed = Trainer(
        _overlap_config(tmp_path / "t", lr=1e-3, lr_schedule="cosine", time_budget=100.0)
    )
    timed.elapsed = 100.0  # a time budget is the horizon when there is one
    assert timed.learning_rate() == pytest.approx(0.0)
    timed.elapsed = 0.0
    timed.run()  # updates=3 stop it well before the budget: the rate has barely decayed
    assert timed.update == 3
    assert 0.9e-3 < timed.optimizer.param_groups[0]["lr"] < 1e-3


def test_overlap_behaviour_log_probs_are_the_collecting_policys(tmp_path: Path) -> None:
    from gemgym.rl.tokens import pad_batch
    from gemgym.rl.trainer.loop import token_log_probs

    trainer = Trainer(_overlap_config(tmp_path, overlap=True))
    trainer.collection.sync_rollout_policy()
    batch, tokens, behaviour, ref, ent_mask = trainer.collection.collect_scored(4)
    assert ref is None and ent_mask is None  # no kl_coef, no entropy_ref_min: no reference
    masks = [t.action_mask.astype(np.float64) for t in tokens]
    ids, _, m = pad_batch(tokens, masks, pad_id=trainer.codec.pad_id)
    mask = torch.from_numpy(m[:, 1:] != 0)
    with torch.no_grad():
        learner = token_log_probs(trainer.model, torch.from_numpy(ids), mask, trainer.vocab_limit)
    assert torch.allclose(behaviour, learner, atol=1e-5)  # same weights: every ratio is 1
    assert bool((behaviour[mask] < 0).all()) and int(mask.sum()) > 0
    assert bool((behaviour[~mask] == 0).all())


def test_behaviour_log_probs_are_recorded_while_sampling(tmp_path: Path) -> None:
    # the collecting policy's log-probs come from the sampling pass, not a second forward pass
    trainer = Trainer(_overlap_config(tmp_path, overlap=True))
    trainer.collection.sync_rollout_policy()
    scored: list[int] = []
    score = trainer.scorer.score

    def spy(model: object, tokens: list[object]) -> object:
        scored.append(len(tokens))
        return score(model, tokens)  # type: ignore[arg-type]

    trainer.scorer.score = spy  # type: ignore[method-assign,assignment]
    batch, tokens, behaviour, _, _ = trainer.collection.collect_scored(4)
    assert scored == []
    recomputed = score(trainer.rollout_policy.model, tokens)
    assert torch.allclose(behaviour, recomputed, atol=1e-5)
    # an action whose text no longer matches what was sampled: nothing recorded, so it is scored
    ep = batch.episodes[0]
    tr = ep.transitions[0]
    ep.transitions[0] = dataclasses.replace(tr, action=str(tr.action) + " ")
    assert trainer.rollout_policy.sampled_log_probs(ep) is None
    tokens = [trainer.rollout_policy.tokenize(e) for e in batch.episodes]
    assert trainer.collection.recorded_log_probs(batch, tokens) is None


def test_training_temperature_and_evaluation_temperature(tmp_path: Path) -> None:
    hot = Trainer(_overlap_config(tmp_path / "hot", temperature=4.0, eval_temperature=1.0))
    plain = Trainer(_overlap_config(tmp_path / "plain"))
    hot_all = Trainer(_overlap_config(tmp_path / "hot_all", temperature=4.0))

    def temperatures_seen(trainer: Trainer) -> set[float]:
        return {t for t, _ in sampling_seen(trainer)}

    def sampling_seen(trainer: Trainer) -> set[tuple[float, float]]:
        seen: set[tuple[float, float]] = set()
        generate = trainer.policy._generate

        def spy(*a: object, **kw: object) -> object:
            seen.add((trainer.policy.temperature, trainer.policy.min_p))
            return generate(*a, **kw)  # type: ignore[arg-type]

        trainer.policy._generate = spy  # type: ignore[method-assign,assignment]
        trainer.evaluate(8)
        del trainer.policy._generate
        return seen

    # evaluation samples at eval_temperature, by default at the training temperature
    assert temperatures_seen(hot) == {1.0} and hot.policy.temperature == 4.0  # restored
    assert temperatures_seen(hot_all) == {4.0} and temperatures_seen(plain) == {1.0}
    # with eval_temperature the full distribution (no min-p); without it, min-p as in training
    cut = Trainer(_overlap_config(tmp_path / "cut", temperature=2.0, min_p=0.1))
    assert sampling_seen(cut) == {(2.0, 0.1)}
    cut.config.eval.temperature = 1.0
    assert sampling_seen(cut) == {(1.0, 0.0)} and cut.policy.min_p == 0.1  # restored
    # the training batches are sampled hotter; their recorded log-probs are the policy's own
    batch, tokens, behaviour, _, _ = hot.collection.collect_scored(8)
    cold, _, _, _, _ = plain.collection.collect_scored(8)
    actions = [str(t.action) for e in batch.episodes for t in e.transitions]
    assert actions != [str(t.action) for e in cold.episodes for t in e.transitions]
    assert torch.allclose(behaviour, hot.scorer.score(hot.model, tokens), atol=1e-5)
    with pytest.raises(ConfigError, match="temperature"):
        TrainConfig.from_flags(updates=1, temperature=0.0).validate()
    with pytest.raises(ConfigError, match=r"eval\.temperature"):
        TrainConfig.from_flags(updates=1, eval_temperature=-1.0).validate()
    with pytest.raises(ConfigError, match="min_p"):
        TrainConfig.from_flags(updates=1, min_p=1.0).validate()


def _weighted_batch(n: int) -> tuple[Any, Any, list[Any], list[np.ndarray], Any, Any]:
    """A tiny random model, its codec, ``n`` random-agent episodes tokenized, weights 0.5 on
    their action tokens, and the padded ids and weights as tensors."""
    from gemgym.rl import pad_batch

    torch.manual_seed(0)
    model, codec = build_model(**TINY)
    policy = LMPolicy(model, codec)
    tokens = [policy.tokenize(e) for e in _episodes("random", n)]
    w = [token_weights(t, [0.5] * t.num_turns) for t in tokens]
    ids_np, _, w_np = pad_batch(tokens, w, pad_id=codec.pad_id)
    return model, codec, tokens, w, torch.from_numpy(ids_np), torch.from_numpy(w_np).float()


def test_kl_penalty_values_and_direction() -> None:
    from gemgym.rl.trainer import kl_penalty
    from gemgym.rl.trainer.loop import token_log_probs

    # the estimator by hand: exp(d) - d - 1 with d = ref - logp, averaged over the mask
    logp = torch.tensor([[-1.0, -2.0, -0.5]])
    ref = torch.tensor([[-1.0, -1.0, -3.0]])
    mask = torch.tensor([[True, True, False]])
    d = np.array([0.0, 1.0])
    expect = float(np.mean(np.exp(d) - d - 1))
    assert float(kl_penalty(logp, ref, mask)) == pytest.approx(expect)
    assert float(kl_penalty(ref, ref, mask)) == 0.0

    model, codec, tokens, w, ids, wt = _weighted_batch(3)
    acts = wt[:, 1:] != 0
    with torch.no_grad():
        ref_logp = token_log_probs(model, ids, acts)
        base = float(policy_gradient_loss(model, tokens, w, pad_id=codec.pad_id, device="cpu"))
        # at the reference itself the penalty is 0: the loss is unchanged
        same = float(
            policy_gradient_loss(
                model, tokens, w, pad_id=codec.pad_id, device="cpu", kl_coef=1.0, ref_logp=ref_logp
            )
        )
        assert same == pytest.approx(base, abs=1e-6)
        clip_same = float(
            clipped_policy_loss(
                model, ids, wt, ref_logp, kl_coef=1.0, ref_logp=ref_logp, action_mask=acts
            )
        )
        assert clip_same == pytest.approx(float(clipped_policy_loss(model, ids, wt, ref_logp)))
    # pushed away from the reference by an advantage, the penalty is positive and its
    # gradient steps move the policy back toward the reference
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    for _ in range(5):
        loss = policy_gradient_loss(model, tokens, w, pad_id=codec.pad_id, device="cpu")
        opt.zero_grad()
        loss.backward()
        opt.step()

    def kl_now() -> float:
        with torch.no_grad():
            return float(kl_penalty(token_log_probs(model, ids, acts), ref_logp, acts))

    away = kl_now()
    assert away > 0
    zero = [token_weights(t, [0.0] * t.num_turns) for t in tokens]
    for _ in range(5):
        loss = policy_gradient_loss(
            model, tokens, zero, pad_id=codec.pad_id, device="cpu", kl_coef=1.0, ref_logp=ref_logp
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert kl_now() < away
    from gemgym.errors import ConfigError

    with pytest.raises(ConfigError, match="ref_logp"):
        policy_gradient_loss(model, tokens, w, pad_id=codec.pad_id, device="cpu", kl_coef=0.1)
    with pytest.raises(ConfigError, match=r"kl\.coef must be >= 0"):
        TrainConfig.from_flags(updates=1, kl_coef=-1.0).validate()


def test_exact_kl_is_the_kl_over_the_vocabulary_and_its_gradient_is_pi_minus_ref() -> None:
    from gemgym.rl.trainer import exact_kl_penalty

    z = torch.tensor([[2.0, 0.0, -1.0, -8.0], [0.5, 0.5, 0.0, 0.0]], requires_grad=True)
    ref = torch.log_softmax(torch.tensor([[0.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, -1.0]]), -1)
    logp = torch.log_softmax(z, -1)
    p, q = logp.detach().exp().numpy(), ref.exp().numpy()
    expect = float(np.sum(q * (np.log(q) - np.log(p)))) / 2
    loss = exact_kl_penalty(logp, ref)
    assert float(loss.detach()) == pytest.approx(expect, rel=1e-5)
    loss.backward()
    assert z.grad is not None
    # d/dz KL(ref || softmax z) = softmax z - ref, per row, divided by the rows counted
    np.testing.assert_allclose(z.grad.numpy(), (p - q) / 2, atol=1e-6)
    # the token the policy has all but given up (p = 1e-4) is pulled up by ~ its reference
    # probability, 0.25, where k3's pull appears only on the steps that sample it
    assert float(z.grad[0, 3]) == pytest.approx((p[0, 3] - 0.25) / 2, abs=1e-6)
    assert float(exact_kl_penalty(ref, ref)) == pytest.approx(0.0, abs=1e-7)
    assert float(exact_kl_penalty(logp.detach(), ref, count=4)) == pytest.approx(
        expect / 2, rel=1e-5
    )


def test_exact_kl_in_the_losses_matches_a_direct_computation() -> None:
    from gemgym.rl.trainer import ReferenceDistribution
    from gemgym.rl.trainer.loop import token_log_probs

    model, codec, tokens, w, ids, wt = _weighted_batch(3)
    acts = wt[:, 1:] != 0
    ref_model = type(model)(model.config).eval()  # another random init: a different policy
    zero = [token_weights(t, [0.0] * t.num_turns) for t in tokens]
    with torch.no_grad():
        ref_all = torch.log_softmax(ref_model(input_ids=ids).logits[:, :-1].float(), -1)
        pol_all = torch.log_softmax(model(input_ids=ids).logits[:, :-1].float(), -1)
        kl_tok = (ref_all.exp() * (ref_all - pol_all)).sum(-1)
        direct = float(kl_tok[acts].mean())
        dist = ReferenceDistribution.from_mask(ref_all[acts], acts)
        pg = float(
            policy_gradient_loss(
                model, tokens, zero, pad_id=codec.pad_id, device="cpu", kl_coef=1.0, ref_logp=dist
            )
        )
        assert direct > 0 and pg == pytest.approx(direct, rel=1e-4)
        # the clipped loss on two chunks of the batch, indexed like tensors, adds up the same
        old = token_log_probs(model, ids, acts)
        wz = torch.zeros_like(wt)
        total = 0.0
        n_act = int(acts.sum())
        for rows in ([0], [1, 2]):
            sel = torch.tensor(rows)
            total += float(
                clipped_policy_loss(
                    model,
                    ids[sel],
                    wz[sel],
                    old[sel],
                    kl_coef=1.0,
                    ref_logp=dist[sel, :],
                    action_mask=acts[sel],
                    counts=(1, n_act),
                )
            )
        assert total == pytest.approx(direct, rel=1e-4)
    with pytest.raises(ValueError, match="did not score"):
        dist.at(torch.ones_like(acts))


@pytest.mark.parametrize("mode", ["plain", "overlap"])
def test_exact_kl_runs_pull_toward_the_reference(tmp_path: Path, mode: str) -> None:
    from gemgym.rl.trainer import ReferenceDistribution

    kw: dict[str, object] = dict(overlap=mode == "overlap", kl_coef=0.5, kl_estimator="exact")
    kw.update(entropy_coef=0.1, entropy_ref_min=0.3)  # the reference scores both in one pass
    trainer = Trainer(_overlap_config(tmp_path, **kw))
    tokens = [trainer.policy.tokenize(e) for e in _episodes("random", 4)]
    ref, ent_mask = trainer.reference_scores(tokens)
    _, acts = trainer.scorer.action_batch(tokens)
    assert isinstance(ref, ReferenceDistribution)
    assert ref.rows.shape == (int(acts.sum()), trainer.vocab_limit or ref.rows.shape[1])
    _, ent, mask = trainer.scorer.score_with_entropy(trainer.scorer.reference(), tokens)
    assert torch.equal(ent_mask, mask & (ent >= 0.3))  # the same mask as without exact KL
    seen: list[Any] = []
    ppo = trainer.ppo_steps

    def spy_ppo(*args, **kw):  # type: ignore[no-untyped-def]
        seen.append(args[3] if len(args) > 3 else kw.get("ref"))
        return ppo(*args, **kw)

    trainer.ppo_steps = spy_ppo  # type: ignore[method-assign]
    step = trainer.gradient_step

    def spy_step(tokens, weights, entropy_coef=0.0, kl_coef=0.0, ref=None, *rest):  # type: ignore[no-untyped-def]
        seen.append(ref)
        return step(tokens, weights, entropy_coef, kl_coef, ref, *rest)

    trainer.gradient_step = spy_step  # type: ignore[method-assign]
    trainer.run()
    assert len(seen) == 3 and all(isinstance(r, ReferenceDistribution) for r in seen)
    assert all(np.isfinite(r["loss"]) for r in trainer.rows)
    with pytest.raises(ConfigError, match=r"kl\.estimator must be one of"):
        TrainConfig.from_flags(updates=1, kl_coef=0.1, kl_estimator="k2").validate()
    with pytest.raises(ConfigError, match=r"give kl\.coef > 0 too"):
        TrainConfig.from_flags(updates=1, kl_estimator="exact").validate()
    with pytest.raises(ConfigError, match=r"kl\.decay_until must be in"):
        TrainConfig.from_flags(updates=1, kl_decay_until=0.0).validate()
    half = Trainer(
        _overlap_config(tmp_path / "h", kl_coef=0.2, kl_schedule="linear", kl_decay_until=0.5)
    )
    half.update = 1  # of 3: 0.2 * (1 - (1/3) / 0.5)
    assert half.kl_coefficient() == pytest.approx(0.2 * (1 - 2 / 3))
    half.update = 2
    assert half.kl_coefficient() == 0.0


@pytest.mark.parametrize("mode", ["plain", "overlap", "ppo"])
def test_kl_runs_keep_a_frozen_reference_and_resume_it(tmp_path: Path, mode: str) -> None:
    kw: dict[str, object] = {"overlap": mode == "overlap"}
    if mode == "ppo":
        kw.update(epochs=2, minibatches=2)
    cfg = TrainConfig.from_flags(
        out=str(tmp_path),
        updates=2,
        estimator="reinforce",
        episodes_per_update=4,
        kl_coef=0.5,
        eval_episodes=0,
        checkpoint_every=1,
        max_new_tokens=8,
        **TINY,
        **kw,  # type: ignore[arg-type]
    )
    trainer = Trainer(cfg)
    start = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.run()
    assert trainer.update == 2 and all(np.isfinite(r["loss"]) for r in trainer.rows)
    ref = list(trainer.ref_model.parameters())
    assert all(torch.equal(a, b) for a, b in zip(start, ref, strict=True))  # frozen
    assert not all(
        torch.equal(a, b) for a, b in zip(start, trainer.model.parameters(), strict=True)
    )
    assert not any(p.requires_grad for p in ref)
    # a resumed run gets the saved reference back, not its current weights
    cfg2 = copy.deepcopy(cfg)
    cfg2.run.updates = 3
    again = Trainer(cfg2)
    again.run(resume=True)
    assert again.update == 3
    assert all(torch.equal(a, b) for a, b in zip(start, again.ref_model.parameters(), strict=True))


def test_length_chunks_sort_cover_and_pad_less() -> None:
    from gemgym.rl.trainer.loop import length_chunks

    rng = np.random.default_rng(0)
    lengths = rng.integers(100, 400, size=64)
    idx = rng.permutation(64)[:48]
    chunks = length_chunks(lengths, idx)
    assert len(chunks) == 3  # 48 episodes, ~16 per chunk
    assert sorted(np.concatenate(chunks).tolist()) == sorted(idx.tolist())
    flat = lengths[np.concatenate(chunks)]
    assert (np.diff(flat) >= 0).all()  # shortest first
    padded = sum(len(c) * int(lengths[c].max()) for c in chunks)
    assert padded < len(idx) * int(lengths[idx].max())
    assert len(length_chunks(lengths, idx[:5])) == 1
    assert len(length_chunks(lengths, np.arange(64))) == 4


@pytest.mark.parametrize("extras", ["plain", "entropy_kl_dual"])
def test_chunked_losses_add_up_to_the_whole_batch(extras: str) -> None:
    """Chunks padded to their own length, normalised by the batch's token counts: the summed
    loss and gradients equal the whole padded batch's (what ``_ppo_steps`` relies on)."""
    from gemgym.rl import pad_batch
    from gemgym.rl.trainer.loop import length_chunks, token_log_probs

    torch.manual_seed(0)
    model, codec = build_model(**TINY)
    policy = LMPolicy(model, codec)
    tokens = [policy.tokenize(e) for e in _episodes("random", 12)]
    rng = np.random.default_rng(1)
    w = [token_weights(t, rng.normal(size=t.num_turns)) for t in tokens]
    ids_np, _, w_np = pad_batch(tokens, w, pad_id=codec.pad_id)
    ids, wt = torch.from_numpy(ids_np), torch.from_numpy(w_np).float()
    acts = wt[:, 1:] != 0
    with torch.no_grad():
        old = token_log_probs(model, ids, acts) + 0.3 * torch.randn(acts.shape) * acts
        ref = token_log_probs(model, ids, acts) - 0.2 * acts
    kw: dict[str, object] = {}
    if extras != "plain":
        kw = {"entropy_coef": 0.05, "kl_coef": 0.1, "dual_clip": 3.0}

    def loss_of(rows: torch.Tensor, counts: tuple[int, int] | None) -> torch.Tensor:
        n = int(max(len(tokens[int(r)]) for r in rows))
        return clipped_policy_loss(
            model,
            ids[rows, :n],
            wt[rows, :n],
            old[rows, : n - 1],
            ref_logp=ref[rows, : n - 1],
            action_mask=acts[rows, : n - 1],
            counts=counts,
            **kw,  # type: ignore[arg-type]
        )

    everything = torch.arange(len(tokens))
    model.zero_grad()
    whole = loss_of(everything, None)
    whole.backward()
    g_whole = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    lengths = np.array([len(t) for t in tokens])
    chunks = length_chunks(lengths, np.arange(len(tokens)))
    # force several chunks even for this small batch
    chunks = [c for c in np.array_split(np.concatenate(chunks), 3)]
    assert len({int(lengths[c].max()) for c in chunks}) > 1  # really padded differently
    counts = (int(acts.sum()), int(acts.sum()))
    total = 0.0
    for c in chunks:
        part = loss_of(torch.from_numpy(c), counts)
        part.backward()
        total += float(part.detach())
    assert total == pytest.approx(float(whole.detach()), rel=1e-5, abs=1e-6)
    for a, p in zip(g_whole, model.parameters(), strict=True):
        assert torch.allclose(a, p.grad, atol=1e-6)


def test_entropy_bonus_restricted_to_a_mask_counts_only_those_tokens() -> None:
    from gemgym.rl.trainer.loop import token_log_probs, token_log_probs_and_entropy

    model, codec, tokens, w, ids, wt = _weighted_batch(2)
    acts = wt[:, 1:] != 0
    some = acts & (torch.arange(acts.shape[1]) % 3 == 0)  # a third of the action tokens
    assert 0 < int(some.sum()) < int(acts.sum())
    with torch.no_grad():
        old = token_log_probs(model, ids, acts)
        _, ent = token_log_probs_and_entropy(model, ids, acts)
        n = float(acts.sum())

        def pg(**kw: object) -> float:
            loss = policy_gradient_loss(model, tokens, w, pad_id=codec.pad_id, device="cpu", **kw)  # type: ignore[arg-type]
            return float(loss.detach())

        base_pg, base_clip = pg(), float(clipped_policy_loss(model, ids, wt, old))
        masked_pg = pg(entropy_coef=0.1, entropy_mask=some)
        masked_clip = float(
            clipped_policy_loss(model, ids, wt, old, entropy_coef=0.1, entropy_mask=some)
        )
    # c * (the masked tokens' entropy summed) / (all weighted tokens)
    bonus = 0.1 * float(ent[some].sum()) / n
    assert masked_pg == pytest.approx(base_pg - bonus, rel=1e-5)
    assert masked_clip == pytest.approx(base_clip - bonus, rel=1e-5)
    # with zero-ish advantages only the bonus acts, and only on the masked tokens: their
    # entropy rises, while an all-False mask leaves the loss with no bonus at all
    none = torch.zeros_like(some)
    assert pg(entropy_coef=0.1, entropy_mask=none) == pytest.approx(base_pg, rel=1e-6)
    tiny = [token_weights(t, [1e-9] * t.num_turns) for t in tokens]
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    for _ in range(3):
        loss = policy_gradient_loss(
            model,
            tokens,
            tiny,
            pad_id=codec.pad_id,
            device="cpu",
            entropy_coef=1.0,
            entropy_mask=some,
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        _, after = token_log_probs_and_entropy(model, ids, acts)
    assert float(after[some].sum()) > float(ent[some].sum())


@pytest.mark.parametrize("overlap", [False, True])
def test_entropy_ref_min_masks_the_tokens_where_the_reference_hesitates(
    tmp_path: Path, overlap: bool
) -> None:
    from gemgym.rl.tokens import pad_batch
    from gemgym.rl.trainer.loop import token_log_probs_and_entropy

    cfg = _overlap_config(
        tmp_path, overlap=overlap, entropy_coef=0.05, entropy_ref_min=0.0, updates=2
    )
    trainer = Trainer(cfg)
    trainer.collection.sync_rollout_policy()
    batch, tokens, _, ref, ent_mask = trainer.collection.collect_scored(4)
    assert ref is None  # no kl_coef: the reference is only scored for its entropy
    masks = [t.action_mask.astype(np.float64) for t in tokens]
    ids, _, m = pad_batch(tokens, masks, pad_id=trainer.codec.pad_id)
    acts = torch.from_numpy(m[:, 1:] != 0)
    assert torch.equal(ent_mask, acts)  # 0 nats: every action token
    with torch.no_grad():
        _, ent = token_log_probs_and_entropy(
            trainer.model, torch.from_numpy(ids), acts, trainer.vocab_limit
        )
    # the reference is the starting weights: the mask is their entropy >= the threshold, on
    # the action tokens only
    middle = float(ent[acts].median())
    trainer.config.entropy.ref_min = middle
    ent_mask = trainer.reference_scores(tokens)[1]
    assert torch.equal(ent_mask, acts & (ent >= middle))
    assert 0 < int(ent_mask.sum()) < int(acts.sum())
    trainer.config.entropy.ref_min = 1e9  # none
    assert not bool(trainer.reference_scores(tokens)[1].any())
    # a whole run: the curve records the sampled decision tokens' -log pi (with overlap, where
    # the collecting policy's log-probs are at hand), the reference stays frozen
    trainer.config.entropy.ref_min = middle
    start = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    trainer.run()
    assert trainer.update == 2 and trainer.ref_model is not None
    for k, v in trainer.ref_model.state_dict().items():
        assert torch.equal(v, start[k])
    with open(tmp_path / "curves.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    if overlap:
        assert all(float(r["decision_entropy"]) > 0 for r in rows)


@pytest.mark.parametrize("overlap", [False, True])
def test_entropy_turns_masks_the_first_k_actions(tmp_path: Path, overlap: bool) -> None:
    from gemgym.rl.tokens import pad_batch

    cfg = _overlap_config(tmp_path, overlap=overlap, entropy_coef=0.05, entropy_turns=1, updates=2)
    trainer = Trainer(cfg)
    trainer.collection.sync_rollout_policy()
    _, _, _, ref, _ = trainer.collection.collect_scored(4)
    assert ref is None and trainer.ref_model is None  # the turns need no reference
    # the random agent's episodes: the untrained model's often end at its first (malformed) move
    tokens = [trainer.policy.tokenize(e) for e in _episodes("random", 8)]
    assert max(t.num_turns for t in tokens) > 2  # some episodes have later turns to leave out
    ent_mask = trainer.reference_scores(tokens)[1]

    def targets(keep: list[np.ndarray], batch: list[Any] | None = None) -> torch.Tensor:
        eps = tokens if batch is None else batch
        m = pad_batch(eps, [k.astype(np.float64) for k in keep], pad_id=trainer.codec.pad_id)
        return torch.from_numpy(m[2][:, 1:] != 0)

    first = targets([t.turn_index == 0 for t in tokens])
    assert torch.equal(ent_mask, first)
    assert 0 < int(first.sum()) < int(targets([t.action_mask for t in tokens]).sum())
    # with entropy_ref_min too: both conditions (a threshold of 0 nats keeps every action)
    trainer.config.entropy.ref_min = 0.0
    trainer.config.entropy.turns = 2
    assert torch.equal(
        trainer.reference_scores(tokens)[1],
        targets([(t.turn_index >= 0) & (t.turn_index < 2) for t in tokens]),
    )
    trainer.config.entropy.ref_min = 1e9  # no token hesitates that much: none, whatever the turn
    assert not bool(trainer.reference_scores(tokens)[1].any())
    trainer.config.entropy.ref_min = None
    # a whole run: each loss step gets the mask of the first two actions of the batch it learns
    learned: list[tuple[list[Any], torch.Tensor]] = []
    step, ppo = trainer.gradient_step, trainer.ppo_steps

    def spy_step(tokens, weights, entropy_coef=0.0, kl_coef=0.0, ref=None, mask=None):  # type: ignore[no-untyped-def]
        learned.append((tokens, mask))
        return step(tokens, weights, entropy_coef, kl_coef, ref, mask)

    def spy_ppo(tokens, *args, **kw):  # type: ignore[no-untyped-def]
        learned.append((tokens, kw["entropy_mask"]))
        return ppo(tokens, *args, **kw)

    trainer.gradient_step, trainer.ppo_steps = spy_step, spy_ppo  # type: ignore[method-assign]
    trainer.run()
    assert trainer.update == 2 and len(learned) == 2
    for tokens, mask in learned:
        first_two = [(t.turn_index >= 0) & (t.turn_index < 2) for t in tokens]
        assert torch.equal(mask, targets(first_two, tokens))
    with pytest.raises(ConfigError, match=r"entropy\.turns must be >= 1"):
        TrainConfig.from_flags(updates=1, entropy_coef=0.1, entropy_turns=0).validate()
    with pytest.raises(ConfigError, match=r"give entropy\.coef > 0 too"):
        TrainConfig.from_flags(updates=1, entropy_turns=2).validate()


@pytest.mark.parametrize("overlap", [False, True])
def test_the_reference_stops_scoring_once_its_coefficients_reach_0(
    tmp_path: Path, overlap: bool
) -> None:
    kw: dict[str, object] = dict(
        overlap=overlap,
        entropy_coef=0.2,
        entropy_ref_min=0.0,
        entropy_schedule="linear",
        entropy_decay_until=0.5,
        updates=4,
    )
    trainer = Trainer(_overlap_config(tmp_path / "a", **kw))
    tokens = [trainer.policy.tokenize(e) for e in _episodes("random", 4)]
    scored: list[int] = []
    score = trainer.scorer.score_with_entropy

    def spy_score(model, toks):  # type: ignore[no-untyped-def]
        scored.append(trainer.update)
        return score(model, toks)

    trainer.scorer.score_with_entropy = spy_score  # type: ignore[method-assign]
    assert trainer.reference_scores(tokens)[1] is not None and scored == [0]
    trainer.update = 2  # half-way: the bonus is 0 from here on, and the reference idle
    assert trainer.entropy_coefficient() == 0.0
    assert trainer.reference_scores(tokens) == (None, None) and scored == [0]
    # the KL's reference log-probs likewise, at the end of its linear decay
    trainer.config.kl.coef, trainer.config.kl.schedule = 0.1, "linear"
    trainer.update = 3
    assert trainer.reference_scores(tokens)[0] is not None
    trainer.update = 4
    assert trainer.reference_scores(tokens) == (None, None)
    # a whole run: the loss steps of the second half get no mask (overlap: the batch of
    # update 3 may have been scored just before half-way, while update 2 was learned)
    fresh = Trainer(_overlap_config(tmp_path / "b", **kw))
    masks: list[Any] = []
    step, ppo = fresh.gradient_step, fresh.ppo_steps

    def spy_step(tokens, weights, entropy_coef=0.0, kl_coef=0.0, ref=None, mask=None):  # type: ignore[no-untyped-def]
        masks.append(mask)
        return step(tokens, weights, entropy_coef, kl_coef, ref, mask)

    def spy_ppo(tokens, *args, **kw):  # type: ignore[no-untyped-def]
        masks.append(kw["entropy_mask"])
        return ppo(tokens, *args, **kw)

    fresh.gradient_step, fresh.ppo_steps = spy_step, spy_ppo  # type: ignore[method-assign]
    fresh.run()
    assert len(masks) == 4
    assert masks[0] is not None and masks[1] is not None and masks[3] is None
    if not overlap:
        assert masks[2] is None


@pytest.mark.parametrize("overlap", [False, True])
def test_kl_schedule_decays_the_coefficient_the_loss_gets(tmp_path: Path, overlap: bool) -> None:
    trainer = Trainer(
        _overlap_config(tmp_path, overlap=overlap, kl_coef=0.2, kl_schedule="linear", updates=4)
    )
    seen: list[float] = []
    step, ppo = trainer.gradient_step, trainer.ppo_steps

    def spy_step(tokens, weights, entropy_coef=0.0, kl_coef=0.0, *rest):  # type: ignore[no-untyped-def]
        seen.append(kl_coef)
        return step(tokens, weights, entropy_coef, kl_coef, *rest)

    def spy_ppo(*args, **kw):  # type: ignore[no-untyped-def]
        seen.append(args[6] if len(args) > 6 else kw["kl_coef"])
        return ppo(*args, **kw)

    trainer.gradient_step, trainer.ppo_steps = spy_step, spy_ppo  # type: ignore[method-assign]
    trainer.run()
    assert seen == pytest.approx([0.2, 0.15, 0.1, 0.05])  # 0.2 * (1 - update / 4)
    trainer.config.kl.schedule = "constant"
    assert trainer.kl_coefficient() == pytest.approx(0.2)


@pytest.mark.parametrize("overlap", [False, True])
def test_entropy_target_adapts_the_bonus_toward_the_line(tmp_path: Path, overlap: bool) -> None:
    kw: dict[str, object] = dict(overlap=overlap, entropy_coef=0.1, entropy_ref_min=0.0)
    # a target no policy can reach (the moves' entropy is under log 264 < 6 nats): up each update
    high = Trainer(_overlap_config(tmp_path / "high", entropy_target=(50.0, 50.0), **kw))
    high.run()
    with open(tmp_path / "high" / "curves.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    coefs = [float(r["entropy_coef"]) for r in rows]
    entropies = [float(r["decision_entropy"]) for r in rows]  # measured in both modes
    assert len(coefs) == 3 and coefs[0] == pytest.approx(0.1)
    assert coefs[1] > coefs[0] and coefs[2] > coefs[1]
    # log c moved by lr * (target - H) after each update
    assert math.log(coefs[1] / coefs[0]) == pytest.approx(0.05 * (50.0 - entropies[0]), abs=1e-3)
    assert high.entropy_coefficient() == pytest.approx(1.0)  # the bound: exp(0)
    # a target of 0 nats: the bonus falls, and never under 1e-3
    low = Trainer(_overlap_config(tmp_path / "low", entropy_target=(0.0, 0.0), **kw))
    assert low.entropy_coefficient() == pytest.approx(0.1)
    assert low.adapt_entropy_coef(2.0) == pytest.approx(0.1 * math.exp(-0.1))
    for _ in range(200):
        low.adapt_entropy_coef(5.0)
    assert low.entropy_coefficient() == pytest.approx(1e-3)
    # the line: start + (end - start) * progress
    line = Trainer(_overlap_config(tmp_path / "line", entropy_target=(2.0, 0.4), updates=4, **kw))
    line.update = 1
    assert line.entropy_target_now() == pytest.approx(1.6)
    # kept across a resume: the checkpoint holds the adapted coefficient
    high.save(tmp_path / "ckpt.pt")
    again = Trainer(_overlap_config(tmp_path / "again", entropy_target=(50.0, 50.0), **kw))
    assert again.entropy_coefficient() == pytest.approx(0.1)
    again.load(tmp_path / "ckpt.pt")
    assert again.entropy_coefficient() == pytest.approx(high.entropy_coefficient())
    for bad, match in (
        (dict(entropy_target=(1.0,)), "two entropies"),
        (dict(entropy_target=(1.0, -0.5)), "two entropies"),
        (dict(entropy_target=(1.0, 0.2), entropy_coef=0.0), "give entropy.coef > 0"),
        (dict(entropy_target=(1.0, 0.2), entropy_ref_min=None), "entropy.ref_min or entropy.turns"),
        (dict(entropy_target=(1.0, 0.2), entropy_schedule="linear"), "leave entropy.schedule"),
        (dict(entropy_target_lr=0.0), "entropy.target_lr must be > 0"),
    ):
        with pytest.raises(ConfigError, match=match):
            TrainConfig.from_flags(
                **{"updates": 1, "entropy_coef": 0.1, "entropy_ref_min": 0.0, **bad}
            ).validate()  # type: ignore[arg-type]
    listed = TrainConfig.from_flags(
        updates=1, entropy_coef=0.1, entropy_turns=1, entropy_target=[1.0, 0.5]
    )  # type: ignore[arg-type]
    listed.validate()  # as a config read from JSON gives it
    assert listed.entropy.target == (1.0, 0.5)
    from gemgym.rl.trainer import EntropyConfig

    direct = EntropyConfig(coef=0.1, turns=1, target=[1, 0.5])  # type: ignore[arg-type]
    assert direct.target == [1, 0.5]  # validation changes no value...
    assert direct.target_range == (1.0, 0.5)  # ...what the trainer uses is derived from it


def test_entropy_schedule_and_errors(tmp_path: Path) -> None:
    trainer = Trainer(
        _overlap_config(tmp_path, entropy_coef=0.2, entropy_schedule="linear", updates=4)
    )
    assert trainer.entropy_coefficient() == pytest.approx(0.2)
    trainer.update = 3
    assert trainer.entropy_coefficient() == pytest.approx(0.05)
    trainer.config.entropy.schedule = "constant"
    assert trainer.entropy_coefficient() == pytest.approx(0.2)
    timed = Trainer(
        _overlap_config(
            tmp_path / "t", entropy_coef=0.2, entropy_schedule="linear", time_budget=100.0
        )
    )
    timed.elapsed = 75.0
    assert timed.entropy_coefficient() == pytest.approx(0.05)
    timed.config.entropy.decay_until = 0.5  # 0 from half-way on
    assert timed.entropy_coefficient() == 0.0
    timed.elapsed = 25.0
    assert timed.entropy_coefficient() == pytest.approx(0.1)
    with pytest.raises(ConfigError, match=r"entropy\.decay_until must be in \(0, 1\]"):
        TrainConfig.from_flags(updates=1, entropy_decay_until=0.0).validate()
    with pytest.raises(ConfigError, match=r"entropy\.ref_min must be >= 0"):
        TrainConfig.from_flags(updates=1, entropy_ref_min=-1.0).validate()
    with pytest.raises(ConfigError, match=r"give entropy\.coef > 0 too"):
        TrainConfig.from_flags(updates=1, entropy_ref_min=0.3).validate()  # it would do nothing
    with pytest.raises(ConfigError, match=r"one of \['constant', 'linear'\]"):
        TrainConfig.from_flags(updates=1, entropy_schedule="cosine").validate()
    with pytest.raises(ConfigError, match=r"kl\.schedule must be one of \['constant', 'linear'\]"):
        TrainConfig.from_flags(updates=1, kl_schedule="cosine").validate()
