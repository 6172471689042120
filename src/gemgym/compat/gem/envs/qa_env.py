"""``gem.envs.qa_env``: GEM's ``QaEnv`` backed by gemgym's ``gemgym.envs.qa:QaEnv``."""

from __future__ import annotations

from gemgym.compat.gem._adapt import AdaptedEnv

__all__ = ["QaEnv"]


class QaEnv(AdaptedEnv):
    """GEM's constructor keywords over gemgym's ``gemgym.envs.qa:QaEnv``."""

    gemgym_entry_point = "gemgym.envs.qa:QaEnv"
    gem_params = (
        "dataset_name",
        "split",
        "dataset",
        "question_key",
        "answer_key",
        "seed",
        "extract_boxed",
        "load_from_cache_file",
    )
