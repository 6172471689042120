"""The reference trainer: optional SFT warm start, then on-policy RL with any estimator.

One update collects ``rl.episodes_per_update`` episodes with the current policy
(:class:`~gemgym.rl.Collector`, ``rl.group_size`` episodes per initial state), computes per-turn
advantages (:func:`~gemgym.rl.compute_advantages`), broadcasts them to the tokens of each action
(:func:`~gemgym.rl.token_weights`, observations masked) and takes one gradient step on

.. math:: L = -\\frac{1}{N} \\sum_{\\text{action tokens } j} A_{t(j)} \\log \\pi(x_j \\mid x_{<j}).

Episodes that fail (their env or the policy raised: ``finish_reason == "error"``) are left out of
the batch unless ``rl.keep_errors``: the rest of a failed episode's group stays,
and group estimators (GRPO, Dr. GRPO, RLOO, ReBN per group) baseline it on the episodes left;
the curve row's ``errors`` counts them and its ``success`` counts them as failures. An update
whose every episode failed stops the run with the first failure.

With ``epochs * minibatches > 1`` the batch is reused PPO-style: ``ppo.epochs`` passes over it, each
split into ``ppo.minibatches`` shuffled minibatches of episodes, one AdamW step per minibatch on the
clipped surrogate (:func:`clipped_policy_loss`) against the log-probs of the policy that
collected the batch, so later steps cannot push a token's probability ratio past
``1 ± clip_eps``. The first step is exactly the policy gradient above.

With ``run.overlap=True`` collection and learning run at the same time, on two cores: while the
learner takes its step on batch ``k``, a background thread collects batch ``k + 1`` with a copy of
the policy as it was before that step (the copy is refreshed after every step). Each batch is
then one update old when it is learned from, as in asynchronous RL trainers, so the step is the
clipped surrogate against the log-probs of the copy that collected it (``ppo.dual_clip`` bounds
the negative-advantage side); an update costs about ``max(collect, learn)`` instead of
``collect + learn``. Runs stay reproducible: the same seed gives the same batches and weights.

With ``kl.coef = beta > 0`` the loss also holds ``beta`` times a KL penalty toward the reference
policy (the weights RL started from: the SFT warm start or ``sft.init_checkpoint``), per action
token with the estimator of GRPO (Shao et al., 2024),
``k3 = pi_ref / pi - log(pi_ref / pi) - 1`` (always >= 0), averaged over the action tokens. Its
gradient is that of ``KL(pi_ref || pi)``: it pushes mass back onto actions the warm start
considered, which keeps a policy exploring where an entropy bonus would also spread the format
tokens the warm start already fixed. Unlike the entropy bonus, whose pull on a move vanishes with
the move's probability, the KL's expected pull on a move's logit is ``beta`` times
``pi_ref - pi``, so it does not vanish when the policy has given the move up (at a small
``beta`` it is weak, though: docs/rl.md).
``kl.schedule="linear"`` decays ``beta`` to 0 over the run (or at its ``kl.decay_until``
share), so that the policy can settle.
``kl.estimator="exact"`` computes ``KL(pi_ref || pi)`` over the whole vocabulary at every action
token instead (the reference then keeps its whole distribution there, ``(tokens, vocab)``): the
same gradient in expectation, ``pi - pi_ref`` on the logits, but at every step on every token,
where k3 pulls a move the policy has given up only on the rare steps that sample it.

``entropy.coef = c`` subtracts ``c`` times the policy's entropy over the action tokens from
the loss. With ``entropy.ref_min = h`` it counts only the action tokens where the reference
policy (the same frozen starting weights) has an entropy of at least ``h`` nats: the choices the
warm start left open (a game's moves), not the format tokens it already fixed, which a bonus on
every token pulls toward the uniform. With ``entropy.turns = k`` it counts only the tokens of
each episode's first ``k`` actions, so that the moves of the later turns can settle while the
earlier ones still explore. ``entropy.schedule="linear"`` decays ``c`` to 0 at the
``entropy.decay_until`` share of the run. ``entropy.target = (h0, h1)`` instead adapts ``c``
after every update so that the policy's entropy on the masked tokens follows a line from
``h0`` nats at the start to ``h1`` at the end: ``log c += entropy_target_lr * (target - H)``,
where ``H`` is the batch's mean ``-log pi`` of its sampled masked tokens (an estimate of that
entropy), and ``c`` stays within ``[1e-3, 1]``. Runs then explore along the same entropy path
whatever their seed, where a fixed coefficient lets some collapse faster than others.

``sampling.temperature = T`` samples the training batches from the policy's logits divided by ``T``
(``T > 1`` explores more, mostly where the policy still hesitates: tokens it is sure of, such as
the format's, barely move) and learns from them as from its own samples: the recorded
log-probs, and the ratios of the clipped surrogate, are those of the policy itself (temperature
1). ``sampling.min_p = m`` samples only among the tokens at least ``m`` times as likely as the best
one, so that a temperature above 1 spreads the samples over the choices the policy hesitates
between and not over the format tokens' unlikely alternatives. ``eval.temperature`` makes the
evaluations sample the policy's full distribution at that temperature (default: they sample as
the training batches do, ``sampling.temperature`` and ``sampling.min_p``).

Written to ``run.out_dir``: ``curves.csv`` (one row per update), ``curves.png`` (per update, wall
minutes on a second axis), ``checkpoint.pt`` (model, optimiser, counters, SFT progress, random
states: ``resume=True`` continues from it) and ``final.json`` (the final evaluation on fresh
seeds: sampling as the training batches are, or at ``eval.temperature``, and greedy decoding).
The checkpoint and the curves are written every ``checkpoint.every`` updates, every
``checkpoint.every_s`` seconds (SFT included), after SFT, at the end, and on SIGINT/SIGTERM
(:mod:`~gemgym.rl.trainer.interrupt`): the run then stops after the current SFT step or update
and raises :class:`TrainingInterrupted`; resumed, it is the same run as one never stopped.

The parts live in modules named after what they do: :mod:`~gemgym.rl.trainer.config`
(settings and their validation), :mod:`~gemgym.rl.trainer.losses`,
:mod:`~gemgym.rl.trainer.logprobs` (log-prob kernels), :mod:`~gemgym.rl.trainer.schedules`,
:mod:`~gemgym.rl.trainer.reference` (reference scoring), :mod:`~gemgym.rl.trainer.collection`
(collection and the overlap thread), :mod:`~gemgym.rl.trainer.steps` (optimiser steps),
:mod:`~gemgym.rl.trainer.sft`, :mod:`~gemgym.rl.trainer.evaluation`,
:mod:`~gemgym.rl.trainer.checkpoint` and :mod:`~gemgym.rl.trainer.output`; this one runs them.
"""

