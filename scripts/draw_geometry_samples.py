"""Draw the diagrams of the shipped ``math:Geometry3K`` sample (run once; the PNGs are committed).

.venv/bin/python scripts/draw_geometry_samples.py
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

DATA = Path(__file__).resolve().parents[1] / "src" / "gemgym" / "envs" / "data"
OUT = DATA / "images" / "geometry"


def _save(fig: plt.Figure, name: str) -> str:
    fig.savefig(OUT / name, dpi=60)
    plt.close(fig)
    return f"images/geometry/{name}"


def _axes() -> tuple[plt.Figure, plt.Axes]:
    fig, ax = plt.subplots(figsize=(3, 3))
    ax.set_aspect("equal")
    ax.axis("off")
    return fig, ax


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    items = []
    fig, ax = _axes()  # right triangle 3-4-x
    ax.plot([0, 4, 0, 0], [0, 0, 3, 0], "k-")
    ax.text(2, -0.4, "4", ha="center")
    ax.text(-0.4, 1.5, "3", va="center")
    ax.text(2.2, 1.7, "x")
    items.append(
        {
            "question": "Find x, the hypotenuse of the right triangle in the figure.",
            "answer": "5",
            "images": [_save(fig, "right_triangle.png")],
        }
    )
    fig, ax = _axes()  # rectangle 6 by 2.5
    ax.plot([0, 6, 6, 0, 0], [0, 0, 2.5, 2.5, 0], "k-")
    ax.text(3, -0.5, "6", ha="center")
    ax.text(6.3, 1.25, "2.5", va="center")
    items.append(
        {
            "question": "Find the area of the rectangle in the figure.",
            "answer": "15",
            "images": [_save(fig, "rectangle.png")],
        }
    )
    fig, ax = _axes()  # triangle with angles 50 and 60
    ax.plot([0, 5, 2, 0], [0, 0, 3, 0], "k-")
    ax.text(0.5, 0.15, "50°")
    ax.text(4.0, 0.15, "60°")
    ax.text(1.9, 2.4, "x°")
    items.append(
        {
            "question": "Find x, the measure in degrees of the third angle of the triangle.",
            "answer": "70",
            "images": [_save(fig, "triangle_angles.png")],
        }
    )
    with open(DATA / "math" / "geometry3k.jsonl", "w") as f:
        for it in items:
            f.write(json.dumps(it) + "\n")


if __name__ == "__main__":
    main()
