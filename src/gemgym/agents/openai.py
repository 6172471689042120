"""An agent backed by any OpenAI-compatible chat-completions server (vLLM, SGLang, an API).

>>> agent = OpenAIAgent(model="Qwen/Qwen3-4B", base_url="http://localhost:8000/v1")  # doctest: +SKIP

The agent keeps one conversation per slot: each observation is sent as a user message (as
:func:`gemgym.prompting.model_view` shows it: with the board the env keeps in ``info["suffix"]``,
which the episode engine adds before calling the agent) and each
reply is kept as the assistant message, so a multi-turn game is played as one chat. When the env
already returns chat messages (:class:`~gemgym.wrappers.ChatHistory`), they are sent as they are.

The requests go through the same client as ``gemgym run`` and ``gemgym eval``
(:class:`gemgym.evaluation.agents.ChatAgent`: retries with backoff, a deadline per request,
the same error messages), on gemgym's HTTP thread (:mod:`gemgym._http`): the requests of a
batch go out concurrently, up to ``max_concurrency`` at once. Before the first batch the server
is probed once: one it cannot reach, one that refuses the key or does not serve the model
raises :class:`~gemgym.errors.ModelUnavailableError`. Needs ``pip install "gemgym[openai]"``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gemgym.agents.base import BaseAgent
from gemgym.core import MultimodalObservation
from gemgym.errors import AgentError, ConfigError

if TYPE_CHECKING:
    from gemgym.evaluation.agents import ChatAgent
    from gemgym.vector import VectorEnv

__all__ = ["OpenAIAgent"]

OPENAI_API = "https://api.openai.com/v1"


class OpenAIAgent(BaseAgent):
    """Ask an OpenAI-compatible server for each action.

    Args:
        model: the model name the server serves.
        base_url: the server's ``/v1`` URL (default ``$OPENAI_BASE_URL`` or OpenAI's API).
        api_key_env: the environment variable holding the API key (``"EMPTY"`` is used when it is
            unset, which local servers accept).
        system_prompt: an optional system message at the start of each conversation.
        temperature, max_tokens: sampling settings.
        timeout: seconds per request; max_retries: retries of a failed request.
        keep_history: send the whole episode (true) or only the latest observation.
        max_concurrency: parallel requests per batch.

    A request that still fails after its retries raises :class:`~gemgym.errors.AgentError`
    with the reason (as does a prompt longer than the model's context); a server that cannot
    serve any turn raises :class:`~gemgym.errors.ModelUnavailableError`.
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        system_prompt: str | None = None,
        temperature: float = 0.7,
        max_tokens: int | None = 1024,
        timeout: float = 60.0,
        max_retries: int = 2,
        keep_history: bool = True,
        max_concurrency: int = 32,
    ) -> None:
        if not model:
            raise ConfigError("OpenAIAgent needs a model name (model=...)")
        if max_concurrency < 1:
            raise ConfigError(f"max_concurrency must be >= 1, got {max_concurrency}")
        from gemgym.evaluation.agents import ChatAgent

        self.model = model
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL")
        self.api_key_env = api_key_env
        self.system_prompt = system_prompt
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.keep_history = keep_history
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_concurrency = max_concurrency
        # no seed is sent (as before): a server samples afresh each request
        self._chat: ChatAgent = ChatAgent(
            model,
            self.base_url or OPENAI_API,
            api_key=os.environ.get(api_key_env) or "EMPTY",
            temperature=temperature,
            max_tokens=max_tokens,
            seed=None,
            timeout=timeout,
            max_retries=max_retries,
            backoff=0.5,
            max_backoff=8.0,
            breaker_threshold=None,  # each failed batch raises; the agent stays usable
        )
        self._conversations: dict[int, list[dict[str, Any]]] = {}

    def start_episodes(self, slots: Sequence[int]) -> None:
        for s in slots:
            self._conversations.pop(s, None)

    def _messages_for(self, slot: int, obs: Any) -> list[dict[str, Any]]:
        if isinstance(obs, list):  # already a conversation (ChatHistory)
            msgs = [dict(m) for m in obs]
            if self.system_prompt and not (msgs and msgs[0].get("role") == "system"):
                msgs.insert(0, {"role": "system", "content": self.system_prompt})
            return msgs
        content: Any = obs.to_openai_content() if isinstance(obs, MultimodalObservation) else obs
        conv = self._conversations.get(slot) if self.keep_history else None
        if conv is None:
            conv = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
            if self.keep_history:
                self._conversations[slot] = conv
        conv.append({"role": "user", "content": content})
        return conv if self.keep_history else list(conv)

    async def _batch(self, convs: list[list[dict[str, Any]]]) -> list[str]:
        chat = self._chat
        if not chat.probed:
            await chat.probe(connect_timeout=min(10.0, self.timeout))
        slots = asyncio.Semaphore(self.max_concurrency)

        async def one(messages: list[dict[str, Any]]) -> str:
            async with slots:
                reply = await chat.complete(messages)
            if reply.error is not None:
                raise AgentError(reply.error)
            if reply.finish_reason == "context":
                raise AgentError(
                    f"the conversation ({len(messages)} messages) is longer than the context of "
                    f"model {self.model!r}; lower max_tokens, or pass keep_history=False"
                )
            return str(reply.action)

        return list(await asyncio.gather(*(one(m) for m in convs)))

    def act(
        self,
        observations: Sequence[Any],
        *,
        slots: Sequence[int],
        venv: VectorEnv,
    ) -> list[Any]:
        from gemgym._http import run_sync

        convs = [self._messages_for(s, o) for s, o in zip(slots, observations, strict=True)]
        replies = run_sync(self._batch(convs))
        if self.keep_history:
            for s, o, reply in zip(slots, observations, replies, strict=True):
                if not isinstance(o, list):
                    self._conversations[s].append({"role": "assistant", "content": reply})
        return replies

    def close(self) -> None:
        from gemgym._http import run_sync

        run_sync(self._chat.aclose())