from __future__ import annotations

import copy
import json
import math
import signal
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from gemgym.episodes.outcomes import derive_seed
from gemgym.errors import ConfigError, GemGymError, missing_dependency
from gemgym.experience import Episode, read_jsonl
from gemgym.rl.collector import Batch
from gemgym.rl.tokens import TokenizedEpisode, token_weights
from gemgym.rl.trainer import hf_policy, schedules
from gemgym.rl.trainer.checkpoint import load_checkpoint, load_model_weights, save_checkpoint
from gemgym.rl.trainer.checks import (
    FormatErrorWarning as FormatErrorWarning,
    budget_split,
    check_input_files,
    format_error_message,
    format_error_share as format_error_share,
    sft_plan,
)
from gemgym.rl.trainer.codec import HFCodec
from gemgym.rl.trainer.collection import BatchCollection, make_collector
from gemgym.rl.trainer.config import KL_ESTIMATORS, TrainConfig, config_from_dict
from gemgym.rl.trainer.evaluation import EVAL_SEED_BASE, evaluate_policy
from gemgym.rl.trainer.interrupt import StopRequest, TrainingInterrupted
from gemgym.rl.trainer.logprobs import token_log_probs, token_log_probs_and_entropy
from gemgym.rl.trainer.losses import (
    ReferenceDistribution,
    clipped_policy_loss,
    exact_kl_penalty,
    kl_penalty,
    policy_gradient_loss,
)
from gemgym.rl.trainer.output import CURVE_FIELDS, plot_curves, write_config_toml, write_curves
from gemgym.rl.trainer.policy import LMPolicy, build_model, model_positions
from gemgym.rl.trainer.reference import ReferenceScorer
from gemgym.rl.trainer.schedules import ENTROPY_COEF_RANGE
from gemgym.rl.trainer.sft import supervised_fine_tune
from gemgym.rl.trainer.steps import LEARN_CHUNK_EPISODES, Learner, length_chunks

