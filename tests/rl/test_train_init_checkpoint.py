"""``sft.init_checkpoint`` (``gemgym train --init``) with a checkpoint whose model settings
differ from the run's: a one-line error that names them, not torch's traceback.

The checkpoints are tiny (one layer, width 8, one update of 4 episodes): seconds each."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.extras import needs_module

torch = needs_module("torch", "train")
needs_module("transformers", "train")

from gemgym.cli import main  # noqa: E402
from gemgym.errors import ConfigError  # noqa: E402
from gemgym.rl.trainer import TrainConfig, Trainer  # noqa: E402
from gemgym.rl.trainer.checkpoint import load_model_weights  # noqa: E402
from gemgym.rl.trainer.policy import build_model  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::gemgym.rl.trainer.FormatErrorWarning")

ENV = "game:GuessTheNumber-v0-easy"
TINY = ["--n-layer", "1", "--n-embd", "8", "--n-head", "2", "--threads", "1"]
RUN = [*TINY, "--episodes-per-update", "4", "--max-new-tokens", "8", "--eval-episodes", "0"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkpoint of a run with 256 positions (the default is 512)."""
    out = tmp_path_factory.mktemp("init") / "n256"
    argv = ["train", ENV, *RUN, "--n-positions", "256", "--updates", "1", "--quiet"]
    assert main([*argv, "--out", str(out)]) == 0
    return out / "checkpoint.pt"


def test_init_with_other_model_settings_names_their_flags(
    checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["train", ENV, *RUN, "--updates", "1", "--quiet", "--init", str(checkpoint)]
    assert main([*argv, "--n-layer", "1", "--out", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gemgym: error: ") and len(err.strip().splitlines()) == 1
    assert "Traceback" not in err and "RuntimeError" not in err
    assert f"checkpoint {checkpoint} was made with other model settings" in err
    assert "--n-positions 256 (not 512)" in err
    assert "give the same settings to start from its weights" in err
    # two settings that differ are both named
    assert main([*argv, "--n-embd", "16", "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert "--n-embd 8 (not 16), --n-positions 256 (not 512)" in err
    # the same settings start from its weights
    assert main([*argv, "--n-positions", "256", "--out", str(tmp_path / "c")]) == 0


def test_the_trainer_names_the_settings(checkpoint: Path, tmp_path: Path) -> None:
    cfg = TrainConfig.from_flags(
        out=str(tmp_path), updates=1, n_layer=1, n_embd=8, n_head=2, init=str(checkpoint)
    )
    with pytest.raises(ConfigError, match=r"policy\.n_positions 256 \(not 512\)") as info:
        Trainer(cfg).run()
    assert "--" not in str(info.value)


def test_weights_that_do_not_fit_are_a_config_error(checkpoint: Path) -> None:
    model, _ = build_model(n_layer=1, n_embd=8, n_head=2, n_positions=512)
    with pytest.raises(ConfigError, match="do not fit the model") as info:
        load_model_weights(model, checkpoint, "cpu")  # no config to compare: torch's check
    assert "give the model settings it was made with" in str(info.value)
