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
    from gemgym.rl.trainer.checkpoint import (
        config_from_checkpoint as config_from_checkpoint,
    )
    from gemgym.rl.trainer.codec import (
        ByteTokenizer as ByteTokenizer,
        Codec as Codec,
        HFCodec as HFCodec,
    )
    from gemgym.rl.trainer.config import (
        CheckpointConfig as CheckpointConfig,
        EntropyConfig as EntropyConfig,
        EvalConfig as EvalConfig,
        KLConfig as KLConfig,
        OptimConfig as OptimConfig,
        PolicyConfig as PolicyConfig,
        PPOConfig as PPOConfig,
        RLConfig as RLConfig,
        RunConfig as RunConfig,
        SamplingConfig as SamplingConfig,
        SFTConfig as SFTConfig,
        migrate_flat_config as migrate_flat_config,
    )
    from gemgym.rl.trainer.loop import (
        CURVE_FIELDS as CURVE_FIELDS,
        KL_ESTIMATORS as KL_ESTIMATORS,
        FormatErrorWarning as FormatErrorWarning,
        ReferenceDistribution as ReferenceDistribution,
        TrainConfig as TrainConfig,
        Trainer as Trainer,
        TrainingInterrupted as TrainingInterrupted,
        clipped_policy_loss as clipped_policy_loss,
        config_from_dict as config_from_dict,
        exact_kl_penalty as exact_kl_penalty,
        format_error_share as format_error_share,
        kl_penalty as kl_penalty,
        plot_curves as plot_curves,
        policy_gradient_loss as policy_gradient_loss,
    )
    from gemgym.rl.trainer.policy import (
        LMPolicy as LMPolicy,
        build_model as build_model,
        observation_text as observation_text,
    )


__getattr__, __dir__ = lazy_exports(globals())
