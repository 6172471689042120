"""What a run tells its user: SFT progress, the time budget's split, batches of format errors."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from helpers.extras import needs_module

torch = needs_module("torch", "train")
needs_module("transformers", "train")

from gemgym.agents import make_agent  # noqa: E402
from gemgym.experience import rollout, write_jsonl  # noqa: E402
from gemgym.rl import Collector  # noqa: E402
from gemgym.rl.trainer import (  # noqa: E402
    FormatErrorWarning,
    TrainConfig,
    Trainer,
    format_error_share,
)
from gemgym.rl.trainer.sft import supervised_fine_tune  # noqa: E402

ENV = "game:GuessTheNumber-v0-easy"
TINY = {"n_layer": 1, "n_embd": 16, "n_head": 2, "n_positions": 512}


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


def _config(tmp_path: Path, **kw: Any) -> TrainConfig:
    base: dict[str, Any] = dict(
        env_id=ENV,
        out=str(tmp_path / "run"),
        updates=2,
        estimator="reinforce",
        episodes_per_update=4,
        eval_episodes=0,
        max_new_tokens=8,
        checkpoint_every=0,
        **TINY,
    )
    base.update(kw)
    return TrainConfig.from_flags(**base)


def test_format_error_share_counts_the_episodes_the_env_could_not_read() -> None:
    with Collector(ENV, lambda obs: ["no guess here"] * len(obs), num_envs=2) as col:
        bad = col.collect(4).episodes
    good = list(rollout(ENV, make_agent("random"), episodes=4, seed=3))
    assert format_error_share(bad) == 1.0
    assert format_error_share(good) == 0.0
    assert format_error_share(bad[:1] + good[:3]) == 0.25
    assert format_error_share([]) == 0.0


def test_a_batch_of_only_format_errors_warns_once_and_the_run_counts_them(tmp_path: Path) -> None:
    # an untrained model writes no valid guess: every batch is format errors, every return -0.1
    lines: list[str] = []
    trainer = Trainer(_config(tmp_path, updates=3), log=lines.append)
    with pytest.warns(FormatErrorWarning, match=r"nothing to learn from.*sft\.path") as caught:
        trainer.run()
    message = str(next(w for w in caught if w.category is FormatErrorWarning).message)
    assert "sft.init_checkpoint" in message and "(--" not in message  # settings, not flags
    assert len([w for w in caught if w.category is FormatErrorWarning]) == 1  # not every update
    assert all(
        r["success"] == 0.0 and r["mean_return"] == pytest.approx(-0.1) for r in trainer.rows
    )
    assert trainer.format_error_updates == 3
    assert any("3 of the run's updates had only format errors" in line for line in lines)


def test_a_batch_with_a_readable_action_does_not_warn(tmp_path: Path) -> None:
    trainer = Trainer(_config(tmp_path), log=lambda _m: None)
    good = list(rollout(ENV, make_agent("random"), episodes=3, seed=3))
    collect = trainer.collector.collect

    def mixed(n: int) -> Any:  # one format error among valid episodes: something to learn
        batch = collect(n)
        batch.episodes[1:] = good
        return batch

    trainer.collector.collect = mixed  # type: ignore[method-assign]
    with warnings.catch_warnings():
        warnings.simplefilter("error", FormatErrorWarning)
        trainer.run()
    assert trainer.format_error_updates == 0 and trainer.update == 2


def test_sft_logs_its_progress_about_every_tenth_of_its_steps() -> None:
    lines: list[str] = []
    losses = iter(np.linspace(2.0, 0.5, 25))
    tokens = [np.arange(4)]

    class Tok:
        action_mask = np.array([False, True, True, False])

    loss = supervised_fine_tune(
        tokens,  # type: ignore[arg-type]
        25,
        tokenize=lambda _e: Tok(),  # type: ignore[arg-type,return-value]
        step=lambda batch, weights: float(next(losses)),
        batch_size=8,
        seed=0,
        max_length=None,
        log=lines.append,
    )
    assert loss == pytest.approx(0.5)
    steps = [int(line.split()[2].split("/")[0]) for line in lines]
    assert steps == [3, 6, 9, 12, 15, 18, 21, 24, 25]  # every ceil(25 / 10) steps, and the last
    assert all(line.startswith("SFT step ") and "/25: loss " in line for line in lines)
    assert "s left)" in lines[0] and lines[-1].endswith("about 0 s left)")


def test_a_run_with_sft_and_a_time_budget_says_how_the_budget_is_split(tmp_path: Path) -> None:
    traces = tmp_path / "traces.jsonl"
    write_jsonl(list(rollout(ENV, make_agent("random"), episodes=8, seed=3)), traces)
    lines: list[str] = []
    cfg = _config(
        tmp_path,
        updates=1,
        time_budget=3600.0,
        sft=str(traces),
        sft_steps=20,
        sft_batch_size=4,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FormatErrorWarning)
        Trainer(cfg, log=lines.append).run()
    plan = next(i for i, line in enumerate(lines) if line.startswith("SFT: 20 steps"))
    assert "time budget of 3600 s covers SFT and RL" in lines[plan]
    progress = [line for line in lines if line.startswith("SFT step ")]
    assert [line.split()[2] for line in progress] == [f"{k}/20:" for k in range(2, 21, 2)]
    assert plan < lines.index(progress[0])  # the plan comes before the first step
    split = next(line for line in lines if line.startswith("time budget 3600 s: SFT took"))
    assert "RL gets the remaining" in split
    assert lines.index(split) < next(i for i, s in enumerate(lines) if s.startswith("update"))
    # without a time budget there is nothing to split
    lines.clear()
    cfg = _config(tmp_path / "b", updates=0, sft=str(traces), sft_steps=2, sft_batch_size=4)
    Trainer(cfg, log=lines.append).run()
    assert lines[0].startswith("SFT: 2 steps") and "budget" not in " ".join(lines)


def test_gemgym_train_prints_sft_progress_and_warns_about_format_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gemgym.cli import main

    traces = tmp_path / "traces.jsonl"
    write_jsonl(list(rollout(ENV, make_agent("random"), episodes=8, seed=3)), traces)
    argv = [
        "train",
        ENV,
        "--sft",
        str(traces),
        "--sft-steps",
        "4",
        "--sft-batch-size",
        "4",
        "--time-budget",
        "600",
        "--updates",
        "1",
        "--episodes-per-update",
        "4",
        "--max-new-tokens",
        "8",
        "--eval-episodes",
        "4",
        "--n-layer",
        "1",
        "--n-embd",
        "16",
        "--n-head",
        "2",
        "--out",
        str(tmp_path / "run"),
    ]
    with pytest.warns(FormatErrorWarning):
        assert main(argv) == 0
    out = capsys.readouterr().out
    assert "SFT step 4/4" in out and "time budget 600 s: SFT took" in out
    assert "1 updates in" in out and (tmp_path / "run" / "final.json").exists()
