"""TrainConfig: the nested (by section) and flat forms give the same, equally validated config."""

from __future__ import annotations

import dataclasses

import pytest

from gemgym.errors import ConfigError
from gemgym.rl.trainer.config import SECTIONS, TrainConfig, config_from_dict


def test_every_field_is_in_exactly_one_section() -> None:
    listed = [name for names in SECTIONS.values() for name in names]
    assert sorted(listed) == sorted(f.name for f in dataclasses.fields(TrainConfig))
    assert not set(SECTIONS) & set(listed)  # a section name is never also a setting


def test_nested_and_flat_forms_round_trip() -> None:
    cfg = TrainConfig(lr=3e-4, kl_coef=0.01, kl_estimator="exact", updates=3, group_size=4)
    nested = cfg.sections()
    assert nested["rl"]["lr"] == 3e-4 and nested["kl"]["kl_estimator"] == "exact"
    assert config_from_dict(nested) == cfg
    assert config_from_dict(dataclasses.asdict(cfg)) == cfg
    mixed = {"rl": {"lr": 3e-4}, "updates": 3}
    assert config_from_dict(mixed) == TrainConfig(lr=3e-4, updates=3)


@pytest.mark.parametrize(
    ("d", "match"),
    [
        ({"rl": {"kl_coef": 0.1}}, "not settings of section 'rl'"),
        ({"rl": {"lr": 0.1}, "lr": 0.2}, "given twice"),
        ({"rl": 0.1}, "must be a dict"),
        ({"nope": 1}, "unknown training settings"),
    ],
)
def test_bad_nested_configs_name_the_problem(d: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        config_from_dict(d)


def test_validation_is_the_same_for_both_forms() -> None:
    bad_flat = config_from_dict({"kl_estimator": "exact", "updates": 1})
    bad_nested = config_from_dict({"kl": {"kl_estimator": "exact"}, "run": {"updates": 1}})
    messages = []
    for cfg in (bad_flat, bad_nested):
        with pytest.raises(ConfigError) as e:
            cfg.validate()
        messages.append(str(e.value))
    assert messages[0] == messages[1] and "kl_coef" in messages[0]
