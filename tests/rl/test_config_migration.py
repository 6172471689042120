"""A checkpoint written by the flat ``TrainConfig`` (before the sections) still loads and resumes.

``tests/rl/data/legacy_flat`` holds a checkpoint and ``final.json`` that ``gemgym train`` wrote
at commit 894c537, with most settings off their defaults, and what that code gave when it
resumed the checkpoint for one more update (its README has the commands). Today's code must
read the flat config into the same settings and continue the run to the same update, weights
and final evaluation."""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from gemgym.errors import ConfigError
from gemgym.rl.trainer.config import (
    LEGACY_FLAT_NAMES,
    SECTIONS,
    TrainConfig,
    config_from_dict,
    migrate_flat_config,
)
from helpers.extras import needs_module

DATA = Path(__file__).parent / "data" / "legacy_flat"


def _flat() -> dict[str, Any]:
    saved: dict[str, Any] = json.loads((DATA / "final.json").read_text())["config"]
    return saved


def test_every_flat_setting_has_one_place_in_the_sections() -> None:
    places = list(LEGACY_FLAT_NAMES.values())
    assert len(places) == len(set(places))  # no two flat settings land on the same field
    fields = {(s, n) for s, names in SECTIONS.items() for n in names}
    # every field of today has its flat ancestor, but those added after the flat form
    added_since = {("run", "wrappers")}
    assert added_since <= fields
    assert set(places) == fields - added_since
    assert set(_flat()) == set(LEGACY_FLAT_NAMES)  # the checkpoint's dict had exactly these


def test_the_flat_config_of_the_old_checkpoint_migrates_to_the_same_settings() -> None:
    flat = _flat()
    cfg = config_from_dict(flat)  # a flat dict is recognised and migrated
    assert cfg == config_from_dict(migrate_flat_config(flat))
    # every value as it was, under its new name
    assert (cfg.run.env_id, cfg.run.env_kwargs, cfg.run.seed) == (
        "game:GuessTheNumber-v0-easy",
        {"partial_credit": False},
        3,
    )
    assert (cfg.run.updates, cfg.run.time_budget_s, cfg.run.threads) == (2, None, 1)
    assert (cfg.policy.n_layer, cfg.policy.n_embd, cfg.policy.n_head) == (1, 8, 2)
    assert (cfg.policy.n_positions, cfg.policy.obs_max_tokens) == (256, 64)
    assert (cfg.rl.estimator, cfg.rl.gamma, cfg.rl.group_size) == ("grpo", 0.8, 2)
    assert (cfg.rl.episodes_per_update, cfg.rl.keep_errors) == (4, True)
    assert (cfg.optim.lr, cfg.optim.lr_schedule, cfg.optim.warmup_updates) == (0.002, "cosine", 1)
    assert cfg.optim.max_grad_norm == 0.5
    assert (cfg.ppo.minibatches, cfg.ppo.clip_eps) == (2, 0.3)
    assert cfg.ppo.dual_clip == 0.0 and cfg.ppo.dual_clip_bound is None  # None (off) is 0 now
    assert (cfg.entropy.coef, cfg.entropy.turns, cfg.entropy.target_lr) == (0.01, 2, 0.1)
    assert cfg.entropy.target == (1.0, 0.5)  # a JSON list in the file
    assert (cfg.kl.coef, cfg.kl.schedule, cfg.kl.decay_until) == (0.02, "linear", 0.9)
    assert (cfg.sampling.temperature, cfg.sampling.min_p, cfg.sampling.max_new_tokens) == (
        1.2,
        0.01,
        8,
    )
    assert (cfg.sft.steps, cfg.sft.batch_size, cfg.sft.lr) == (7, 5, 0.002)
    # the two evaluation sizes that the flat names had crossed with their flags
    assert (cfg.eval.every, cfg.eval.every_episodes, cfg.eval.episodes) == (1, 4, 6)
    assert (cfg.eval.greedy, cfg.eval.temperature) == (False, 0.9)
    assert (cfg.checkpoint.every, cfg.checkpoint.every_s) == (1, 60.0)
    # and the nested form reads back to the same config
    assert config_from_dict(cfg.to_dict()) == cfg


