"""The run's outputs: the curve rows' fields, ``curves.csv`` and the plot of one or more runs."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["CURVE_FIELDS", "plot_curves", "write_curves"]

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
    """Write ``curves.csv`` (the :data:`CURVE_FIELDS` of ``rows``) and ``curves.png`` in
    ``out_dir``."""
    path = out_dir / "curves.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=CURVE_FIELDS, extrasaction="ignore")
        w.writeheader()
        for row in rows:
            w.writerow({k: row.get(k, "") for k in CURVE_FIELDS})
    plot_curves({label: path}, out_dir / "curves.png")


def plot_curves(
    runs: dict[str, Path | str], out_png: Path | str, *, x: str = "time_s", window: int = 10
) -> None:
    """Plot success rate and mean turns of one or more ``curves.csv`` files (moving average)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    plotted = False
    for label, path in runs.items():
        with open(path, encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        if not rows:
            continue
        xs = np.array([float(r[x]) for r in rows])
        if x == "time_s":
            xs = xs / 60.0
        for ax, key in zip(axes, ("success", "mean_turns"), strict=True):
            ys = np.array([float(r[key]) for r in rows])
            k = max(1, min(window, len(ys)))
            smooth = np.convolve(ys, np.ones(k) / k, mode="valid")
            ax.plot(xs[k - 1 :], smooth, label=label)
            plotted = True
    for ax, title in zip(axes, ("success rate (training batches)", "mean turns"), strict=True):
        ax.set_title(title)
        ax.set_xlabel("minutes" if x == "time_s" else x)
        ax.grid(alpha=0.3)
    if plotted:
        axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out_png, dpi=100)
    plt.close(fig)
