"""OpenRLHF (0.11): gemgym envs behind its agent function (``--train.agent_func_path``).

OpenRLHF's ``MultiTurnAgentExecutor`` samples token ids with its vLLM engines, hands each
action's text to an ``AgentInstance`` and appends the feedback text it returns (tokenised) to
the sequence, with the action ranges as the loss mask. :class:`GemgymAgentInstance` is that
instance for any gemgym env: the dataset's ``label`` names the env and seed
(:func:`write_dataset`), ``reset`` starts the episode, ``step`` plays the action and returns
the env's reward and, as feedback, the next observation rendered by the model's own chat template
(:class:`gemgym.llm.render.ChatRenderer`: the end of the assistant turn, the user or tool
message, the generation prompt), so the sequence OpenRLHF trains on is what the chat model sees.

The agent file OpenRLHF loads (``examples/openrlhf/agent_func.py``)::

    from gemgym.integrations.openrlhf import make_agent_executor
    AgentExecutor = make_agent_executor()      # envs and tokenizer from GEMGYM_* variables

Configuration by environment variables (OpenRLHF builds the executor with no arguments):
``GEMGYM_ENVS`` (comma-separated presets or env ids, default ``guess``), ``GEMGYM_TOKENIZER``
(the model path), ``GEMGYM_MAX_TURNS`` (default 8). The executor assumes the model ends its
turns with the tokenizer's EOS (OpenRLHF's vLLM engines stop there), so the feedback starts
with what the template puts after it. Needs ``pip install "gemgym[openrlhf]"``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gemgym.errors import ConfigError, missing_dependency
from gemgym.integrations.common import (
    EnvFactory,
    TextEpisode,
    named_envs,
    resolve_envs,
    task_rows as _task_rows,
)

try:
    import torch
    from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor
except ImportError as e:  # pragma: no cover - depends on the extra
    raise missing_dependency(e.name or "openrlhf", "openrlhf") from e

__all__ = ["GemgymAgentInstance", "make_agent_executor", "write_dataset"]


def _envs(spec: str | Mapping[str, str | EnvFactory]) -> dict[str, EnvFactory]:
    return named_envs(spec) if isinstance(spec, str) else resolve_envs(spec)


def _renderer(tokenizer: Any, system_prompt: str | None = None) -> Any:
    from gemgym.llm.render import ChatRenderer

    if isinstance(tokenizer, str | Path):
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(tokenizer))
    return ChatRenderer(tokenizer, system_prompt=system_prompt)


def write_dataset(
    path: str | Path,
    envs: str | Mapping[str, str | EnvFactory],
    n: int,
    tokenizer: Any,
    *,
    seed: int = 0,
    system_prompt: str | None = None,
) -> int:
    """Write ``n`` OpenRLHF prompt rows (JSONL: ``prompt`` rendered by the chat template with the
    generation prompt, ``label`` the JSON of ``{"env", "seed"}``); returns ``n``. Train with
    ``--data.input_key prompt --data.label_key label`` and no ``--data.apply_chat_template``."""
    renderer = _renderer(tokenizer, system_prompt)
    with open(path, "w", encoding="utf-8") as f:
        for row in _task_rows(_envs(envs), n, seed=seed):
            messages = renderer.prompt(row["prompt"][0]["content"])[1]
            prompt = renderer.render_text(messages, generation_prompt=True)
            label = json.dumps({"env": row["env"], "seed": row["seed"]})
            f.write(json.dumps({"prompt": prompt, "label": label}) + "\n")
    return n


class GemgymAgentInstance(AgentInstanceBase):  # type: ignore[misc]
    """One gemgym episode per OpenRLHF sample (see the module docstring).

    Args:
        envs: comma-separated presets or env ids (default: ``$GEMGYM_ENVS`` or ``guess``), or
            ``{name: id or factory}``.
        tokenizer: the model's tokenizer or its path (default: ``$GEMGYM_TOKENIZER``).
        max_turns: the most env steps (default: ``$GEMGYM_MAX_TURNS`` or 8).
    """

    def __init__(
        self,
        envs: str | Mapping[str, str | EnvFactory] | None = None,
        tokenizer: Any = None,
        max_turns: int | None = None,
    ) -> None:
        self.factories = _envs(envs or os.environ.get("GEMGYM_ENVS", "guess"))
        tok = tokenizer if tokenizer is not None else os.environ.get("GEMGYM_TOKENIZER")
        if tok is None:
            raise ConfigError("set GEMGYM_TOKENIZER to the model path (to render feedback)")
        self.renderer = _renderer(tok)
        self.max_turns = max_turns or int(os.environ.get("GEMGYM_MAX_TURNS", "8"))
        self.episode: TextEpisode | None = None
        eos = self.renderer.tokenizer.eos_token_id
        self._turn_end = self.renderer.turn_end_text([eos] if eos is not None else [])

    async def reset(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        label = json.loads(states["label"])
        factory = self.factories.get(str(label["env"]))
        if factory is None:
            raise ConfigError(
                f"label names env {label['env']!r}; GEMGYM_ENVS has {list(self.factories)}"
            )
        self.episode = TextEpisode(factory, seed=int(label["seed"]))
        await self.episode.areset()  # the prompt already holds this observation, rendered
        return {"observation": states["observation"]}

    async def step(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        if self.episode is None:
            raise ConfigError("step before reset")
        outcome = await self.episode.astep(str(states["action_text"]))
        done = outcome.done or self.episode.turn_cap_reached(self.max_turns)
        role = "tool" if outcome.info.get("use_tool") else "user"
        feedback = self._turn_end
        if not done:
            feedback += self.renderer.observation_text(outcome.observation, role)
        return {
            "rewards": torch.tensor(outcome.reward),
            "scores": torch.tensor(self.episode.total_return),
            "environment_feedback": feedback,
            "done": done,
            "extra_logs": {
                "success": torch.tensor(float(self.episode.success)),
                "gemgym_failed": torch.tensor(float(self.episode.failed)),
            },
        }


def make_agent_executor(**instance_kwargs: Any) -> type:
    """An ``AgentExecutor`` class (what OpenRLHF instantiates with no arguments) running
    :class:`GemgymAgentInstance` with ``instance_kwargs``."""

    class _Instance(GemgymAgentInstance):
        def __init__(self) -> None:
            super().__init__(**instance_kwargs)

    class AgentExecutor(MultiTurnAgentExecutor):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(_Instance)

    return AgentExecutor
