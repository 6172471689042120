"""Reports of a run: Markdown and a self-contained HTML page (tables and PNG charts inline).

The HTML page needs no network and no other file: the charts (matplotlib, ``pip install
"gemgym[eval]"``) are PNGs embedded as ``data:`` URLs. Without matplotlib the page has the
tables and says how to get the charts.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["chart_pngs", "render_html", "render_markdown"]


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.1%}"


def _num(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


REFUSED = "refused"
"""What a score cell shows when the error rate exceeds the run's ``max_error_rate``."""


def _columns(ks: Sequence[int], n: int) -> list[str]:
    cols = ["env", "tasks", "episodes", "errors", "error rate", "env errors", "success"]
    cols += [f"mean@{n}"]
    cols += [f"pass@{k}" for k in ks]
    cols += ["mean return", "mean turns", "tokens in/out", "latency s"]
    return cols


def _row(name: str, b: Mapping[str, Any], ks: Sequence[int]) -> list[str]:
    refused = bool(b.get("refused"))

    def score(x: float | None) -> str:
        return REFUSED if refused else _pct(x)

    row = [
        name,
        str(b["tasks"]),
        str(b["episodes"]),
        str(b["errors"]),
        _pct(b.get("error_rate", 0.0)),
        str(b.get("env_errors", 0)),
        score(b["success_rate"]),
        score(b["mean_at_k"]),
    ]
    row += [score(b["pass_at_k"].get(str(k))) for k in ks]
    row += [
        _num(b["mean_return"]),
        _num(b["mean_turns"], 2),
        f"{b['prompt_tokens']}/{b['completion_tokens']}",
        _num(b["mean_latency_s"], 2),
    ]
    return row


def _tables(summary: Mapping[str, Any], ks: Sequence[int], n: int) -> dict[str, Any]:
    cols = _columns(ks, n)
    envs = summary["envs"]
    main = [_row(name, b, ks) for name, b in envs.items()]
    per_diff = {
        fam: [_row(d, db, ks) for d, db in diffs.items()]
        for fam, diffs in summary.get("families", {}).items()
    }
    return {"cols": cols, "main": main, "per_difficulty": per_diff}


