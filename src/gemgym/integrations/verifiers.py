"""verifiers (0.4, ``verifiers.v1``): any gemgym env as a verifiers taskset and env.

Three classes make a verifiers environment package:

* :class:`GemgymTaskset` yields one task per ``(env, seed)``: the env's first observation is
  the prompt, the env name and seed ride in ``info`` (configured by :class:`GemgymTasksetConfig`:
  ``envs`` is comma-separated :data:`~gemgym.integrations.common.PRESETS` names or registered
  env ids, ``num_tasks``, ``seed``, ``max_turns``);
* :class:`GemgymEnv` plays the episode as the run's user: every assistant reply is one env
  step, the next observation is the next user turn, and the env's return is recorded as the
  ``env_return`` reward (success and turns as metrics); the episode ends when the env ends it
  or after ``max_turns``;
* :class:`GemgymHarness` is an in-process chat harness: one chat completion per segment, sent
  through verifiers' interception endpoint (so the trace records every model call), with no
  program to install (verifiers' own chat harnesses run a ``uv`` script).

verifiers finds an environment by importing a top-level module named after the taskset id, so
users add a one-line module (``examples/verifiers/gemgym_env.py``)::

    from gemgym.integrations.verifiers import GemgymEnv, GemgymHarness, GemgymTaskset
    __all__ = ["GemgymEnv", "GemgymHarness", "GemgymTaskset"]

and run verifiers' own evaluation against any OpenAI-compatible server::

    PYTHONPATH=examples/verifiers vf-eval --env.taskset.id gemgym-env \\
        --env.taskset.envs guess --model MODEL --client.base-url http://127.0.0.1:8000/v1 \\
        -n 4 --no-push --no-rich

Needs ``pip install "gemgym[verifiers]"`` (verifiers 0.4 pins its own openai/mcp versions; a
separate virtual environment is the clean way).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gemgym.errors import missing_dependency
from gemgym.integrations.common import (
    TextEpisode,
    named_envs,
    task_rows,
)

try:
    import verifiers.v1 as vf
    from verifiers.v1.runtimes import ProgramResult
except ImportError as e:  # pragma: no cover - depends on the extra
    raise missing_dependency(e.name or "verifiers", "verifiers") from e

__all__ = ["GemgymEnv", "GemgymHarness", "GemgymTaskset"]


class GemgymTasksetConfig(vf.TasksetConfig):  # type: ignore[misc]
    envs: str = "guess"
    """Comma-separated preset names (guess, math, qa) or registered env ids; tasks cycle
    through them."""
    num_tasks: int = 16
    """How many tasks (env, seed) to yield."""
    seed: int = 0
    """The first task's seed (task ``i`` plays from ``seed + i``)."""
    max_turns: int = 8
    """The most env steps an episode may take."""


class GemgymData(vf.TaskData):  # type: ignore[misc]
    info: dict[str, Any]
    """``{"env": name, "seed": seed, "max_turns": n, "envs": spec}``."""


class GemgymTask(vf.Task[GemgymData, vf.State, vf.TaskConfig]):  # type: ignore[misc]
    pass


class GemgymTaskset(vf.Taskset[GemgymTask, GemgymTasksetConfig]):  # type: ignore[misc]
    def load(self) -> Iterator[GemgymTask]:
        cfg = self.config
        for i, row in enumerate(task_rows(named_envs(cfg.envs), cfg.num_tasks, seed=cfg.seed)):
            info = {"env": row["env"], "seed": row["seed"], "max_turns": cfg.max_turns}
            info["envs"] = cfg.envs
            data = GemgymData(
                name=f"{row['env']}#{i}",
                prompt=row["prompt"][0]["content"],
                system_prompt=self.system_prompt,
                info=info,
            )
            yield GemgymTask(data, cfg.task)


class GemgymHarnessConfig(vf.HarnessConfig):  # type: ignore[misc]
    pass


class GemgymHarness(vf.Harness[GemgymHarnessConfig]):  # type: ignore[misc]
    """One chat completion per segment, in process, through the interception endpoint."""

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_RESUME = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(
        self,
        ctx: Any,
        trace: Any,
        runtime: Any,
        endpoint: str,
        secret: str,
        mcp_urls: dict[str, str],
        data: Any,
        tool_interception_url: str | None = None,
    ) -> Any:
        from openai import AsyncOpenAI
        from verifiers.v1.dialects.chat import message_to_wire

        system, prompt = self.resolve_prompt(data)
        messages: list[dict[str, Any]] = (
            [] if not system else [{"role": "system", "content": system}]
        )
        if isinstance(prompt, str):
            messages.append({"role": "user", "content": prompt})
        elif prompt is not None:
            messages += [message_to_wire(m) for m in prompt]
        client: Any = AsyncOpenAI(base_url=endpoint, api_key=secret, max_retries=2)
        try:
            stream = await client.chat.completions.create(
                model=ctx.model,
                messages=messages,
                stream=True,
                stream_options={"include_usage": True},
            )
            text = ""
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    text += chunk.choices[0].delta.content
        finally:
            await client.close()
        return ProgramResult(exit_code=0, stdout=text, stderr="")


class GemgymEnvConfig(vf.EnvConfig):  # type: ignore[misc]
    player: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())


class GemgymEnv(vf.Env[GemgymEnvConfig]):  # type: ignore[misc]
    """Steps the gemgym env with each assistant reply; the env's return is the reward."""

    async def run(self, task: Any, agents: Any) -> None:
        info = task.data.info
        factory = named_envs(str(info["envs"]))[str(info["env"])]
        episode = TextEpisode(factory, seed=int(info["seed"]))
        await episode.areset()  # the task's prompt is this observation
        turns = 0
        try:
            async with agents.player.interaction(task) as interaction:
                segment = await interaction.turn()
                while not segment.terminated:
                    outcome = await episode.astep(segment.last_reply)
                    turns += 1
                    if outcome.done or episode.turn_cap_reached(int(info["max_turns"])):
                        break
                    segment = await interaction.turn(outcome.observation)
        finally:
            episode.close()
        trace = interaction.trace
        trace.record_reward("env_return", episode.total_return, 1.0)
        trace.record_metric("success", float(episode.success))
        trace.record_metric("gemgym_failed", float(episode.failed))
        trace.record_metric("turns", float(turns))
