"""What an evaluation runs: named suites, env ids and globs, each env with or without a tool.

A spec is a suite name, an env id, a glob over the registered ids (``game:*-easy``), or either of
the last two with a tool: ``eval:AIME24+python``, ``eval:HotpotQA+search``.

==============  ================================================================================
suite           envs
==============  ================================================================================
``math``        ``eval:AIME24``, ``eval:AMC``, ``eval:MATH500``, ``eval:Minerva``,
                ``eval:OlympiadBench``, each without and with the Python tool (``+python``)
``math-notool`` / ``math-python``: one of the two halves
``qa``          the search-QA sets (``eval:QaOpen`` ... ``eval:Bamboogle``) without and with the
                search tool (``+search``, needs ``--search-url``)
``qa-nosearch`` / ``qa-search``: one of the two halves
``code``        ``eval:CodeContest``, ``code:HumanEval`` (the sandbox)
``games``       every game at each of its presets (``game:*-v0-easy``, ``-hard``, ...)
``rg``          every reasoning-gym task (``rg:*``)
==============  ================================================================================
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gemgym.errors import ConfigError

__all__ = ["MATH_EVAL", "QA_EVAL", "SUITES", "EvalEnv", "resolve"]

MATH_EVAL = ("eval:AIME24", "eval:AMC", "eval:MATH500", "eval:Minerva", "eval:OlympiadBench")
QA_EVAL = (
    "eval:QaOpen",
    "eval:NaturalQuestions",
    "eval:TriviaQA",
    "eval:PopQA",
    "eval:HotpotQA",
    "eval:2Wiki",
    "eval:Musique",
    "eval:Bamboogle",
)
CODE_EVAL = ("eval:CodeContest", "code:HumanEval")
TOOLS = ("python", "search")


@dataclass(frozen=True)
class EvalEnv:
    """One env of an evaluation: a registered id, an optional tool, keyword arguments and
    wrappers by name (:func:`gemgym.wrappers.factory.get_wrapper_fns`, comma-separated; around
    the tool's wrapper).

    ``name`` (the id, ``+tool`` when it has one) names it in results and reports.
    """

    env_id: str
    tool: str | None = None
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    wrappers: str = ""

    @property
    def name(self) -> str:
        """``env_id`` or ``env_id+tool``."""
        return f"{self.env_id}+{self.tool}" if self.tool else self.env_id

    def make(self, *, search_url: str | None = None) -> Any:
        """Build the env (with its tool, then its wrappers)."""
        from gemgym.registry import make

        wrappers: list[Any] = []
        if self.tool == "python":
            from gemgym.wrappers.tools import python_tool_wrapper

            wrappers.append(python_tool_wrapper())
        elif self.tool == "search":
            if not search_url:
                raise ConfigError(
                    f"{self.name} needs a search server: start one with `gemgym serve-retriever` "
                    "and pass its URL as search_url"
                )
            from gemgym.tools import SearchTool
            from gemgym.wrappers import ToolEnvWrapper

            url = search_url
            wrappers.append(lambda env: ToolEnvWrapper(env, [SearchTool(url)]))
        if self.wrappers:
            from gemgym.wrappers.factory import get_wrapper_fns

            wrappers += get_wrapper_fns(self.wrappers)
        return make(self.env_id, wrappers=wrappers or None, **dict(self.kwargs))


def _ids(pattern: str) -> list[str]:
    from gemgym.registry import list_envs

    return [i for i in list_envs() if fnmatch.fnmatchcase(i, pattern)]


def _suite(name: str) -> list[EvalEnv] | None:
    with_python = [EvalEnv(i, "python") for i in MATH_EVAL]
    with_search = [EvalEnv(i, "search") for i in QA_EVAL]
    suites: dict[str, Any] = {
        "math-notool": lambda: [EvalEnv(i) for i in MATH_EVAL],
        "math-python": lambda: with_python,
        "math": lambda: [EvalEnv(i) for i in MATH_EVAL] + with_python,
        "qa-nosearch": lambda: [EvalEnv(i) for i in QA_EVAL],
        "qa-search": lambda: with_search,
        "qa": lambda: [EvalEnv(i) for i in QA_EVAL] + with_search,
        "code": lambda: [EvalEnv(i) for i in CODE_EVAL],
        "games": lambda: [EvalEnv(i) for i in _ids("game:*")],
        "rg": lambda: [EvalEnv(i) for i in _ids("rg:*")],
    }
    fn = suites.get(name)
    return None if fn is None else list(fn())


SUITES = (
    "math",
    "math-notool",
    "math-python",
    "qa",
    "qa-nosearch",
    "qa-search",
    "code",
    "games",
    "rg",
)
"""The named suites (see the module docstring)."""


def resolve(
    specs: Sequence[str], env_kwargs: Mapping[str, Any] | None = None, wrappers: str = ""
) -> list[EvalEnv]:
    """The envs named by ``specs`` (suites, ids, globs, ``+tool``), in order, without repeats.

    ``env_kwargs`` go to every env (e.g. ``{"dataset": "sample"}``), and ``wrappers`` too
    (names, comma-separated, e.g. ``"grid"``).

    Raises:
        ConfigError: an unknown suite, id or tool, or a glob that matches nothing.
    """
    from gemgym.errors import close_matches
    from gemgym.registry import list_envs

    kwargs = dict(env_kwargs or {})
    out: list[EvalEnv] = []
    seen: set[str] = set()
    known = set(list_envs())
    for spec in specs:
        suite = _suite(spec)
        if suite is not None:
            found = suite
        else:
            base, _, tool = spec.partition("+")
            if tool and tool not in TOOLS:
                raise ConfigError(f"unknown tool {tool!r} in {spec!r}; choose python or search")
            if any(c in base for c in "*?["):
                ids = _ids(base)
                if not ids:
                    raise ConfigError(f"{base!r} matches no registered env id (see gemgym list)")
            elif base in known:
                ids = [base]
            else:
                hint = close_matches(base, sorted(known))
                raise ConfigError(
                    f"{spec!r} is neither a suite ({', '.join(SUITES)}) nor a registered env id"
                    + (f"; did you mean {', '.join(hint)}?" if hint else "")
                )
            found = [EvalEnv(i, tool or None) for i in ids]
        for e in found:
            e = EvalEnv(e.env_id, e.tool, kwargs, wrappers)
            if e.name not in seen:
                seen.add(e.name)
                out.append(e)
    if not out:
        raise ConfigError("nothing to evaluate: name a suite, an env id or a glob")
    return out
