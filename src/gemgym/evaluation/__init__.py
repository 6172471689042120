"""Evaluating agents on suites of envs: ``gemgym eval`` and its Python API.

* :mod:`~gemgym.evaluation.suites`: named suites, ids, globs, tools (:func:`resolve`);
* :mod:`~gemgym.evaluation.runner`: the async runner (:class:`Runner`, :func:`plan_tasks`);
* :mod:`~gemgym.evaluation.agents`: :class:`ChatAgent` (OpenAI-compatible, retries, timeouts),
  :class:`BackendAgent` (a :class:`gemgym.llm.Backend`), random and oracle baselines;
* :mod:`~gemgym.evaluation.scoring`: unbiased :func:`pass_at_k`, mean@k, :func:`summarize`,
  :func:`compare_runs`;
* :mod:`~gemgym.evaluation.results`: a run's files (:class:`RunDir`);
* :mod:`~gemgym.evaluation.report`: Markdown and self-contained HTML reports.

See ``docs/eval.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gemgym._lazy import lazy_exports

if TYPE_CHECKING:
    from gemgym.evaluation.agents import BackendAgent, ChatAgent, OracleAgent, RandomAgent
    from gemgym.evaluation.outputs import rescore, write_outputs
    from gemgym.evaluation.results import RunDir
    from gemgym.evaluation.runner import EvalConfig, Runner, Task, plan_tasks
    from gemgym.evaluation.scoring import compare_runs, pass_at_k, summarize
    from gemgym.evaluation.suites import EvalEnv, resolve

_EXPORTS = {
    "BackendAgent": "gemgym.evaluation.agents",
    "ChatAgent": "gemgym.evaluation.agents",
    "OracleAgent": "gemgym.evaluation.agents",
    "RandomAgent": "gemgym.evaluation.agents",
    "rescore": "gemgym.evaluation.outputs",
    "write_outputs": "gemgym.evaluation.outputs",
    "RunDir": "gemgym.evaluation.results",
    "EvalConfig": "gemgym.evaluation.runner",
    "Runner": "gemgym.evaluation.runner",
    "Task": "gemgym.evaluation.runner",
    "plan_tasks": "gemgym.evaluation.runner",
    "compare_runs": "gemgym.evaluation.scoring",
    "pass_at_k": "gemgym.evaluation.scoring",
    "summarize": "gemgym.evaluation.scoring",
    "EvalEnv": "gemgym.evaluation.suites",
    "resolve": "gemgym.evaluation.suites",
}
__all__ = [
    "BackendAgent",
    "ChatAgent",
    "EvalConfig",
    "EvalEnv",
    "OracleAgent",
    "RandomAgent",
    "RunDir",
    "Runner",
    "Task",
    "compare_runs",
    "pass_at_k",
    "plan_tasks",
    "rescore",
    "resolve",
    "summarize",
    "write_outputs",
]
__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)
