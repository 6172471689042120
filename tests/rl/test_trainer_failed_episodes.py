"""The reference trainer and failed episodes: left out of the update by default (their group
baselined on the episodes left), kept with ``keep_errors``, counted in the log and the curves."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from helpers.extras import needs_module

torch = needs_module("torch", "train")
needs_module("transformers", "train")

from gemgym.core import Env  # noqa: E402
from gemgym.errors import GemGymError  # noqa: E402
from gemgym.registry import register, registry  # noqa: E402
from gemgym.rl.collector import Batch  # noqa: E402
from gemgym.rl.trainer import TrainConfig, Trainer  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::gemgym.rl.trainer.FormatErrorWarning")

ENV = "test:TrainerBreaks-v0"
TINY = {"n_layer": 1, "n_embd": 16, "n_head": 2, "n_positions": 256, "max_new_tokens": 4}


class _Breaks(Env[str, str]):
    """One step per episode, rewarded with the number of its reset mod 3 (so the members of a
    group differ); the step raises in the resets numbered in :attr:`fail` (``-1``: all)."""

    resets: ClassVar[int] = 0
    fail: ClassVar[set[int]] = set()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self.k = _Breaks.resets
        _Breaks.resets += 1
        return "Say anything.", {}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.k in _Breaks.fail or -1 in _Breaks.fail:
            raise RuntimeError("the env broke")
        return "done", float(self.k % 3), True, False, {}


@pytest.fixture(autouse=True)
def _env() -> Iterator[None]:
    torch.set_num_threads(1)
    register(ENV, _Breaks, override=True)
    _Breaks.resets, _Breaks.fail = 0, set()
    yield
    registry.unregister(ENV)


def _config(tmp_path: Path, **kw: Any) -> TrainConfig:
    base: dict[str, Any] = {
        "env_id": ENV,
        "out": str(tmp_path),
        "updates": 1,
        "estimator": "grpo",
        "group_size": 4,
        "episodes_per_update": 8,
        "eval_episodes": 0,
        "checkpoint_every": 0,
        "lr": 1e-2,
        **TINY,
    }
    return TrainConfig.from_flags(**{**base, **kw})


def _spy(trainer: Trainer) -> list[Batch]:
    """The batches the trainer's collector hands the update."""
    seen: list[Batch] = []
    collect = trainer.collector.collect

    def spy(n: int) -> Batch:
        batch = collect(n)
        seen.append(batch)
        return batch

    trainer.collector.collect = spy  # type: ignore[method-assign]
    return seen


def test_a_failed_episode_is_left_out_and_its_group_keeps_the_rest(tmp_path: Path) -> None:
    _Breaks.fail = {2}  # one episode of the batch breaks
    lines: list[str] = []
    trainer = Trainer(_config(tmp_path), log=lines.append)
    batches = _spy(trainer)
    before = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.run()
    (batch,) = batches
    assert len(batch) == 7 and batch.errors == 1
    (failed,) = batch.failed
    assert failed.failed and failed.error_stage == "step" and "the env broke" in str(failed.error)
    assert all(not e.failed for e in batch.episodes)
    # its group keeps its other three episodes, baselined on them alone
    group = failed.group
    mates = [i for i, g in enumerate(batch.group_ids) if g == group]
    assert len(mates) == 3 and sorted(batch.group_ids).count(1 - group) == 4
    returns = np.array([batch.episodes[i].total_return for i in mates])
    assert returns.std() > 0  # the test means something: the mates' returns differ
    adv = batch.advantages("grpo")
    want = (returns - returns.mean()) / (returns.std() + 1e-6)
    assert np.allclose([adv[i][0] for i in mates], want)
    # the update learnt from the rest, and the log and the curves count the failure
    assert any(
        not torch.equal(a, b) for a, b in zip(before, trainer.model.parameters(), strict=True)
    )
    (row,) = trainer.rows
    assert row["errors"] == 1 and np.isfinite(row["loss"])
    assert row["success"] == pytest.approx(sum(e.success for e in batch.episodes) / 8)
    assert any(line.startswith("update    1") and "errors 1" in line for line in lines)
    with open(tmp_path / "curves.csv", encoding="utf-8") as f:
        assert [r["errors"] for r in csv.DictReader(f)] == ["1"]


def test_keep_errors_trains_on_failed_episodes(tmp_path: Path) -> None:
    _Breaks.fail = {2}
    trainer = Trainer(_config(tmp_path, keep_errors=True))
    batches = _spy(trainer)
    row = trainer.rl_update()
    (batch,) = batches
    assert len(batch) == 8 and batch.errors == 0 and batch.failed == []
    (failed,) = [e for e in batch.episodes if e.failed]
    assert batch.group_ids.count(failed.group) == 4  # its whole group, itself included
    assert row["errors"] == 0


def test_ppo_minibatches_with_fewer_episodes_left_than_minibatches(tmp_path: Path) -> None:
    _Breaks.fail = {0}
    cfg = _config(
        tmp_path, estimator="reinforce", group_size=1, episodes_per_update=4, minibatches=4
    )
    trainer = Trainer(cfg)
    steps: list[int] = []
    step = trainer.learner.optimizer.step

    def count(*args: Any, **kwargs: Any) -> Any:
        steps.append(1)
        return step(*args, **kwargs)

    trainer.learner.optimizer.step = count  # type: ignore[method-assign]
    row = trainer.rl_update()
    assert row["errors"] == 1 and np.isfinite(row["loss"])
    assert len(steps) == 3  # one step per episode left, no empty minibatch


def test_an_update_whose_every_episode_failed_stops_with_the_first_error(
    tmp_path: Path,
) -> None:
    _Breaks.fail = {-1}
    trainer = Trainer(_config(tmp_path))
    with pytest.raises(
        GemGymError, match=r"every episode of update 1 failed; the first at step"
    ) as e:
        trainer.run()
    assert "(rl.keep_errors trains on failed episodes anyway)" in str(e.value)
    trainer.close()