__all__ = [
    "CURVE_FIELDS",
    "ENTROPY_COEF_RANGE",
    "EVAL_SEED_BASE",
    "KL_ESTIMATORS",
    "LEARN_CHUNK_EPISODES",
    "FormatErrorWarning",
    "ReferenceDistribution",
    "TrainConfig",
    "Trainer",
    "TrainingInterrupted",
    "clipped_policy_loss",
    "config_from_dict",
    "exact_kl_penalty",
    "format_error_share",
    "kl_penalty",
    "length_chunks",
    "plot_curves",
    "policy_gradient_loss",
    "token_log_probs",
    "token_log_probs_and_entropy",
]


class Trainer:
    """Runs :class:`TrainConfig`; see the module docstring.

    Its parts: :attr:`learner` (the optimiser steps), :attr:`scorer` (reference scoring) and
    :attr:`collection` (the training batches, with the overlap thread), over :attr:`collector`.
    """

    def __init__(self, config: TrainConfig, *, log: Callable[[str], None] | None = None) -> None:
        try:
            import torch
        except ImportError as e:
            raise missing_dependency(e.name or "torch", "train") from e

        config.validate()
        check_input_files(config)
        self.config = config
        self.log = log or (lambda _msg: None)
        if config.run.threads:
            torch.set_num_threads(config.run.threads)
        if config.run.device == "auto":
            self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        else:
            self.device = torch.device(config.run.device)
        torch.manual_seed(config.run.seed)
        self.model, self.codec = (
            build_model(
                None,
                n_layer=config.policy.n_layer,
                n_embd=config.policy.n_embd,
                n_head=config.policy.n_head,
                n_positions=config.policy.n_positions,
                tokenizer=config.policy.tokenizer,
            )
            if config.policy.model is None
            else hf_policy.load_chat_model(config)
        )
        self.model.to(self.device)
        self.max_length = model_positions(self.model)
        self.vocab_limit: int | None = getattr(self.codec, "action_vocab_size", None)
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(), lr=config.optim.lr, weight_decay=0.0
        )
        self.learner = Learner(
            self.model,
            self.optimizer,
            pad_id=self.codec.pad_id,
            max_length=self.max_length,
            vocab_limit=self.vocab_limit,
            device=self.device,
            max_grad_norm=config.optim.max_grad_norm,
        )
        self.policy = self._make_policy(self.model)
        self.out_dir = Path(config.run.out_dir)
        self.update = 0
        self.elapsed = 0.0
        # entropy_target: the log of the bonus coefficient, adapted after every update
        self.log_entropy_coef = math.log(config.entropy.coef) if config.entropy.coef > 0 else 0.0
        self.sft_done = False
        self.sft_step = 0
        """SFT steps done (a run interrupted during SFT resumes from there)."""
        self.rows: list[dict[str, Any]] = []
        self.format_error_updates = 0
        """Updates whose batch held only format errors (nothing to learn from)."""
        # kl_coef, entropy_ref_min: a frozen copy of the weights RL starts from
        self.scorer = ReferenceScorer(
            self.model,
            config,
            pad_id=self.codec.pad_id,
            max_length=self.max_length,
            vocab_limit=self.vocab_limit,
            device=self.device,
        )
        # the policy that collects: the model itself, or (overlap) a copy that a background
        # thread samples from while the learner steps
        self.rollout_policy = self.policy
        if config.run.overlap:
            self.rollout_policy = self._make_policy(copy.deepcopy(self.model).eval())
        self.collector = make_collector(
            config,
            self.rollout_policy,
            config.rl.episodes_per_update,
            seed=derive_seed(config.run.seed, "stream", "train") or 0,
            group_size=config.rl.group_size_for_estimator,
        )
        self.collection = BatchCollection(
            self.collector,
            policy=self.policy,
            rollout_policy=self.rollout_policy,
            scorer=self.scorer,
            reference_scores=lambda tokens: self.reference_scores(tokens),
        )

    def _make_policy(self, model: Any) -> LMPolicy:
        cfg = self.config
        common: dict[str, Any] = {
            "max_new_tokens": cfg.sampling.max_new_tokens,
            "temperature": cfg.sampling.temperature,
            "seed": cfg.run.seed,
            "device": self.device,
        }
        if isinstance(self.codec, HFCodec):  # policy.model: sampled through gemgym.llm
            return hf_policy.ChatPolicy(
                model, self.codec, system_prompt=cfg.policy.system_prompt, **common
            )
        return LMPolicy(
            model,
            self.codec,
            min_p=cfg.sampling.min_p,
            obs_max_tokens=cfg.policy.obs_max_tokens,
            **common,
        )

    @property
    def num_parameters(self) -> int:
        """Parameters of the policy model."""
        return int(sum(p.numel() for p in self.model.parameters()))

    @property
    def ref_model(self) -> Any:
        """The frozen reference model (``None`` until ``kl.coef``/``entropy.ref_min`` use it)."""
        return self.scorer.ref_model

    # -- steps -----------------------------------------------------------------------------
    def gradient_step(
        self,
        tokens: Sequence[TokenizedEpisode],
        weights: Sequence[np.ndarray],
        entropy_coef: float = 0.0,
        kl_coef: float = 0.0,
        ref_logp: Any = None,
        entropy_mask: Any = None,
    ) -> float:
        """One AdamW step on :func:`policy_gradient_loss` of the batch; returns the loss."""
        return self.learner.step(tokens, weights, entropy_coef, kl_coef, ref_logp, entropy_mask)

    def ppo_steps(
        self,
        tokens: Sequence[TokenizedEpisode],
        weights: Sequence[np.ndarray],
        behaviour: Any = None,
        ref: Any = None,
        entropy_coef: float | None = None,
        entropy_mask: Any = None,
        kl_coef: float | None = None,
    ) -> float:
        """``ppo.epochs`` passes of ``ppo.minibatches`` clipped-surrogate steps over one batch,
        against ``behaviour`` (the collecting policy's log-probs) or the current policy's;
        ``ref``: the reference policy's log-probs (for ``kl_coef``, default the config's
        ``kl.coef``); ``entropy_coef`` (default ``entropy.coef``) and ``entropy_mask``: the
        entropy bonus and its tokens."""
        cfg = self.config
        return self.learner.ppo_steps(
            tokens,
            weights,
            epochs=cfg.ppo.epochs,
            minibatches=cfg.ppo.minibatches,
            clip_eps=cfg.ppo.clip_eps,
            dual_clip=cfg.ppo.dual_clip_bound,
            rng=np.random.default_rng(
                derive_seed(cfg.run.seed, "stream", "minibatches", self.update)
            ),
            behaviour=behaviour,
            ref=ref,
            entropy_coef=cfg.entropy.coef if entropy_coef is None else entropy_coef,
            entropy_mask=entropy_mask,
            kl_coef=cfg.kl.coef if kl_coef is None else kl_coef,
        )

    def sft(
        self,
        episodes: Sequence[Episode],
        steps: int,
        *,
        start: int = 0,
        after_step: Callable[[int], bool] | None = None,
    ) -> float:
        """Supervised warm start: maximise the likelihood of the recorded actions (``steps``
        steps at ``sft.lr``, progress in the log); returns the last step's loss. ``start`` and
        ``after_step``: as in :func:`~gemgym.rl.trainer.sft.supervised_fine_tune` (resuming,
        stopping early)."""
        cfg = self.config
        self.learner.set_learning_rate(cfg.sft.lr)
        loss = supervised_fine_tune(
            episodes,
            steps,
            tokenize=self.policy.tokenize,
            step=self.gradient_step,
            batch_size=cfg.sft.batch_size,
            seed=cfg.run.seed,
            max_length=self.max_length,
            log=self.log,
            start=start,
            after_step=after_step,
        )
        self.learner.set_learning_rate(cfg.optim.lr)
        return loss

    def rl_update(self) -> dict[str, Any]:
        """Collect one batch and take one policy-gradient step; returns the curve row.

        With ``run.overlap``, the batch learned from is the one collected during the previous
        update (the first is collected here), and the next one is collected meanwhile.
        """
        cfg = self.config
        t0 = time.perf_counter()
        if self._uses_reference:
            self.scorer.reference()  # made here, never by the collection thread
        if cfg.run.overlap:
            batch, tokens, behaviour, ref, ent_mask = self.collection.next_overlapped(
                cfg.rl.episodes_per_update
            )
        else:
            batch = self.collector.collect(cfg.rl.episodes_per_update)
            tokens = [self.policy.tokenize(e) for e in batch.episodes]
            behaviour = None
            ref, ent_mask = self.reference_scores(tokens)
        t1 = time.perf_counter()
        if len(batch) == 0:  # every episode failed: nothing to learn from
            first = batch.failed[0] if batch.failed else None
            why = "" if first is None else f"; the first at {first.error_stage}: {first.error}"
            raise GemGymError(
                f"every episode of update {self.update + 1} failed{why}. Fix the env or the "
                "policy (rl.keep_errors trains on failed episodes anyway)"
            )
        if cfg.optim.warmup_updates or cfg.optim.lr_schedule != "constant":
            self.learner.set_learning_rate(self.learning_rate())
        adv = batch.advantages(cfg.rl.estimator, gamma=cfg.rl.gamma)
        weights = [token_weights(t, a) for t, a in zip(tokens, adv, strict=True)]
        entropy_coef, kl_coef = self.entropy_coefficient(), self.kl_coefficient()
        if cfg.ppo.epochs * cfg.ppo.minibatches == 1 and behaviour is None:
            loss = self.gradient_step(tokens, weights, entropy_coef, kl_coef, ref, ent_mask)
        else:
            loss = self.ppo_steps(
                tokens,
                weights,
                behaviour,
                ref,
                entropy_coef=entropy_coef,
                entropy_mask=ent_mask,
                kl_coef=kl_coef,
            )
        s = batch.summary()
        self.update += 1
        self._check_format_errors(batch)
        extra: dict[str, Any] = {}
        if ent_mask is not None and bool(ent_mask.any()):
            # -log pi of the sampled decision tokens: an estimate of the collecting policy's
            # entropy where the reference hesitated (the moves), which the bonus holds up
            if behaviour is None:  # as the policy recorded them while sampling
                behaviour = self.collection.recorded_log_probs(batch, tokens)
            if behaviour is not None:
                extra["decision_entropy"] = round(-float(behaviour[ent_mask].mean()), 4)
        if cfg.entropy.coef:
            extra["entropy_coef"] = round(entropy_coef, 5)
        if cfg.entropy.target is not None and "decision_entropy" in extra:
            self.adapt_entropy_coef(extra["decision_entropy"])
        return {
            **extra,
            "update": self.update,
            "episodes": self.update * cfg.rl.episodes_per_update,
            # failed episodes (left out of the batch) count as unsuccessful
            "success": s["success_rate"] * len(batch) / (len(batch) + batch.errors),
            "errors": batch.errors,
            "mean_turns": s["mean_turns"],
            "mean_return": s["mean_return"],
            "loss": loss,
            "collect_s": round(t1 - t0, 3),
            "learn_s": round(time.perf_counter() - t1, 3),
        }

    def _check_format_errors(self, batch: Batch) -> None:
        """Count (and on the first, warn about) a batch whose every episode is a format error."""
        if len(batch) == 0 or format_error_share(batch.episodes) < 1.0:
            return
        self.format_error_updates += 1
        if self.format_error_updates == 1:
            warnings.warn(format_error_message(self.update), FormatErrorWarning, stacklevel=3)

    # -- schedules -------------------------------------------------------------------------
    def learning_rate(self) -> float:
        """The RL learning rate of the next update: ``optim.lr``, times a linear warm-up over the
        first ``optim.warmup_updates`` updates, times ``(1 + cos(pi * progress)) / 2`` with the cosine
        schedule (progress: the share of the time budget used, or of ``run.updates`` when there is
        no time budget)."""
        return schedules.learning_rate(self.config, self.update, self.progress())

    def progress(self) -> float:
        """The share of the run done: of the time budget, or of ``run.updates`` without one."""
        return schedules.run_progress(self.config, self.update, self.elapsed)

    def entropy_coefficient(self) -> float:
        """The entropy bonus of the next update: ``entropy.coef``, times
        ``1 - progress / entropy.decay_until`` (at least 0) with ``entropy.schedule="linear"``
        (progress as in :meth:`learning_rate`): 0 from that share of the run on. With
        ``entropy.target``, the coefficient :meth:`adapt_entropy_coef` has reached."""
        cfg = self.config
        if cfg.entropy.target is not None:
            return math.exp(self.log_entropy_coef)
        return schedules.scheduled(
            cfg.entropy.coef, cfg.entropy.schedule, cfg.entropy.decay_until, self.progress()
        )

    def entropy_target_now(self) -> float:
        """The entropy (nats) ``entropy.target`` asks for now: its start, moved linearly
        toward its end with the run's progress (as in :meth:`learning_rate`)."""
        return schedules.entropy_target_at(self.config, self.progress())

    def adapt_entropy_coef(self, entropy: float) -> float:
        """Move the bonus coefficient toward holding the moves' entropy on the target line:
        up when ``entropy`` (the batch's estimate, nats) is under :meth:`entropy_target_now`,
        down when over, by ``exp(entropy_target_lr * (target - entropy))``, kept within
        ``[1e-3, 1]``; returns the new coefficient."""
        self.log_entropy_coef = schedules.adapted_log_coef(
            self.log_entropy_coef,
            self.config.entropy.target_lr,
            self.entropy_target_now(),
            entropy,
        )
        return math.exp(self.log_entropy_coef)

    def kl_coefficient(self) -> float:
        """The KL coefficient of the next update: ``kl.coef``, times
        ``1 - progress / kl.decay_until`` (at least 0) with ``kl.schedule="linear"`` (progress
        as in :meth:`learning_rate`)."""
        cfg = self.config
        return schedules.scheduled(
            cfg.kl.coef, cfg.kl.schedule, cfg.kl.decay_until, self.progress()
        )

    # -- reference scoring -----------------------------------------------------------------
    @property
    def _uses_reference(self) -> bool:
        """Whether a frozen reference scores the batches (``kl.coef`` or ``entropy.ref_min``)."""
        return bool(self.config.kl.coef) or self.config.entropy.ref_min is not None

    def reference_scores(self, tokens: Sequence[TokenizedEpisode]) -> tuple[Any, Any]:
        """:meth:`ReferenceScorer.reference_scores` of ``tokens`` with the coefficients of the
        next update: the reference does not score once a coefficient that needs it has been
        decayed to 0 (its schedule never raises it again): the log-probs are ``None`` when
        the KL coefficient is 0, and so is the reference's part of the mask when the entropy
        coefficient is."""
        cfg = self.config
        kl_on = self.kl_coefficient() > 0
        entropy_on = cfg.entropy.ref_min is not None and self.entropy_coefficient() > 0
        return self.scorer.reference_scores(tokens, kl_on=kl_on, entropy_on=entropy_on)

    def close(self) -> None:
        """Stop the background collection thread (``run.overlap``) and close the envs."""
        self.collection.stop()
        self.collector.close()

    def evaluate(
        self, episodes: int, *, seed: int = EVAL_SEED_BASE, greedy: bool = False
    ) -> dict[str, float]:
        """Play ``episodes`` fresh episodes (seeds never used in training) with the policy,
        sampling at ``eval.temperature`` (default: as the training batches are sampled), or
        taking the most likely token (``greedy=True``)."""
        return evaluate_policy(self.policy, self.config, episodes, seed=seed, greedy=greedy)

    # -- the run ---------------------------------------------------------------------------
    @property
    def checkpoint_path(self) -> Path:
        """Where the run's checkpoint is written: ``run.out_dir/checkpoint.pt``."""
        return self.out_dir / "checkpoint.pt"

    def run(self, *, resume: bool | Literal["auto"] = False) -> dict[str, Any]:
        """SFT (once), RL until the update count or the time budget, final evaluation.

        ``resume=True`` continues from ``run.out_dir/checkpoint.pt`` (an error when there is none);
        ``"auto"`` continues from it when it exists and starts a new run otherwise.

        SIGINT (Ctrl-C) and SIGTERM during the run (from the main thread) stop it after the
        current SFT step or RL update: the checkpoint and the curves are written, then
        :class:`TrainingInterrupted` (a ``KeyboardInterrupt``) is raised with how to resume. A
        second signal stops at once, without saving. Besides, a checkpoint and the curves are
        written every ``checkpoint.every`` updates and whenever ``checkpoint.every_s`` seconds
        have passed since the last one (SFT included), so a killed run loses at most that.
        """
        cfg = self.config
        if resume not in (True, False, "auto"):
            raise ConfigError(f"resume must be True, False or 'auto', got {resume!r}")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if resume and self.checkpoint_path.exists():
            self.load(self.checkpoint_path)
            where = (
                f"SFT step {self.sft_step}/{cfg.sft.steps}"
                if cfg.sft.path and not self.sft_done
                else f"update {self.update}"
            )
            self.log(f"resumed at {where} ({self.elapsed:.0f} s) from {self.checkpoint_path}")
        elif resume is True:
            raise ConfigError(
                f"nothing to resume: {self.checkpoint_path} does not exist. Give the run.out_dir "
                "of the run to continue, or drop resume to start a new run"
            )
        self.write_config()
        with StopRequest(self._stop_signalled) as stop:
            try:
                return self._run(stop)
            finally:
                self.collection.stop()  # overlap: the batch collected meanwhile is not used

    def _stop_signalled(self, signum: int) -> None:
        self.log(
            f"{signal.Signals(signum).name}: stopping after the current step to save a "
            "checkpoint (send it again to stop now, without saving)"
        )

    def _run(self, stop: StopRequest) -> dict[str, Any]:
        cfg = self.config
        start = time.perf_counter() - self.elapsed
        last_save = time.perf_counter()

        def save_progress() -> None:
            nonlocal last_save
            self.elapsed = time.perf_counter() - start
            self.save(self.checkpoint_path)
            self.write_curves()
            last_save = time.perf_counter()

        def save_due() -> bool:
            every = cfg.checkpoint.every_s
            return bool(every) and time.perf_counter() - last_save >= every

        def interrupted(phase: str) -> TrainingInterrupted:
            signum = stop.signal or signal.SIGINT
            save_progress()
            message = (
                f"{signal.Signals(signum).name} {phase}: checkpoint saved to "
                f"{self.checkpoint_path} (curves in {self.out_dir})"
            )
            return TrainingInterrupted(signum, str(self.checkpoint_path), message)

        if cfg.sft.init_checkpoint and self.update == 0 and not self.sft_done:
            self.load_weights(cfg.sft.init_checkpoint)
            self.sft_done = True
            self.log(f"weights from {cfg.sft.init_checkpoint}")
        if cfg.sft.path and not self.sft_done:
            eps = list(read_jsonl(cfg.sft.path))
            self.log(sft_plan(self.config, len(eps)))

            def after_sft_step(i: int) -> bool:
                self.sft_step = i
                if stop.requested:
                    return True
                if save_due():
                    save_progress()
                return False

            loss = self.sft(eps, cfg.sft.steps, start=self.sft_step, after_step=after_sft_step)
            if stop.requested:
                raise interrupted(f"during SFT, after step {self.sft_step}/{cfg.sft.steps}")
            self.sft_done = True
            self.elapsed = time.perf_counter() - start
            self.log(f"SFT on {len(eps)} episodes, {cfg.sft.steps} steps: loss {loss:.3f}")
            save_progress()  # the warm start is never redone
            if cfg.run.time_budget_s is not None:
                self.log(budget_split(self.config, self.elapsed))
        while True:
            if stop.requested:
                raise interrupted(f"at update {self.update}")
            self.elapsed = time.perf_counter() - start
            if cfg.run.updates is not None and self.update >= cfg.run.updates:
                break
            if cfg.run.time_budget_s is not None and self.elapsed >= cfg.run.time_budget_s:
                break
            row = self.rl_update()
            if cfg.eval.every and self.update % cfg.eval.every == 0:
                ev = self.evaluate(cfg.eval.every_episodes, seed=EVAL_SEED_BASE + 10_000_000)
                row["eval_success"] = ev["success_rate"]
                row["eval_mean_turns"] = ev["mean_turns"]
            row["time_s"] = round(time.perf_counter() - start, 2)
            self.rows.append(row)
            evaluated = (
                f"  eval {row['eval_success']:.3f} / {row['eval_mean_turns']:.2f} turns"
                if "eval_success" in row
                else ""
            )
            errors = f"  errors {row['errors']}" if row["errors"] else ""
            self.log(
                f"update {row['update']:4d}  {row['time_s']:7.1f}s  success {row['success']:.2f}"
                f"  turns {row['mean_turns']:.2f}  loss {row['loss']:+.4f}{errors}{evaluated}"
            )
            by_updates = cfg.checkpoint.every and self.update % cfg.checkpoint.every == 0
            if (by_updates or save_due()) and not stop.requested:  # else saved just below
                save_progress()
        self.collection.stop()  # overlap: the batch collected meanwhile is not used
        self.elapsed = time.perf_counter() - start
        if self.format_error_updates:
            self.log(
                f"{self.format_error_updates} of the run's updates had only format errors in "
                "their batch (nothing to learn from)"
            )
        save_progress()
        final: dict[str, Any] = {
            "config": cfg.to_dict(),
            "parameters": self.num_parameters,
            "updates": self.update,
            "train_time_s": round(self.elapsed, 1),
        }
        if cfg.eval.episodes:
            final["eval"] = self.evaluate(cfg.eval.episodes)
            self.log(f"final eval: {final['eval']}")
            if cfg.eval.greedy and not stop.requested:
                final["eval_greedy"] = self.evaluate(cfg.eval.episodes, greedy=True)
                self.log(f"final eval, greedy decoding: {final['eval_greedy']}")
        if stop.requested:  # training is saved whole; a resumed run only evaluates
            raise interrupted(f"during the final evaluation, after all {self.update} updates")
        if isinstance(self.codec, HFCodec):  # the trained model, as from_pretrained loads it
            hf_policy.save_hf_model(self.model, self.codec.tokenizer, self.out_dir / "model")
        (self.out_dir / "final.json").write_text(json.dumps(final, indent=2) + "\n")
        return final

    # -- persistence -----------------------------------------------------------------------
    @property
    def config_path(self) -> Path:
        """Where the run's settings are written: ``run.out_dir/config.toml``."""
        return self.out_dir / "config.toml"

    def write_config(self) -> None:
        """Write the run's settings to :attr:`config_path` (:func:`write_config_toml`)."""
        write_config_toml(self.config, self.config_path)

    def write_curves(self) -> None:
        """Write ``curves.csv`` and ``curves.png`` in ``run.out_dir``."""
        write_curves(self.rows, self.out_dir, self.config.rl.estimator)

    def save(self, path: Path) -> None:
        """Save model, optimiser, counters, curves and random states."""
        save_checkpoint(self, path)

    def load_weights(self, path: Path | str) -> None:
        """Load only the model weights of a checkpoint (e.g. a shared SFT warm start), made
        with this run's model settings (a :class:`ConfigError` names those that differ)."""
        load_model_weights(self.model, path, self.device, self.config)

    def load(self, path: Path) -> None:
        """Restore a checkpoint written by :meth:`save` (same model settings)."""
        load_checkpoint(self, path)
