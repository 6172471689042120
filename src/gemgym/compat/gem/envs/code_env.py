"""``gem.envs.code_env``: GEM's ``CodeEnv`` backed by gemgym's ``gemgym.envs.code:CodeEnv``."""

from __future__ import annotations

from gemgym.compat.gem._adapt import AdaptedEnv

__all__ = ["CodeEnv"]


class CodeEnv(AdaptedEnv):
    """GEM's constructor keywords over gemgym's ``gemgym.envs.code:CodeEnv``."""

    gemgym_entry_point = "gemgym.envs.code:CodeEnv"
    gem_params = (
        "dataset_name",
        "split",
        "dataset",
        "question_key",
        "test_key",
        "seed",
        "max_workers",
        "max_tests",
        "verbose",
        "sandbox_type",
    )