def _md_table(cols: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    out = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
    return "\n".join(out)


def _header(run: Mapping[str, Any], summary: Mapping[str, Any]) -> list[tuple[str, str]]:
    o = summary["overall"]
    refused = bool(o.get("refused"))
    rate = o.get("error_rate", 0.0)
    limit = o.get("max_error_rate", 0.05)
    items = [
        ("agent", str(run.get("agent", "?")) + (f" ({run['model']})" if run.get("model") else "")),
        ("envs", str(o["envs"])),
        ("episodes", f"{o['episodes']} ({o['scored']} scored, {o['errors']} errors)"),
        ("error rate", f"{_pct(rate)} (scores are refused above {_pct(limit)})"),
        (
            "success (mean over envs)",
            f"{REFUSED}: too many errors" if refused else _pct(o["success_rate"]),
        ),
        ("samples per task", str(run.get("n", 1))),
        ("seed", str(run.get("seed", 0))),
    ]
    for k, v in o["pass_at_k"].items():
        items.append((f"pass@{k} (mean over envs)", REFUSED if refused else _pct(v)))
    if o.get("env_errors"):
        items.append(("env errors (scored as failures; bugs of the env)", str(o["env_errors"])))
    if o.get("context_truncations"):
        items.append(("context overflows (scored as failures)", str(o["context_truncations"])))
    if o.get("warnings"):
        items.append(("replies with no text (see warnings)", str(o["warnings"])))
    if run.get("status"):
        items.append(("status", str(run["status"])))
    return items


def render_markdown(run: Mapping[str, Any], summary: Mapping[str, Any]) -> str:
    """The report as Markdown."""
    ks = [int(k) for k in summary["overall"]["pass_at_k"]]
    t = _tables(summary, ks, int(run.get("n", 1)))
    lines = ["# gemgym eval report", ""]
    lines += [f"- **{k}**: {v}" for k, v in _header(run, summary)]
    lines += ["", "## Per env", "", _md_table(t["cols"], t["main"]), ""]
    if t["per_difficulty"]:
        lines += ["## Per difficulty", ""]
        for name, rows in t["per_difficulty"].items():
            dcols = ["difficulty", *t["cols"][1:]]
            lines += [f"### {name}", "", _md_table(dcols, rows), ""]
    for title, key, field in _EXAMPLES:
        examples = run.get(key) or []
        if examples:
            lines += [f"## {title}", ""]
            lines += [
                f"- `{e['env']}` task {e['task']} sample {e['sample']}: {e[field]}"
                for e in examples
            ]
            lines.append("")
    lines += [_NOTE, ""]
    return "\n".join(lines)


_EXAMPLES = (
    ("Errors (examples)", "error_examples", "error"),
    ("Env errors: the env raised on the model's reply (examples)", "env_error_examples", "error"),
    ("Warnings (examples)", "warning_examples", "warning"),
)

_NOTE = (
    "Errors are episodes whose infrastructure failed (the server did not answer after its "
    "retries, a sandbox could not run): they are counted apart, not scored, and their share is "
    "the error rate beside every score; a score is refused when it exceeds the run's "
    "--max-error-rate. `gemgym eval --resume` plays them again. Env errors (the env raised on "
    "the model's reply) and context overflows are scored as failures."
)


def chart_pngs(
    summary: Mapping[str, Any], records: Sequence[Mapping[str, Any]]
) -> list[tuple[str, bytes]]:
    """PNG charts ``(title, png bytes)``; empty without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    out: list[tuple[str, bytes]] = []
    envs = summary["envs"]
    names = list(envs)

    def png(fig: Any) -> bytes:
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
        plt.close(fig)
        return buf.getvalue()

    height = max(2.0, 0.35 * len(names) + 1)
    fig, ax = plt.subplots(figsize=(8, height))
    vals = [envs[n]["success_rate"] or 0.0 for n in names]
    ax.barh(names, vals, color="#4c72b0")
    for i, n in enumerate(names):
        err = envs[n]["errors"]
        label = f"{vals[i]:.0%}" + (f"  ({err} errors)" if err else "")
        ax.text(min(vals[i], 1.0) + 0.01, i, label, va="center", fontsize=8)
    ax.set_xlim(0, 1.25)
    ax.invert_yaxis()
    ax.set_xlabel("success rate (scored episodes)")
    out.append(("Success per env", png(fig)))

    families = summary.get("families", {})
    if families:
        fams = list(families)
        diffs = list(dict.fromkeys(d for f in fams for d in families[f]))
        fig, ax = plt.subplots(figsize=(8, max(2.0, 0.35 * len(fams) * len(diffs) / 2 + 1)))
        width = 0.8 / len(diffs)
        for j, d in enumerate(diffs):
            ys = [i + j * width for i in range(len(fams))]
            xs = [(families[f].get(d, {}).get("success_rate") or 0.0) for f in fams]
            ax.barh(ys, xs, height=width, label=d)
        ax.set_yticks([i + 0.4 - width / 2 for i in range(len(fams))], fams)
        ax.invert_yaxis()
        ax.set_xlim(0, 1)
        ax.set_xlabel("success rate")
        ax.legend(fontsize=8)
        out.append(("Success per difficulty", png(fig)))

    lat = [float(r.get("latency_s", 0.0)) for r in records if r.get("status") != "error"]
    if lat and max(lat) > 0:
        fig, ax = plt.subplots(figsize=(8, 3))
        ax.hist(lat, bins=30, color="#55a868")
        ax.set_xlabel("seconds waiting for the model per episode")
        ax.set_ylabel("episodes")
        out.append(("Latency", png(fig)))
    return out


_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:14px}
th,td{border:1px solid #ccc;padding:4px 8px;text-align:right}
th:first-child,td:first-child{text-align:left}
th{background:#f3f3f3} img{max-width:100%;display:block;margin:1em 0}
.err{color:#b00}
"""


def _html_table(cols: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_html(
    run: Mapping[str, Any],
    summary: Mapping[str, Any],
    records: Sequence[Mapping[str, Any]],
) -> str:
    """The report as one self-contained HTML page."""
    ks = [int(k) for k in summary["overall"]["pass_at_k"]]
    t = _tables(summary, ks, int(run.get("n", 1)))
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<title>gemgym eval report</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>gemgym eval report</h1><ul>",
    ]
    parts += [
        f"<li><b>{html.escape(k)}</b>: {html.escape(v)}</li>" for k, v in _header(run, summary)
    ]
    parts += ["</ul><h2>Per env</h2>", _html_table(t["cols"], t["main"])]
    charts = chart_pngs(summary, records)
    if charts:
        parts.append("<h2>Charts</h2>")
        for title, data in charts:
            url = "data:image/png;base64," + base64.b64encode(data).decode()
            parts.append(
                f"<h3>{html.escape(title)}</h3><img alt='{html.escape(title)}' src='{url}'>"
            )
    else:
        parts.append('<p>Charts need matplotlib: <code>pip install "gemgym[eval]"</code>.</p>')
    if t["per_difficulty"]:
        parts.append("<h2>Per difficulty</h2>")
        for name, rows in t["per_difficulty"].items():
            parts.append(f"<h3>{html.escape(name)}</h3>")
            parts.append(_html_table(["difficulty", *t["cols"][1:]], rows))
    for title, key, field in _EXAMPLES:
        examples = run.get(key) or []
        if examples:
            parts.append(f"<h2>{html.escape(title)}</h2><ul>")
            parts += [
                f"<li class='err'>{html.escape(e['env'])} task {e['task']} sample "
                f"{e['sample']}: {html.escape(str(e[field]))}</li>"
                for e in examples
            ]
            parts.append("</ul>")
    parts.append(f"<p>{html.escape(_NOTE)}</p>")
    parts.append("</body></html>")
    return "\n".join(parts)
