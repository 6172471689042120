"""What an audit runs against: env ids (optionally with a tool) and what each env is like.

:func:`resolve` turns command-line specs into :class:`~gemgym.evaluation.suites.EvalEnv`\\ s
(the same grammar as ``gemgym eval``: ids, globs such as ``game:*-easy``, suites such as
``games``, and ``+python`` / ``+search`` for an env wrapped with a tool); unknown ids fail with
close-match suggestions. :func:`probe` makes one copy of an env, resets it once and records its
:class:`Traits`: its family (the id's namespace), its kind (``code``, ``terminal``, ``answer``
for single-answer dataset envs, ``game`` for everything else), its tool, its dataset size,
whether it has an expert, and the answer format its random actions use. The exploit policies
(:mod:`gemgym.audit.policies`) decide from these traits whether they apply.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from gemgym.errors import ConfigError

__all__ = ["Kind", "Traits", "family_of", "probe", "resolve"]

Kind = Literal["code", "terminal", "answer", "game"]

_WRAPS = (
    (re.compile(r"\\boxed\{(.*)\}", re.DOTALL), "\\boxed{%s}"),
    (re.compile(r"<answer>(.*)</answer>", re.DOTALL), "<answer>%s</answer>"),
    (re.compile(r"^\[(.*)\]$", re.DOTALL), "[%s]"),
)


def family_of(env_id: str) -> str:
    """An id's family: its namespace (``game``, ``math``, ``rg``, ...), or ``other``."""
    head, sep, _ = env_id.partition(":")
    return head if sep else "other"


def answer_template(action: Any) -> str:
    """The format of ``action`` with its content as ``%s`` (``\\boxed{%s}``, ``[%s]``, ...)."""
    text = str(action).strip()
    for pattern, template in _WRAPS:
        if pattern.search(text):
            return template
    return "%s"


@dataclass(frozen=True)
class Traits:
    """What an env is like, as the exploit policies see it.

    Attributes:
        name: the audited name (``env_id`` or ``env_id+tool``).
        env_id: the registered id.
        family: the id's namespace (:func:`family_of`); ``+python`` envs are ``<family>+python``.
        kind: ``code``, ``terminal``, ``answer`` (a dataset env graded on one answer) or
            ``game`` (any other env, usually multi-turn).
        tool: ``"python"``, ``"search"`` or ``None``.
        size: the number of dataset items (``None``: seeded episodes).
        has_expert: whether ``expert_action()`` works on a fresh episode.
        template: the answer format of the env's random actions (``\\boxed{%s}``, ``%s``).
        task: a terminal env's task name (``None`` for ``terminal:dir`` and other kinds).
    """

    name: str
    env_id: str
    family: str
    kind: Kind
    tool: str | None
    size: int | None
    has_expert: bool
    template: str
    task: str | None = None

    @property
    def dataset(self) -> bool:
        """Whether episodes are dataset items (``options={"index": i}``)."""
        return self.size is not None


def resolve(specs: Sequence[str], env_kwargs: Mapping[str, Any] | None = None) -> list[Any]:
    """The envs named by ``specs`` (ids, globs, suites, ``+python``/``+search``), in order.

    Raises:
        ConfigError: an unknown id (with close matches), suite or tool; no spec at all.
    """
    if not specs:
        raise ConfigError("name at least one env id to audit (see gemgym list)")
    from gemgym.evaluation.suites import resolve as resolve_specs

    return resolve_specs(specs, env_kwargs)


def probe(target: Any, *, seed: int = 0, search_url: str | None = None) -> Traits:
    """Make ``target`` (an :class:`~gemgym.evaluation.suites.EvalEnv`) once and read its traits."""
    from gemgym.envs.code import CodeEnv
    from gemgym.envs.dataset import DatasetEnv
    from gemgym.envs.terminal.env import TerminalEnv

    env = target.make(search_url=search_url)
    try:
        inner = env.unwrapped
        size = len(inner.source) if isinstance(inner, DatasetEnv) else None
        kind: Kind
        if isinstance(inner, CodeEnv):
            kind = "code"
        elif isinstance(inner, TerminalEnv):
            kind = "terminal"
        elif isinstance(inner, DatasetEnv):
            kind = "answer"
        else:
            kind = "game"
        env.reset(seed=seed, options={"index": 0} if size is not None else None)
        try:
            env.expert_action()
            has_expert = True
        except Exception:  # NotImplementedError, or an item without a reference
            has_expert = False
        try:
            template = answer_template(env.sample_random_action())
        except Exception:
            template = "%s"
        task = None
        if kind == "terminal":
            task = getattr(getattr(inner, "config", None), "task", None)
        family = family_of(target.env_id) + (f"+{target.tool}" if target.tool else "")
        return Traits(
            target.name,
            target.env_id,
            family,
            kind,
            target.tool,
            size,
            has_expert,
            template,
            task,
        )
    finally:
        env.close()
