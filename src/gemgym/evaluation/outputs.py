"""What a run leaves behind (summary and reports), and re-grading a stored run (rescore)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gemgym.episodes.outcomes import is_success
from gemgym.evaluation.results import RunDir
from gemgym.evaluation.scoring import summarize
from gemgym.evaluation.suites import EvalEnv

__all__ = ["rescore", "write_outputs"]


def write_outputs(run_dir: RunDir, run: Mapping[str, Any], *, status: str) -> dict[str, Any]:
    """Write ``summary.json``, ``report.md`` and ``report.html`` from the records; returns the
    summary (``{"run": ..., "summary": ...}``)."""
    from gemgym.evaluation.report import render_html, render_markdown

    records = run_dir.read_records()
    ks = tuple(int(k) for k in run.get("ks", (1,)))
    summary = summarize(records, ks, max_error_rate=float(run.get("max_error_rate", 0.05)))
    run_info = dict(run)
    run_info["status"] = status
    for kind, key in (("error", "error_examples"), ("env_error", "env_error_examples")):
        bad = [r for r in records if r["status"] == kind]
        run_info[key] = [
            {k: r.get(k) for k in ("env", "task", "sample", "error", "attempt")} for r in bad[:10]
        ]
    run_info["warning_examples"] = [
        {"env": r["env"], "task": r["task"], "sample": r["sample"], "warning": w}
        for r in records
        for w in (r.get("warnings") or [])[:1]
    ][:10]
    out = {"run": run_info, "summary": summary}
    run_dir.write_json(run_dir.summary, out)
    run_dir.report_md.write_text(render_markdown(run_info, summary), encoding="utf-8")
    run_dir.report_html.write_text(render_html(run_info, summary, records), encoding="utf-8")
    return out


def rescore(run_dir: RunDir) -> dict[str, int]:
    """Re-grade every scored episode of a run with the current envs and graders.

    Each episode is replayed: its env is reset as it was (same seed, same item) and its actions
    are stepped again, so the rewards and success come from today's code. Records are
    rewritten in place, and the summary and reports remade. Returns counts: ``rescored``,
    ``changed`` (return or success differ), ``skipped`` (errors, which were never scored, and
    env errors, whose env raised on the reply).
    """
    run = run_dir.read_config()
    env_kwargs = dict(run.get("env_kwargs") or {})
    wrappers = str(run.get("wrappers") or "")
    records = run_dir.read_records()
    envs: dict[str, Any] = {}
    counts = {"rescored": 0, "changed": 0, "skipped": 0}
    try:
        for r in records:
            if r["status"] != "ok":
                counts["skipped"] += 1
                continue
            name = r["env"]
            if name not in envs:
                e = EvalEnv(r["env_id"], r.get("tool"), env_kwargs, wrappers)
                envs[name] = e.make(search_url=run.get("search_url"))
            env = envs[name]
            options = None if r.get("index") is None else {"index": int(r["index"])}
            env.reset(seed=r["seed"], options=options)
            total, success = 0.0, False
            for t in r["transitions"]:
                _, reward, terminated, truncated, info = env.step(t["action"])
                t["reward"] = float(reward)
                t["terminated"], t["truncated"] = bool(terminated), bool(truncated)
                total += float(reward)
                if terminated or truncated:
                    success = is_success(info, terminated, reward)
                    break
            counts["rescored"] += 1
            if abs(total - float(r["return"])) > 1e-9 or success != bool(r["success"]):
                counts["changed"] += 1
            r["return"], r["success"] = total, success
    finally:
        for env in envs.values():
            env.close()
    run_dir.rewrite(records)
    write_outputs(run_dir, run, status=str(run.get("status_at_end", "rescored")))
    return counts
