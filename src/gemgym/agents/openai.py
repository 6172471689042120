"""An agent backed by any OpenAI-compatible chat-completions server (vLLM, SGLang, an API).

>>> agent = OpenAIAgent(model="Qwen/Qwen3-4B", base_url="http://localhost:8000/v1")  # doctest: +SKIP

The agent keeps one conversation per slot: each observation is sent as a user message (as
:func:`gemgym.prompting.model_view` shows it: with the board the env keeps in ``info["suffix"]``,
which the episode engine adds before calling the agent) and each
reply is kept as the assistant message, so a multi-turn game is played as one chat. When the env
already returns chat messages (:class:`~gemgym.wrappers.ChatHistory`), they are sent as they are.
Requests of a batch go out concurrently; the client retries transient failures and times out.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from gemgym.agents.base import BaseAgent
from gemgym.core import MultimodalObservation
from gemgym.errors import AgentError, ConfigError, ModelUnavailableError, missing_dependency

if TYPE_CHECKING:
    from gemgym.vector import VectorEnv

__all__ = ["OpenAIAgent"]


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
            raise ConfigError("OpenAIAgent needs a model name (--model)")
        try:
            import openai
        except ImportError as e:
            raise missing_dependency("openai", "openai") from e
        self.model = model
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL")
        self.system_prompt = system_prompt
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.keep_history = keep_history
        self.timeout = timeout
        self.max_retries = max_retries
        self._client = openai.OpenAI(
            base_url=self.base_url,
            api_key=os.environ.get(api_key_env) or "EMPTY",
            timeout=timeout,
            max_retries=max_retries,
        )
        self._openai = openai
        self._pool = ThreadPoolExecutor(max_workers=max(1, max_concurrency))
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

    def _complete(self, messages: list[dict[str, Any]]) -> str:
        try:
            resp = self._client.chat.completions.create(
                model=self.model,
                messages=messages,  # type: ignore[arg-type]
                temperature=self.temperature,
                max_tokens=self.max_tokens,
            )
        except self._openai.APITimeoutError as e:  # a subclass of APIConnectionError
            raise AgentError(
                f"the LLM server at {self.base_url or 'the OpenAI API'} did not answer within "
                f"{self.timeout:g} s ({self.max_retries + 1} tries); it may be overloaded or "
                "hung: raise --timeout, or lower the batch size"
            ) from e
        except self._openai.APIConnectionError as e:
            raise ModelUnavailableError(
                f"cannot reach the LLM server at {self.base_url or 'the OpenAI API'}: {e}. "
                "Is it running, and is --base-url right?"
            ) from e
        except self._openai.APIStatusError as e:
            msg = f"the LLM server answered {e.status_code}: {e.message}"
            if e.status_code in (401, 403, 404):  # credentials or model name: no turn can work
                raise ModelUnavailableError(msg) from e
            raise AgentError(msg) from e
        choice = resp.choices[0].message.content if resp.choices else None
        return choice or ""

    def act(
        self,
        observations: Sequence[Any],
        *,
        slots: Sequence[int],
        venv: VectorEnv,
    ) -> list[Any]:
        convs = [self._messages_for(s, o) for s, o in zip(slots, observations, strict=True)]
        replies = list(self._pool.map(self._complete, convs))
        if self.keep_history:
            for s, o, reply in zip(slots, observations, replies, strict=True):
                if not isinstance(o, list):
                    self._conversations[s].append({"role": "assistant", "content": reply})
        return replies

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._client.close()
