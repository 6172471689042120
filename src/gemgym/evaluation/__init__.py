"""Evaluating agents on suites of envs: ``gemgym eval`` and its Python API.

* :mod:`~gemgym.evaluation.suites`: named suites, ids, globs, tools (:func:`resolve`);
* :mod:`~gemgym.evaluation.runner`: the async runner (:class:`Runner`, :func:`plan_tasks`);
* :mod:`~gemgym.evaluation.agents`: :class:`ChatAgent` (OpenAI-compatible, retries, timeouts),
  :class:`BackendAgent` (a :class:`gemgym.llm.LLMBackend`); the random and oracle baselines are
  :class:`gemgym.agents.RandomAgent` and :class:`gemgym.agents.OracleAgent`, exported here too;
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
    from gemgym.agents.builtin import (
        OracleAgent as OracleAgent,
        RandomAgent as RandomAgent,
    )
    from gemgym.evaluation.agents import (
        BackendAgent as BackendAgent,
        ChatAgent as ChatAgent,
    )
    from gemgym.evaluation.outputs import (
        rescore as rescore,
        write_outputs as write_outputs,
    )
    from gemgym.evaluation.results import (
        RunDir as RunDir,
    )
    from gemgym.evaluation.runner import (
        EvalConfig as EvalConfig,
        Runner as Runner,
        Task as Task,
        plan_tasks as plan_tasks,
    )
    from gemgym.evaluation.scoring import (
        compare_runs as compare_runs,
        pass_at_k as pass_at_k,
        summarize as summarize,
    )
    from gemgym.evaluation.suites import (
        EvalEnv as EvalEnv,
        resolve as resolve,
    )

__getattr__, __dir__ = lazy_exports(globals())
