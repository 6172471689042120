"""verl (0.9): a multi-turn agent loop for gemgym envs, token in / token out with verl's server.

:class:`GemgymAgentLoop` is a verl ``AgentLoopBase`` registered as ``"gemgym"`` (verl's
``@register``). Each ``run`` plays one gemgym episode with :func:`gemgym.llm.arollout_tokens`,
whose backend is verl's own server manager (:class:`VerlServerBackend`: prompt ids in, sampled
ids and log-probs out, no re-tokenisation), and returns an ``AgentLoopOutput``: the first prompt
as ``prompt_ids``, every action and observation after it as ``response_ids`` with
``response_mask`` 1 on sampled tokens only, the sampled log-probs, the env's return as
``reward_score`` and the number of turns.

Which env a sample plays comes from the dataset row's ``extra_info``: ``{"env": <preset name or
registered id>, "seed": <int>}`` (:func:`gemgym.integrations.common.task_rows` makes such rows).
Config snippet (verl's agent loop config file, ``actor_rollout_ref.rollout.agent.agent_loop_config_path``)::

    - name: gemgym
      _target_: gemgym.integrations.verl.GemgymAgentLoop

and per sample ``agent_name: gemgym`` in the dataset (or
``actor_rollout_ref.rollout.agent.default_agent_loop=gemgym``), with
``actor_rollout_ref.rollout.multi_turn.max_assistant_turns`` bounding the turns.
Needs ``pip install "gemgym[verl]"``.
"""

from __future__ import annotations

import time
from typing import Any
from uuid import uuid4

from gemgym.errors import ConfigError, missing_dependency
from gemgym.integrations.common import completion_view, env_factory
from gemgym.llm.backend import BackendCapabilities, FinishReason, Generation, GenerationRequest

try:
    from verl.experimental.agent_loop.agent_loop import (
        AgentLoopBase,
        AgentLoopMetrics,
        AgentLoopOutput,
        register,
    )
except ImportError as e:  # pragma: no cover - depends on the extra
    raise missing_dependency(e.name or "verl", "verl") from e

__all__ = ["GemgymAgentLoop", "VerlServerBackend"]


class VerlServerBackend:
    """verl's server manager as a :class:`gemgym.llm.LLMBackend` (token ids in and out)."""

    def __init__(self, server_manager: Any, sampling_params: dict[str, Any], name: str) -> None:
        self.server_manager = server_manager
        self.sampling_params = dict(sampling_params)
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    @property
    def capabilities(self) -> BackendCapabilities:
        return BackendCapabilities(token_ids=True, logprobs=True, images=False, seeds=False)

    async def generate(self, request: GenerationRequest) -> Generation:
        if request.prompt_ids is None:
            raise ConfigError("verl's server takes token ids; this request has none")
        t0 = time.perf_counter()
        params = {**self.sampling_params, "max_tokens": request.sampling.max_tokens}
        out = await self.server_manager.generate(
            request_id=uuid4().hex, prompt_ids=list(request.prompt_ids), sampling_params=params
        )
        ids = list(out.token_ids)
        reason: FinishReason = "length" if len(ids) >= request.sampling.max_tokens else "stop"
        return Generation(
            ids,
            list(out.log_probs) if out.log_probs else None,
            "",
            reason,
            latency_s=time.perf_counter() - t0,
        )

    async def aclose(self) -> None:
        return None


@register("gemgym")
class GemgymAgentLoop(AgentLoopBase):  # type: ignore[misc]
    """One gemgym episode per sample (see the module docstring)."""

    keep_errors: bool = False
    """Train on failed episodes too (their env or model call broke), with their partial
    return. By default a failed episode is left out of training: no loss on its tokens
    (``response_mask`` all 0) and reward 0. An agent loop sees one sample, not its group, so
    that 0 still counts in the group's baseline under verl's GRPO (``extra_fields``'
    ``gemgym_finish == "error"`` marks such samples). Set it on a subclass (registered under
    another name) to keep them."""

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> Any:
        from gemgym.llm.backend import SamplingParams
        from gemgym.llm.rollout import arollout_tokens
        from gemgym.vector import make_vector_env

        info = dict(kwargs.get("extra_info") or {})
        if "env" not in info:
            raise ConfigError('each sample needs extra_info={"env": ..., "seed": ...}')
        name = str(info["env"])
        factory = env_factory(name)
        rollout = self.rollout_config
        multi_turn = rollout.get("multi_turn", {}) if hasattr(rollout, "get") else {}
        max_turns = int(multi_turn.get("max_assistant_turns") or 8)
        response_length = int(rollout.get("response_length", 1024))
        context = int(rollout.get("prompt_length", 1024)) + response_length
        backend = VerlServerBackend(self.server_manager, sampling_params, name="verl")
        venv = make_vector_env(env_fns=[factory], autoreset_mode="disabled")
        t0 = time.perf_counter()
        try:
            [episode] = await arollout_tokens(
                venv,
                backend,
                self.tokenizer,
                episodes=1,
                seed=int(info.get("seed", 0)),
                sampling=SamplingParams(max_tokens=response_length, max_context=context),
                max_turns=max_turns,
                chat_template_kwargs=dict(self.apply_chat_template_kwargs or {}),
            )
        finally:
            venv.close()
        view = completion_view(episode, int(self.tokenizer.pad_token_id or 0))
        n = response_length  # verl's budget for the whole response, every turn included
        left_out = episode.failed and not self.keep_errors
        return AgentLoopOutput(
            prompt_ids=view.prompt_ids,
            response_ids=view.response_ids[:n],
            response_mask=[0] * len(view.mask[:n]) if left_out else view.mask[:n],
            response_logprobs=view.logprobs[:n],
            reward_score=0.0 if left_out else episode.total_return,
            num_turns=2 * len(episode.turns) + 1,
            metrics=AgentLoopMetrics(generate_sequences=time.perf_counter() - t0),
            extra_fields={
                "turn_scores": episode.rewards,
                "tool_rewards": [],
                "gemgym_finish": episode.finish_reason,
                "gemgym_error_stage": episode.error_stage,
                "gemgym_success": float(episode.success),
            },
        )
