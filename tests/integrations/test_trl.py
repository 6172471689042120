"""TRL: real GRPO steps on CPU with the tiny random-initialised chat model, on multi-turn envs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar

import pytest

from helpers.extras import needs_module

needs_module("trl", "trl")
pytestmark = [
    pytest.mark.trl,
    pytest.mark.filterwarnings("ignore::UserWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),  # TRL 1.16 on transformers 5.24
]
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import torch  # noqa: E402
from trl import GRPOConfig  # noqa: E402

from gemgym.integrations.trl import GemgymGRPOTrainer, episodes_to_rollout  # noqa: E402
from gemgym.llm.record import TokenEpisode  # noqa: E402
from gemgym.llm.testing import build_tiny_chat_model  # noqa: E402

from .conftest import VarietyEnv  # noqa: E402


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_chat_model(tmp_path_factory.mktemp("tiny") / "m", "chatml")


def _config(out: Path, steps: int) -> GRPOConfig:
    return GRPOConfig(
        output_dir=str(out),
        per_device_train_batch_size=4,
        num_generations=4,
        max_steps=steps,
        max_completion_length=8,
        learning_rate=5e-2,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        seed=0,
    )


def _params(model: Any) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def test_grpo_trains_on_mixed_multi_turn_envs(tiny_model: Path, tmp_path: Path) -> None:
    log: list[TokenEpisode] = []
    trainer = GemgymGRPOTrainer(
        str(tiny_model),
        {"variety": VarietyEnv, "guess": "game:GuessTheNumber-v0-easy"},
        _config(tmp_path, 3),
        num_tasks=6,
        max_turns=3,
        episode_log=log,
    )
    before = _params(trainer.model)
    trainer.train()
    after = _params(trainer.model)
    assert any(not torch.equal(before[n], after[n]) for n in before)  # the weights moved

    steps = [h for h in trainer.state.log_history if "reward" in h]
    assert len(steps) == 3 and len(log) == 3 * 4
    for k, h in enumerate(steps):
        eps = log[4 * k : 4 * (k + 1)]
        # the rewards TRL trained on are the env's returns
        assert h["reward"] == pytest.approx(sum(e.total_return for e in eps) / 4, abs=1e-5)
        # TRL counted only the sampled tokens: env and template tokens were masked out
        mean_action = sum(e.num_action_tokens for e in eps) / 4
        assert h["completions/mean_length"] == pytest.approx(mean_action)
    # both envs were played (rows alternate), the variety env for several turns
    assert {e.env_id for e in log} == {"variety", "guess"}
    assert max(len(e.turns) for e in log if e.env_id == "variety") == 3
    # a GRPO group is one env from one seed
    assert len({(e.env_id, e.seed) for e in log[:4]}) == 1


def test_rollout_rows_mask_env_tokens(tiny_model: Path, tmp_path: Path) -> None:
    trainer = GemgymGRPOTrainer(
        str(tiny_model), VarietyEnv, _config(tmp_path, 1), num_tasks=2, max_turns=3
    )
    episodes = trainer.play([{"env": "env", "seed": 5}] * 2)
    out = episodes_to_rollout(episodes, eos_token_id=0)
    for ep, ids, mask, lps in zip(
        episodes, out["completion_ids"], out["env_mask"], out["logprobs"], strict=True
    ):
        assert len(ep.turns) == 3
        assert ep.prompt_ids + ids == ep.input_ids[: len(ep.prompt_ids) + len(ids)]
        assert mask == ep.loss_mask[len(ep.prompt_ids) : len(ep.prompt_ids) + len(ids)]
        assert sum(mask) == ep.num_action_tokens
        sampled = [lp for t in ep.turns for lp in (t.logprobs or [])]
        assert [lp for lp, m in zip(lps, mask, strict=True) if m] == sampled
    assert out["env_return"] == [e.total_return for e in episodes]


def test_rebn_advantages_are_per_token(tiny_model: Path, tmp_path: Path) -> None:
    seen: list[torch.Tensor] = []

    class Spy(GemgymGRPOTrainer):
        def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> Any:
            out = super()._generate_and_score_completions(inputs)
            seen.append(out["advantages"])
            return out

    trainer = Spy(
        str(tiny_model),
        VarietyEnv,
        _config(tmp_path, 2),
        num_tasks=4,
        max_turns=3,
        advantage="rebn",
        gamma=0.5,
    )
    before = _params(trainer.model)
    trainer.train()
    assert any(not torch.equal(before[n], p) for n, p in _params(trainer.model).items())
    adv = seen[-1]
    assert adv.dim() == 2  # (episodes, completion tokens)
    eps = trainer.gemgym_episodes
    from gemgym.llm.record import token_advantages

    want = token_advantages(eps, "rebn", gamma=0.5)
    for i, ep in enumerate(eps):
        tail = torch.as_tensor(want[i][len(ep.prompt_ids) :], dtype=torch.float32)
        n = min(len(tail), adv.shape[1])
        assert torch.allclose(seen[-1][i, :n], tail[:n], atol=1e-5)


class _BrokenEnv(VarietyEnv):
    """Its step raises in the first episode reset with seed 7 (one episode of that group)."""

    fail: ClassVar[list[int]] = []

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        self.broken = seed == 7 and bool(_BrokenEnv.fail) and bool(_BrokenEnv.fail.pop())
        return super().reset(seed=seed, options=options)

    def step(self, action: str) -> Any:
        if self.broken and self.t >= 1:
            raise RuntimeError("the env broke")
        return super().step(action)


def test_failed_episodes_are_left_out_of_training(tiny_model: Path, tmp_path: Path) -> None:
    trainer = GemgymGRPOTrainer(
        str(tiny_model), _BrokenEnv, _config(tmp_path, 1), num_tasks=2, max_turns=3,
        advantage="rebn",
    )  # fmt: skip
    rows = [{"env": "env", "seed": 7}] * 2 + [{"env": "env", "seed": 8}] * 2
    _BrokenEnv.fail = [1]
    episodes = trainer.play(rows)
    failed = [e.finish_reason == "error" for e in episodes]
    assert sorted(failed) == [False, False, False, True]
    bad = failed.index(True)
    mate = 1 - bad  # the other episode of its group
    assert sum(episodes_to_rollout(episodes, 0)["env_mask"][bad]) == 0  # no loss on it
    assert episodes[bad].error_stage == "step" and "the env broke" in str(episodes[bad].error)
    assert episodes[bad].num_action_tokens > 0  # it sampled before its env broke
    groups = [(r["env"], r["seed"]) for r in rows]
    out = episodes_to_rollout(episodes, 0, groups=groups)
    # no loss on its tokens, and its group's mean return is its mate's alone
    assert sum(out["env_mask"][bad]) == 0
    assert out["env_return"][bad] == pytest.approx(episodes[mate].total_return)
    for i in range(4):
        if i != bad:
            assert sum(out["env_mask"][i]) == episodes[i].num_action_tokens
            assert out["env_return"][i] == episodes[i].total_return
    kept = episodes_to_rollout(episodes, 0, groups=groups, keep_errors=True)
    assert sum(kept["env_mask"][bad]) == episodes[bad].num_action_tokens
    assert kept["env_return"][bad] == episodes[bad].total_return
    # gemgym's estimators: no advantage for it, the others' computed without it
    trainer.gemgym_episodes, trainer._gemgym_rows = episodes, rows
    adv = trainer._token_advantages(torch.zeros((4, 64), dtype=torch.long))
    assert torch.count_nonzero(adv[bad]) == 0
    assert all(torch.count_nonzero(adv[i]) > 0 for i in range(4) if i != bad)


def test_constant_groups() -> None:
    from gemgym.integrations.trl import constant_groups

    assert constant_groups([-0.1, -0.1, 1.0, 1.0], ["a", "a", "b", "b"])
    assert not constant_groups([-0.1, 0.5, 1.0, 1.0], ["a", "a", "b", "b"])
    assert constant_groups([], [])


def test_a_batch_without_signal_warns_once(tiny_model: Path, tmp_path: Path) -> None:
    from gemgym.integrations.trl import NoLearningSignalWarning

    # the untrained model never writes \boxed{N}: every episode is a format error (-0.1), so
    # every GRPO advantage is 0, which the old example showed only as loss 0 and grad 0
    log: list[TokenEpisode] = []
    trainer = GemgymGRPOTrainer(
        str(tiny_model), "game:GuessTheNumber-v0-easy", _config(tmp_path, 2), num_tasks=4,
        max_turns=2, episode_log=log,
    )  # fmt: skip
    with pytest.warns(NoLearningSignalWarning, match=r"same return \(-0\.1\).*format error"):
        trainer.train()
    assert all(e.total_return == pytest.approx(-0.1) for e in log)
    assert trainer.gemgym_no_signal_steps == 2