def test_a_flat_dict_with_an_unknown_key_names_it() -> None:
    with pytest.raises(ConfigError, match=r"\['kl_coeff'\] are not settings of the flat"):
        migrate_flat_config({**_flat(), "kl_coeff": 0.1})


def _weights_sha(state: dict[str, Any]) -> str:
    h = hashlib.sha256()
    for k, v in state["model"].items():
        h.update(k.encode())
        h.update(v.cpu().numpy().tobytes())
    return h.hexdigest()


@pytest.mark.filterwarnings("ignore::gemgym.rl.trainer.FormatErrorWarning")
def test_the_old_checkpoint_resumes_to_what_the_old_code_gave(tmp_path: Path) -> None:
    torch = needs_module("torch", "train")
    needs_module("transformers", "train")
    from gemgym.rl.trainer import Trainer, config_from_checkpoint

    expected = json.loads((DATA / "resumed_to_3.json").read_text())
    out = tmp_path / "run"
    out.mkdir()
    shutil.copy(DATA / "checkpoint.pt", out / "checkpoint.pt")
    cfg = config_from_checkpoint(out / "checkpoint.pt")
    assert cfg == config_from_dict(_flat())  # the checkpoint's config is final.json's
    cfg.run.out_dir, cfg.run.updates = str(out), expected["resumed_to_updates"]
    trainer = Trainer(cfg)
    final = trainer.run(resume=True)
    assert final["updates"] == 3
    with open(out / "curves.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [r["update"] for r in rows] == ["1", "2", "3"]
    assert {k: rows[2][k] for k in expected["row"]} == expected["row"]
    assert final["eval"] == expected["final_eval"]
    saved = torch.load(out / "checkpoint.pt", weights_only=False)
    assert _weights_sha(saved) == expected["model_sha256"]
    # the new checkpoint holds the nested form, which resumes the same way
    assert set(saved["config"]) == set(SECTIONS)
    assert config_from_checkpoint(out / "checkpoint.pt") == cfg
    assert config_from_dict(json.loads((out / "final.json").read_text())["config"]) == cfg


def test_an_old_checkpoint_with_other_model_settings_is_refused(tmp_path: Path) -> None:
    needs_module("torch", "train")
    needs_module("transformers", "train")
    from gemgym.rl.trainer import Trainer, config_from_checkpoint

    out = tmp_path / "run"
    out.mkdir()
    shutil.copy(DATA / "checkpoint.pt", out / "checkpoint.pt")
    cfg = config_from_checkpoint(out / "checkpoint.pt")
    cfg.run.out_dir = str(out)
    cfg.policy.n_embd = 16
    with pytest.raises(ConfigError, match=r"made with policy.n_embd 8, not 16"):
        Trainer(cfg).load(out / "checkpoint.pt")


def test_the_old_checkpoint_resumes_from_the_command_line(tmp_path: Path) -> None:
    """``gemgym train --config`` with the migrated settings, as a user would after the
    change: the flags of the old command still parse to the checkpoint's config."""
    needs_module("torch", "train")
    needs_module("transformers", "train")
    import argparse

    from gemgym.cli.train import add_arguments, config_from_args

    readme = (DATA / "README.md").read_text()
    flags = readme.split('FLAGS="', 1)[1].split('"\n', 1)[0].replace("\\\n", " ")
    flags = flags.replace('\\"', '"')
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    # as bash splits an unquoted $FLAGS: at white space, the JSON's quotes kept
    argv = [*flags.split(), "--updates", "2", "--out", "run"]
    with pytest.warns(FutureWarning, match="--no-final-eval-greedy is deprecated"):
        args = parser.parse_args(argv)
    assert config_from_args(args) == config_from_dict(_flat())
    assert isinstance(config_from_args(args), TrainConfig)
