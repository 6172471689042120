"""The one exception hierarchy of gemgym.

Every error gemgym raises on purpose derives from :class:`GemGymError`. Where Python has an
established builtin for the same situation, the gemgym error also derives from it, so code written
against upstream GEM (which raised plain ``ValueError`` and ``ImportError``) keeps working::

    GemGymError
    ├── RegistryError (ValueError)
    │   ├── EnvNotFoundError          unknown env id; the message suggests close matches
    │   ├── DuplicateEnvError         an id registered twice
    │   └── InvalidEnvIdError         an id that does not follow the id grammar
    ├── ConfigError (ValueError)      a parameter with a bad value
    │   └── UnknownParameterError (TypeError)   a keyword the env does not take; lists the valid ones
    ├── DependencyNotInstalled (ImportError)    names the ``pip install "gemgym[extra]"`` to run
    ├── ResetNeeded (RuntimeError)    step() before reset(), or after the episode ended
    ├── ClosedError (RuntimeError)    using an env, tool or vector env after close()
    ├── DatasetError                  a dataset could not be loaded (offline, bad path, bad columns)
    ├── SandboxError                  code execution could not be set up (not: the code failed)
    │   └── SandboxUnavailableError   no isolating backend on this machine; says what to install
    ├── ToolError                     a tool could not be set up (bad server, bad config)
    ├── GradingError                  an env's grader could not grade (not the model's fault)
    ├── VectorEnvError                a vector env was misused or lost a worker beyond recovery
    ├── EnvLostError (ConnectionError)  an env's host (a served env's endpoint, a Ray node) was lost
    │   └── ServerFullError           every served endpoint refused a session: full (its caps)
    ├── AgentError                    an agent could not produce actions for a turn
    │   └── ModelUnavailableError     the model cannot be reached at all; the run stops
    └── BackendError                  an inference backend failed a request (server down, HTTP error,
                                      timeout, a model that cannot take the input)

Bad actions from a model are *not* errors: envs turn them into an observation and a reward.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = [
    "AgentError",
    "BackendError",
    "ClosedError",
    "ConfigError",
    "DatasetError",
    "DependencyNotInstalled",
    "DuplicateEnvError",
    "EnvLostError",
    "EnvNotFoundError",
    "GemGymError",
    "GradingError",
    "InvalidEnvIdError",
    "ModelUnavailableError",
    "RegistryError",
    "ResetNeeded",
    "SandboxError",
    "SandboxUnavailableError",
    "ServerFullError",
    "ToolError",
    "UnknownParameterError",
    "VectorEnvError",
    "close_matches",
    "missing_dependency",
]


class GemGymError(Exception):
    """Base class of every error raised by gemgym."""


class RegistryError(GemGymError, ValueError):
    """A problem with the env registry."""


class EnvNotFoundError(RegistryError):
    """No env is registered under the requested id."""


class DuplicateEnvError(RegistryError):
    """An env id was registered twice."""


class InvalidEnvIdError(RegistryError):
    """An env id does not follow the grammar ``[namespace:]Name[-vN][-variant]``."""


class ConfigError(GemGymError, ValueError):
    """A configuration value is invalid."""


class UnknownParameterError(ConfigError, TypeError):
    """A keyword argument is not accepted; the message lists the valid ones."""


class DependencyNotInstalled(GemGymError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""


class ResetNeeded(GemGymError, RuntimeError):
    """``step`` was called before ``reset`` or after the episode ended."""


class ClosedError(GemGymError, RuntimeError):
    """An object was used after ``close()``."""


class DatasetError(GemGymError):
    """A dataset could not be loaded or has the wrong shape."""


class SandboxError(GemGymError):
    """The code sandbox could not be set up or failed internally (not: the user code failed)."""


class SandboxUnavailableError(SandboxError):
    """No isolating sandbox backend is available on this machine."""


class ToolError(GemGymError):
    """A tool could not be set up (bad configuration, unreachable server at construction)."""


class GradingError(GemGymError):
    """An env's grader could not grade (its worker processes did not start, a sandbox could
    not run the tests): not the model's fault, so the episode fails with stage ``"grade"``."""


class VectorEnvError(GemGymError):
    """A vector env was misused (wrong number of actions, bad index) or broke beyond recovery."""


class EnvLostError(GemGymError, ConnectionError):
    """The host of an env went away mid-episode (a ``gemgym serve`` endpoint stopped answering,
    every endpoint of a pool is down, a Ray node died and its episode could not be re-run): the
    episode fails with stage ``"env"``; the next episode plays on a host that is up."""


class ServerFullError(EnvLostError):
    """Every ``gemgym serve`` endpoint that could host the env refused a session for being full
    (its ``--max-sessions``, or this client's per-client cap): the servers are up, there is no
    room. The episode fails with stage ``"env"``, as for a lost host; play fewer envs at once or
    add servers."""


class AgentError(GemGymError):
    """An agent could not produce actions (for example, its LLM server is unreachable)."""


class ModelUnavailableError(AgentError):
    """The model cannot be reached at all (server unreachable, credentials refused, unknown
    model): no episode can play, so the episode engine stops the run instead of failing every
    episode one by one."""


class BackendError(GemGymError):
    """An inference backend (:mod:`gemgym.llm`) failed a request; only its episode ends."""


def close_matches(word: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """Return up to ``n`` candidates that look like ``word`` (for "did you mean" messages)."""
    pool = list(candidates)
    found = difflib.get_close_matches(word, pool, n=n, cutoff=0.6)
    if not found:
        lower = {c.lower(): c for c in pool}
        found = [lower[m] for m in difflib.get_close_matches(word.lower(), lower, n=n, cutoff=0.5)]
    return found


def missing_dependency(package: str, extra: str) -> DependencyNotInstalled:
    """Build the error for a missing optional dependency, naming the extra to install."""
    return DependencyNotInstalled(
        f"{package!r} is not installed; it is needed here. "
        f'Install it with: pip install "gemgym[{extra}]"'
    )
