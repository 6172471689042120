"""``gem.envs.math_env``: GEM's ``MathEnv`` backed by gemgym's ``gemgym.envs.math:MathEnv``."""

from __future__ import annotations

from gemgym.compat.gem._adapt import AdaptedEnv

__all__ = ["MathEnv"]


class MathEnv(AdaptedEnv):
    """GEM's constructor keywords over gemgym's ``gemgym.envs.math:MathEnv``."""

    gemgym_entry_point = "gemgym.envs.math:MathEnv"
    gem_params = (
        "dataset_name",
        "split",
        "dataset",
        "question_key",
        "answer_key",
        "use_format_error_reward",
        "seed",
        "use_mp",
    )
