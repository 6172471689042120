"""The reference trainer (torch + transformers: ``pip install "gemgym[train]"``).

* :class:`ByteTokenizer`, :class:`HFCodec`: tokenizers (the byte one needs no download).
* :class:`LMPolicy`: a causal LM writing text actions token by token, a batched policy for
  :class:`~gemgym.rl.Collector`.
* :class:`Trainer`, :class:`TrainConfig`: SFT warm start, then on-policy RL with any estimator of
  :mod:`gemgym.rl.advantages`; curves, checkpoints, resume. ``gemgym train`` runs it.
  :mod:`~gemgym.rl.trainer.loop` runs the parts that live in modules named after what they do
  (config, losses, logprobs, schedules, reference, collection, steps, sft, evaluation,
  checkpoint, output).
"""

from gemgym.rl.trainer.codec import ByteTokenizer, Codec, HFCodec
from gemgym.rl.trainer.loop import (
    CURVE_FIELDS,
    KL_ESTIMATORS,
    FormatErrorWarning,
    ReferenceDistribution,
    TrainConfig,
    Trainer,
    clipped_policy_loss,
    config_from_dict,
    exact_kl_penalty,
    format_error_share,
    kl_penalty,
    plot_curves,
    policy_gradient_loss,
)
from gemgym.rl.trainer.policy import LMPolicy, build_model, observation_text

__all__ = [
    "CURVE_FIELDS",
    "KL_ESTIMATORS",
    "ByteTokenizer",
    "Codec",
    "FormatErrorWarning",
    "HFCodec",
    "LMPolicy",
    "ReferenceDistribution",
    "TrainConfig",
    "Trainer",
    "build_model",
    "clipped_policy_loss",
    "config_from_dict",
    "exact_kl_penalty",
    "format_error_share",
    "kl_penalty",
    "observation_text",
    "plot_curves",
    "policy_gradient_loss",
]
