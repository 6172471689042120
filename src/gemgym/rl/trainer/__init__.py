"""The reference trainer (torch + transformers: ``pip install "gemgym[train]"``).

* :class:`ByteTokenizer`, :class:`HFCodec`: tokenizers (the byte one needs no download).
* :class:`LMPolicy`: a causal LM writing text actions token by token, a batched policy for
  :class:`~gemgym.rl.Collector`.
* :class:`Trainer`, :class:`TrainConfig`: SFT warm start, then on-policy RL with any estimator of
  :mod:`gemgym.rl.advantages`; curves, checkpoints, resume. ``gemgym train`` runs it. The config
  is one typed section per thing it controls (:class:`RunConfig`, :class:`PolicyConfig`,
  :class:`RLConfig`, ...; :mod:`~gemgym.rl.trainer.config`); :func:`config_from_checkpoint`
  reads a checkpoint's (one written before the sections too).
  :mod:`~gemgym.rl.trainer.loop` runs the parts that live in modules named after what they do
  (config, losses, logprobs, schedules, reference, collection, steps, sft, evaluation,
  checkpoint, output).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gemgym._lazy import lazy_exports

if TYPE_CHECKING:
    from gemgym.rl.trainer.checkpoint import config_from_checkpoint
    from gemgym.rl.trainer.codec import (
        ByteTokenizer,
        Codec,
        HFCodec,
    )
    from gemgym.rl.trainer.config import (
        CheckpointConfig,
        EntropyConfig,
        EvalConfig,
        KLConfig,
        OptimConfig,
        PolicyConfig,
        PPOConfig,
        RLConfig,
        RunConfig,
        SamplingConfig,
        SFTConfig,
        migrate_flat_config,
    )
    from gemgym.rl.trainer.loop import (
        CURVE_FIELDS,
        KL_ESTIMATORS,
        FormatErrorWarning,
        ReferenceDistribution,
        TrainConfig,
        Trainer,
        TrainingInterrupted,
        clipped_policy_loss,
        config_from_dict,
        exact_kl_penalty,
        format_error_share,
        kl_penalty,
        plot_curves,
        policy_gradient_loss,
    )
    from gemgym.rl.trainer.policy import (
        LMPolicy,
        build_model,
        observation_text,
    )

_EXPORTS: dict[str, str] = {
    "config_from_checkpoint": "gemgym.rl.trainer.checkpoint",
    "CheckpointConfig": "gemgym.rl.trainer.config",
    "EntropyConfig": "gemgym.rl.trainer.config",
    "EvalConfig": "gemgym.rl.trainer.config",
    "KLConfig": "gemgym.rl.trainer.config",
    "OptimConfig": "gemgym.rl.trainer.config",
    "PolicyConfig": "gemgym.rl.trainer.config",
    "PPOConfig": "gemgym.rl.trainer.config",
    "RLConfig": "gemgym.rl.trainer.config",
    "RunConfig": "gemgym.rl.trainer.config",
    "SamplingConfig": "gemgym.rl.trainer.config",
    "SFTConfig": "gemgym.rl.trainer.config",
    "migrate_flat_config": "gemgym.rl.trainer.config",
    "ByteTokenizer": "gemgym.rl.trainer.codec",
    "Codec": "gemgym.rl.trainer.codec",
    "HFCodec": "gemgym.rl.trainer.codec",
    "CURVE_FIELDS": "gemgym.rl.trainer.loop",
    "KL_ESTIMATORS": "gemgym.rl.trainer.loop",
    "FormatErrorWarning": "gemgym.rl.trainer.loop",
    "ReferenceDistribution": "gemgym.rl.trainer.loop",
    "TrainConfig": "gemgym.rl.trainer.loop",
    "Trainer": "gemgym.rl.trainer.loop",
    "TrainingInterrupted": "gemgym.rl.trainer.loop",
    "clipped_policy_loss": "gemgym.rl.trainer.loop",
    "config_from_dict": "gemgym.rl.trainer.loop",
    "exact_kl_penalty": "gemgym.rl.trainer.loop",
    "format_error_share": "gemgym.rl.trainer.loop",
    "kl_penalty": "gemgym.rl.trainer.loop",
    "plot_curves": "gemgym.rl.trainer.loop",
    "policy_gradient_loss": "gemgym.rl.trainer.loop",
    "LMPolicy": "gemgym.rl.trainer.policy",
    "build_model": "gemgym.rl.trainer.policy",
    "observation_text": "gemgym.rl.trainer.policy",
}

__all__ = [
    "CURVE_FIELDS",
    "KL_ESTIMATORS",
    "ByteTokenizer",
    "CheckpointConfig",
    "Codec",
    "EntropyConfig",
    "EvalConfig",
    "FormatErrorWarning",
    "HFCodec",
    "KLConfig",
    "LMPolicy",
    "OptimConfig",
    "PPOConfig",
    "PolicyConfig",
    "RLConfig",
    "ReferenceDistribution",
    "RunConfig",
    "SFTConfig",
    "SamplingConfig",
    "TrainConfig",
    "Trainer",
    "TrainingInterrupted",
    "build_model",
    "clipped_policy_loss",
    "config_from_checkpoint",
    "config_from_dict",
    "exact_kl_penalty",
    "format_error_share",
    "kl_penalty",
    "migrate_flat_config",
    "observation_text",
    "plot_curves",
    "policy_gradient_loss",
]


__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)
