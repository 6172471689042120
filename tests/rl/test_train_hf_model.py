"""``gemgym train --model PATH``: a Hugging Face chat model trained through gemgym.llm.

The model is a tiny random-initialised Qwen2 chat model written by
:func:`gemgym.llm.testing.build_tiny_chat_model` (the same path as real weights).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from helpers.extras import needs_module, reason

pytest.importorskip("torch", reason=reason("train", "could not import torch"))
pytest.importorskip("transformers", reason=reason("train", "could not import transformers"))

import torch

from gemgym.cli import main
from gemgym.episodes.outcomes import derive_seed
from gemgym.errors import ConfigError
from gemgym.experience import Episode, Transition
from gemgym.llm.testing import build_tiny_chat_model
from gemgym.rl.trainer import TrainConfig, Trainer
from gemgym.rl.trainer.hf_policy import ChatCollector, ChatPolicy
from gemgym.rl.trainer.logprobs import token_log_probs

# an untrained model writes malformed guesses: every batch is format errors
pytestmark = pytest.mark.filterwarnings("ignore::gemgym.rl.trainer.FormatErrorWarning")

ENV = "game:GuessTheNumber-v0-easy"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_chat_model(tmp_path_factory.mktemp("tiny") / "model", "chatml")


def weights(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(path / "model.safetensors"))


def test_train_model_two_updates_change_the_weights_and_write_the_outputs(
    model_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    argv = ["train", ENV, "--model", str(model_dir), "--updates", "2", "--out", str(out)]
    argv += ["--episodes-per-update", "4", "--max-new-tokens", "8", "--estimator", "reinforce"]
    argv += ["--lr", "0.01", "--eval-episodes", "4", "--quiet"]
    assert main(argv) == 0
    for name in ("curves.csv", "curves.png", "checkpoint.pt", "final.json"):
        assert (out / name).is_file()
    with open(out / "curves.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["update"] for r in rows] == ["1", "2"] and all(r["loss"] for r in rows)
    final = json.loads((out / "final.json").read_text())
    assert final["updates"] == 2 and final["config"]["policy"]["model"] == str(model_dir)
    assert final["eval"]["episodes"] == 4
    # the trained model, loadable as the one it started from, with other weights
    before, after = weights(model_dir), weights(out / "model")
    assert before.keys() == after.keys()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    reloaded = AutoModelForCausalLM.from_pretrained(out / "model")
    assert AutoTokenizer.from_pretrained(out / "model").chat_template
    loaded = reloaded.state_dict()
    assert all(torch.equal(loaded[k], after[k]) for k in after)


def test_batches_are_token_records_and_their_logprobs_are_the_models(
    model_dir: Path, tmp_path: Path
) -> None:
    cfg = TrainConfig.from_flags(
        env_id=ENV,
        model=str(model_dir),
        out=str(tmp_path),
        updates=1,
        episodes_per_update=4,
        group_size=2,
        estimator="grpo",
        max_new_tokens=8,
        eval_episodes=0,
        device="cpu",
    )
    trainer = Trainer(cfg)
    try:
        assert isinstance(trainer.policy, ChatPolicy)
        assert isinstance(trainer.collector, ChatCollector)
        batch = trainer.collector.collect(4)
        records = trainer.collector.records
        assert batch.group_ids == [0, 0, 1, 1] and trainer.collector.next_group == 2
        base = derive_seed(cfg.run.seed, "stream", "train")  # the run's stream of reset seeds
        assert base is not None and [r.seed for r in records] == [base, base, base + 1, base + 1]
        for ep, rec in zip(batch.episodes, records, strict=True):
            tok = trainer.policy.tokenize(ep)
            assert tok.input_ids.tolist() == rec.input_ids  # the sampled ids, verbatim
            assert tok.action_mask.astype(int).tolist() == rec.loss_mask
            assert [str(t.action) for t in ep.transitions] == [t.action_text for t in rec.turns]
            # the recorded log-probs are the model's own (a forward pass recomputes them)
            recorded = trainer.policy.sampled_log_probs(ep)
            assert recorded is not None and len(recorded) == rec.num_action_tokens
            ids = torch.tensor([rec.input_ids])
            full = token_log_probs(trainer.model, ids)[0]
            pos = [i - 1 for i, m in enumerate(rec.loss_mask) if m]
            assert torch.allclose(full[pos], torch.tensor(recorded), atol=1e-4)
    finally:
        trainer.close()


def test_episodes_it_did_not_play_are_rendered_with_the_chat_template(model_dir: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from gemgym.rl.trainer.codec import HFCodec

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    policy = ChatPolicy(model, HFCodec(tok), max_new_tokens=4)
    ep = Episode("x", 0, 0, "guess 1-10")
    ep.transitions.append(Transition("guess 1-10", r"\boxed{5}", 0.0, False, False, {}, "higher"))
    ep.transitions.append(Transition("higher", r"\boxed{8}", 1.0, True, False, {}, "correct"))
    rec = policy.record(ep)
    want = tok.apply_chat_template(
        [
            {"role": "user", "content": "guess 1-10"},
            {"role": "assistant", "content": r"\boxed{5}"},
            {"role": "user", "content": "higher"},
            {"role": "assistant", "content": r"\boxed{8}"},
        ],
        tokenize=False,
    )
    assert tok.decode(rec.input_ids, skip_special_tokens=False) == want
    assert tok.decode([t for t, m in zip(rec.input_ids, rec.loss_mask, strict=True) if m]) == (
        r"\boxed{5}<|im_end|>\boxed{8}<|im_end|>"
    )
    # the context of the next action ends with the generation prompt
    ctx = tok.decode(policy.context(ep), skip_special_tokens=False)
    assert ctx.endswith("<|im_start|>user\ncorrect<|im_end|>\n<|im_start|>assistant\n")


# peft asks transformers for a name it deprecated (not gemgym's to fix)
@pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")
def test_lora_trains_adapters_only_and_saves_the_merged_model(
    model_dir: Path, tmp_path: Path
) -> None:
    needs_module("peft", "peft")
    cfg = TrainConfig.from_flags(
        env_id=ENV,
        model=str(model_dir),
        out=str(tmp_path / "lora"),
        lora_rank=4,
        estimator="reinforce",
        updates=2,
        lr=0.05,
        episodes_per_update=4,
        max_new_tokens=8,
        eval_episodes=0,
        device="cpu",
    )
    trainer = Trainer(cfg)
    trainable = {n for n, p in trainer.model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    frozen = {
        n: p.detach().clone() for n, p in trainer.model.named_parameters() if n not in trainable
    }
    trainer.run()
    assert all(
        torch.equal(p, frozen[n]) for n, p in trainer.model.named_parameters() if n in frozen
    )
    before, after = weights(model_dir), weights(tmp_path / "lora" / "model")
    assert before.keys() == after.keys()  # a plain model: the adapters are merged in
    assert any(not torch.equal(before[k], after[k]) for k in before)


def test_model_settings_are_checked(model_dir: Path) -> None:
    # the library names the parameters, the command line their flags
    with pytest.raises(ConfigError, match=r"policy\.lora_rank .* give one with policy\.model"):
        TrainConfig.from_flags(lora_rank=4, updates=1).validate()
    import argparse

    from gemgym.cli.train import add_arguments, config_from_args

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    with pytest.raises(ConfigError, match=r"^--lora-rank .* give one with --model too$"):
        config_from_args(parser.parse_args(["--lora-rank", "4", "--updates", "1"]))
    with pytest.raises(ConfigError, match="min_p"):
        TrainConfig.from_flags(model=str(model_dir), min_p=0.1, updates=1).validate()


def test_a_plain_collector_drives_the_chat_policy_with_the_same_rendering(
    model_dir: Path,
) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from gemgym.rl import Collector
    from gemgym.rl.trainer.codec import HFCodec

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    policy = ChatPolicy(model, HFCodec(tok), max_new_tokens=6)
    with Collector(ENV, policy, num_envs=2, history=True) as col:
        batch = col.collect(2)
    for ep in batch.episodes:
        rec = policy.record(ep)  # rendered, with the ids sampled in policy(episodes) calls
        logps = policy.sampled_log_probs(ep)
        assert logps is not None and len(logps) == rec.num_action_tokens
        texts = [tok.decode(t.action_ids, skip_special_tokens=True) for t in rec.turns]
        assert texts == [str(t.action) for t in ep.transitions]
        # the sampled log-probs are the model's at the record's positions
        ids = torch.tensor([rec.input_ids])
        with torch.no_grad():
            full = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), dim=-1)
        pos = [i - 1 for i, m in enumerate(rec.loss_mask) if m]
        want = full[pos].gather(-1, ids[0, 1:][pos][:, None])[:, 0]
        assert torch.allclose(want, torch.tensor(logps), atol=1e-4)
