"""Scores of an evaluation: unbiased pass@k, mean@k, per-env and per-difficulty summaries.

pass@k is the unbiased estimator of Chen et al. (2021): with ``n`` samples of a task of which
``c`` succeed, ``pass@k = 1 - C(n-c, k) / C(n, k)``, averaged over tasks. mean@k is the mean
success over the samples of a task, averaged over tasks (the "avg@k" of math papers).

Episodes whose infrastructure failed (``status == "error"``: the server never answered after
its retries, a sandbox could not run) are counted apart and not scored; every score comes with
the **error rate** (errors / episodes), and a score whose error rate exceeds ``max_error_rate``
(default 5 %) is refused (``refused: true``; the CLI prints no score then and exits non-zero).
Everything else is scored: a prompt longer than the model's context (``truncation:
"context"``) and an env that raised on the model's reply (``status == "env_error"``, counted in
``env_errors`` too, since it is a bug of the env) count as failures, so a model cannot score
higher by rambling or by crashing an env. A task's pass@k uses its scored samples only, and
needs at least ``k`` of them.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "MAX_ERROR_RATE",
    "PRESETS",
    "compare_runs",
    "family",
    "is_scored",
    "pass_at_k",
    "summarize",
]

MAX_ERROR_RATE = 0.05
"""The share of unscored episodes above which a score is refused (``--max-error-rate``)."""

PRESETS = ("extreme-hard", "easy", "medium", "hard", "random")
"""The preset suffixes of env ids (``game:Sudoku-v0-easy``), read as difficulties."""


def family(name: str) -> str:
    """An env name without its preset: ``game:Sudoku-v0-easy`` -> ``game:Sudoku-v0``."""
    base, plus, tool = name.partition("+")
    for p in PRESETS:
        if base.endswith("-" + p):
            base = base[: -len(p) - 1]
            break
    return base + plus + tool


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one task with ``n`` samples, ``c`` of them correct.

    >>> pass_at_k(10, 0, 1), pass_at_k(10, 10, 1), round(pass_at_k(10, 3, 1), 3)
    (0.0, 1.0, 0.3)
    >>> round(pass_at_k(4, 1, 2), 3)
    0.5
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def _group(records: Iterable[Mapping[str, Any]], key: str) -> dict[str, list[Mapping[str, Any]]]:
    out: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in records:
        out[str(r.get(key))].append(r)
    return dict(out)


def is_scored(record: Mapping[str, Any]) -> bool:
    """Whether a record counts in the scores (everything but an infrastructure ``error``)."""
    return record.get("status") != "error"


def _block(
    records: Sequence[Mapping[str, Any]], ks: Sequence[int], max_error_rate: float
) -> dict[str, Any]:
    """Scores of a set of episodes (one env, or one difficulty of an env)."""
    ok = [r for r in records if is_scored(r)]
    errors = len(records) - len(ok)
    error_rate = errors / len(records) if records else 0.0
    by_task: dict[int, list[Mapping[str, Any]]] = defaultdict(list)
    for r in ok:
        by_task[int(r["task"])].append(r)
    task_success = [sum(bool(r["success"]) for r in rs) / len(rs) for rs in by_task.values()]
    out: dict[str, Any] = {
        "episodes": len(records),
        "scored": len(ok),
        "errors": errors,
        "error_rate": error_rate,
        "refused": error_rate > max_error_rate,
        "env_errors": sum(r.get("status") == "env_error" for r in records),
        "context_truncations": sum(r.get("truncation") == "context" for r in ok),
        "warnings": sum(len(r.get("warnings") or ()) for r in records),
        "tasks": len({int(r["task"]) for r in records}),
        "success_rate": sum(bool(r["success"]) for r in ok) / len(ok) if ok else None,
        "mean_return": sum(float(r["return"]) for r in ok) / len(ok) if ok else None,
        "mean_turns": sum(int(r["turns"]) for r in ok) / len(ok) if ok else None,
        "mean_at_k": sum(task_success) / len(task_success) if task_success else None,
        "prompt_tokens": sum(int(r.get("usage", {}).get("prompt_tokens", 0)) for r in records),
        "completion_tokens": sum(
            int(r.get("usage", {}).get("completion_tokens", 0)) for r in records
        ),
        "mean_latency_s": (
            sum(float(r.get("latency_s", 0.0)) for r in ok) / len(ok) if ok else None
        ),
    }
    passes: dict[str, float | None] = {}
    for k in ks:
        vals = [
            pass_at_k(len(rs), sum(bool(r["success"]) for r in rs), k)
            for rs in by_task.values()
            if len(rs) >= k
        ]
        passes[str(k)] = sum(vals) / len(vals) if vals else None
    out["pass_at_k"] = passes
    return out


def summarize(
    records: Iterable[Mapping[str, Any]],
    ks: Sequence[int] = (1,),
    *,
    max_error_rate: float = MAX_ERROR_RATE,
) -> dict[str, Any]:
    """Per-env scores (and per difficulty within each env), plus the macro average over envs.

    Returns ``{"envs": {name: {...scores, "difficulties": {d: {...}}}}, "families": {...},
    "overall": {...}}``; ``families`` breaks each family of envs (the presets of a game, the
    levels of a dataset) down by difficulty, where it has more than one; ``overall`` holds the
    totals and the mean of the per-env scores. Every block has its ``error_rate`` and
    ``refused`` (the error rate exceeds ``max_error_rate``); the overall score is refused when
    its own error rate or any env's exceeds it.
    """
    if not 0.0 <= max_error_rate <= 1.0:
        from gemgym.errors import ConfigError

        raise ConfigError(f"max_error_rate must be in [0, 1], got {max_error_rate}")
    records = list(records)
    m = max_error_rate
    envs: dict[str, Any] = {}
    for name, rs in sorted(_group(records, "env").items()):
        block = _block(rs, ks, m)
        block["difficulties"] = {
            d: _block(drs, ks, m) for d, drs in sorted(_group(rs, "difficulty").items())
        }
        envs[name] = block
    blocks = list(envs.values())

    def macro(key: str) -> float | None:
        vals = [b[key] for b in blocks if b[key] is not None]
        return sum(vals) / len(vals) if vals else None

    episodes = sum(b["episodes"] for b in blocks)
    errors = sum(b["errors"] for b in blocks)
    error_rate = errors / episodes if episodes else 0.0
    overall: dict[str, Any] = {
        "envs": len(envs),
        "episodes": episodes,
        "scored": sum(b["scored"] for b in blocks),
        "errors": errors,
        "error_rate": error_rate,
        "refused": error_rate > m or any(b["refused"] for b in blocks),
        "max_error_rate": m,
        "env_errors": sum(b["env_errors"] for b in blocks),
        "context_truncations": sum(b["context_truncations"] for b in blocks),
        "warnings": sum(b["warnings"] for b in blocks),
        "success_rate": macro("success_rate"),
        "mean_return": macro("mean_return"),
        "mean_at_k": macro("mean_at_k"),
        "prompt_tokens": sum(b["prompt_tokens"] for b in blocks),
        "completion_tokens": sum(b["completion_tokens"] for b in blocks),
        "pass_at_k": {},
    }
    for k in ks:
        vals = [b["pass_at_k"][str(k)] for b in blocks if b["pass_at_k"][str(k)] is not None]
        overall["pass_at_k"][str(k)] = sum(vals) / len(vals) if vals else None
    families: dict[str, Any] = {}
    by_family: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in records:
        by_family[family(str(r["env"]))].append(r)
    for fam, rs in sorted(by_family.items()):
        diffs = _group(rs, "difficulty")
        if len(diffs) > 1:
            families[fam] = {d: _block(drs, ks, m) for d, drs in _ordered(diffs)}
    return {"envs": envs, "families": families, "overall": overall}


def _ordered(diffs: dict[str, Any]) -> list[tuple[str, Any]]:
    rank = {p: i for i, p in enumerate(("easy", "medium", "hard", "extreme-hard", "random"))}
    return sorted(diffs.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0]))


def _task_means(records: Iterable[Mapping[str, Any]]) -> dict[str, dict[int, float]]:
    per: dict[str, dict[int, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        if is_scored(r):
            per[str(r["env"])][int(r["task"])].append(bool(r["success"]))
    return {e: {t: sum(v) / len(v) for t, v in ts.items()} for e, ts in per.items()}


def _mean_ci(values: Sequence[float], z: float) -> tuple[float, float]:
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, math.inf
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, z * math.sqrt(var / n)


def compare_runs(
    a: Iterable[Mapping[str, Any]], b: Iterable[Mapping[str, Any]], *, z: float = 1.96
) -> list[dict[str, Any]]:
    """Per-env success of run B minus run A, with a confidence interval (95 % by default).

    Tasks played in both runs are paired (the interval is that of the mean per-task difference);
    otherwise the runs are compared as independent samples. Each row: ``env``, ``a``, ``b``,
    ``delta``, ``ci`` (half-width), ``tasks`` (paired tasks or ``None``), ``significant``.
    """
    ma, mb = _task_means(a), _task_means(b)
    rows: list[dict[str, Any]] = []
    for env in sorted(set(ma) | set(mb)):
        ta, tb = ma.get(env, {}), mb.get(env, {})
        row: dict[str, Any] = {"env": env, "a": None, "b": None, "delta": None, "ci": None}
        if ta:
            row["a"] = sum(ta.values()) / len(ta)
        if tb:
            row["b"] = sum(tb.values()) / len(tb)
        shared = sorted(set(ta) & set(tb))
        row["tasks"] = len(shared) or None
        if shared:
            delta, ci = _mean_ci([tb[t] - ta[t] for t in shared], z)
            row["delta"], row["ci"] = delta, ci
        elif ta and tb:
            ma_, ca = _mean_ci(list(ta.values()), z)
            mb_, cb = _mean_ci(list(tb.values()), z)
            row["delta"], row["ci"] = mb_ - ma_, math.hypot(ca, cb)
        row["significant"] = (
            row["delta"] is not None and row["ci"] is not None and abs(row["delta"]) > row["ci"]
        )
        rows.append(row)
    return rows
