"""``gem.envs.math_visual_env``: GEM's ``MathVisualEnv`` backed by gemgym's ``gemgym.envs.math_visual:MathVisualEnv``."""

from __future__ import annotations

from gemgym.compat.gem._adapt import AdaptedEnv

__all__ = ["MathVisualEnv"]


class MathVisualEnv(AdaptedEnv):
    """GEM's constructor keywords over gemgym's ``gemgym.envs.math_visual:MathVisualEnv``."""

    gemgym_entry_point = "gemgym.envs.math_visual:MathVisualEnv"
    gem_params = (
        "dataset_name",
        "split",
        "dataset",
        "image_key",
        "question_key",
        "answer_key",
        "seed",
        "use_mp",
    )
