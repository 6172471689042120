"""The run's outputs: the curve rows' fields, ``curves.csv`` and the plot of one or more runs."""

from __future__ import annotations

import csv
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gemgym.rl.trainer.config import TrainConfig

__all__ = ["CURVE_FIELDS", "curves_figure", "plot_curves", "write_config_toml", "write_curves"]

CURVE_FIELDS = (
    "update",
    "time_s",
    "episodes",
    "errors",
    "success",
    "mean_turns",
    "mean_return",
    "loss",
    "collect_s",
    "learn_s",
    "eval_success",
    "eval_mean_turns",
    "decision_entropy",
    "entropy_coef",
)


def write_curves(rows: Sequence[dict[str, Any]], out_dir: Path, label: str) -> None:
    """Write ``curves.csv`` (the :data:`CURVE_FIELDS` of ``rows``) and ``curves.png`` (per
    update, wall time on a second axis) in ``out_dir``; each file is written whole and then
    renamed into place, so a reader (or a killed run) never sees half of one."""
    path = out_dir / "curves.csv"
    partial = out_dir / "curves.csv.partial"
    with open(partial, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=CURVE_FIELDS, extrasaction="ignore")
        w.writeheader()
        for row in rows:
            w.writerow({k: row.get(k, "") for k in CURVE_FIELDS})
    os.replace(partial, path)
    plot_curves({label: path}, out_dir / "curves.png", x="update")


def plot_curves(
    runs: dict[str, Path | str], out_png: Path | str, *, x: str = "time_s", window: int = 10
) -> None:
    """Save :func:`curves_figure` of ``runs`` as a PNG at ``out_png`` (written whole, then
    renamed into place)."""
    import matplotlib.pyplot as plt

    fig = curves_figure(runs, x=x, window=window)
    partial = Path(str(out_png) + ".partial")
    fig.savefig(partial, dpi=100, format="png")
    plt.close(fig)
    os.replace(partial, out_png)


def curves_figure(runs: dict[str, Path | str], *, x: str = "time_s", window: int = 10) -> Any:
    """The figure of success rate and mean turns of one or more ``curves.csv`` files (moving
    average of ``window`` updates) against ``x``: ``"time_s"`` (shown in minutes) or
    ``"update"``. Per update, a single run also gets its wall time (minutes) on a second axis,
    at the top: a resumed run's curve stays in update order whatever time the stops took."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    plotted: list[tuple[np.ndarray, np.ndarray]] = []
    for label, path in runs.items():
        with open(path, encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        if not rows:
            continue
        xs = np.array([float(r[x]) for r in rows])
        if x == "time_s":
            xs = xs / 60.0
        minutes = np.array([float(r["time_s"] or "nan") / 60.0 for r in rows])
        for ax, key in zip(axes, ("success", "mean_turns"), strict=True):
            ys = np.array([float(r[key]) for r in rows])
            k = max(1, min(window, len(ys)))
            smooth = np.convolve(ys, np.ones(k) / k, mode="valid")
            ax.plot(xs[k - 1 :], smooth, label=label)
        plotted.append((xs, minutes))
    for ax, title in zip(axes, ("success rate (training batches)", "mean turns"), strict=True):
        ax.set_title(title)
        ax.set_xlabel("minutes" if x == "time_s" else x)
        ax.grid(alpha=0.3)
    if plotted:
        axes[0].legend(fontsize=8)
    if x == "update" and len(plotted) == 1:
        _wall_time_axis(axes, *plotted[0])
    fig.tight_layout()
    return fig


def _wall_time_axis(axes: Sequence[Any], updates: np.ndarray, minutes: np.ndarray) -> None:
    """A second x axis, at the top, with the wall minutes at which the updates ended."""
    ok = np.isfinite(minutes)
    if ok.sum() < 2 or np.any(np.diff(minutes[ok]) <= 0):  # the inverse needs them increasing
        return
    u, m = updates[ok], minutes[ok]

    def to_minutes(v: Any) -> Any:
        return np.interp(v, u, m)

    def to_updates(v: Any) -> Any:
        return np.interp(v, m, u)

    for ax in axes:
        top = ax.secondary_xaxis("top", functions=(to_minutes, to_updates))
        top.set_xlabel("wall minutes", fontsize=8)
        top.tick_params(labelsize=7)


def write_config_toml(config: TrainConfig, path: Path) -> None:
    """Write a run's settings, one TOML table per section, to ``path`` (``gemgym train
    --config PATH`` reads them back; written whole, then renamed into place)."""
    from gemgym.options import dumps_toml

    header = (
        "The settings of this gemgym train run (every one, defaults included).\n"
        f"Rerun or continue it with: gemgym train --config {path} [--resume]"
    )
    partial = path.with_name(path.name + ".partial")
    partial.write_text(dumps_toml(config.to_dict(), header=header), encoding="utf-8")
    partial.replace(path)
