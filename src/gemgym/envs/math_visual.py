r"""Math with diagrams: ``math:Geometry3K`` (single turn, text + images).

============  =================================================================================
ids           ``math:Geometry3K``
data          ``axon-rl/geometry3k`` on the Hugging Face Hub (columns ``problem``, ``answer``,
              ``images``); offline without a cache, the 3-item sample shipped in
              ``gemgym/envs/data/math/geometry3k.jsonl`` with its PNG diagrams (drawn by
              ``scripts/draw_geometry_samples.py``), with a warning. ``dataset=`` / ``columns=``
              as for every task env; an ``images`` value may be a file path (relative to the
              data file), PNG/JPEG bytes, a ``{"bytes": ..., "path": ...}`` dict or a PIL image
observation   :class:`~gemgym.core.MultimodalObservation`: the problem text and its images
              (GEM returned a ``{"problem", "images"}`` dict)
action, reward, info, expert: as the other math envs (:mod:`gemgym.envs.math`)
============  =================================================================================

Differences from upstream GEM: each ``reset()`` advances by one item (GEM's visual env skipped
every other item), and the observation is the typed multimodal observation.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gemgym.core import Image, MultimodalObservation
from gemgym.envs.dataset import DATA_DIR, DatasetEnv, DatasetSource, DatasetSpec, Item
from gemgym.envs.math import MathGradingMixin
from gemgym.errors import DatasetError
from gemgym.registry import register

__all__ = ["GEOMETRY3K", "MathVisualEnv"]

GEOMETRY3K = DatasetSpec(
    "Geometry3K",
    "axon-rl/geometry3k",
    sample="math/geometry3k.jsonl",
    columns={"question": "problem", "answer": "answer"},
)
"""The default dataset of ``math:Geometry3K``."""


def _mime(data: bytes) -> str:
    if data.startswith(b"\xff\xd8"):
        return "image/jpeg"
    if data.startswith(b"GIF8"):
        return "image/gif"
    return "image/png"


class MathVisualEnv(MathGradingMixin, DatasetEnv[MultimodalObservation]):
    """A math problem with diagrams per episode (see the module docstring).

    Args:
        dataset: where the problems come from (see :mod:`gemgym.envs.dataset`).
        columns: field -> column mapping for ``question``, ``answer`` and ``images``.
        split: the split to load.
        format_penalty: give −0.1 instead of 0 when the answer has no ``\\boxed{}``.
        timeout: seconds math-verify may spend on one gold answer.
    """

    required_fields = ("question", "answer", "images")

    def __init__(
        self,
        dataset: DatasetSource = None,
        columns: Mapping[str, str] | None = None,
        split: str | None = None,
        format_penalty: bool = False,
        timeout: float = 1.0,
    ) -> None:
        self.format_penalty = format_penalty
        self.timeout = float(timeout)
        self._init_dataset(dataset, columns=columns, split=split, spec=GEOMETRY3K)

    def _image(self, value: Any) -> Image:
        if isinstance(value, Image):
            return value
        if isinstance(value, bytes):
            return Image(value, _mime(value))
        if isinstance(value, Mapping):
            if value.get("bytes"):
                return self._image(bytes(value["bytes"]))
            return self._image(value.get("path") or "")
        if isinstance(value, str):
            path = Path(value)
            if not path.is_absolute():
                origin = self.source.origin
                base = DATA_DIR if origin.startswith("sample") else Path(origin).parent
                path = base / path if (base / path).exists() else path
            try:
                return Image.from_file(path)
            except OSError as e:
                raise DatasetError(f"cannot read image {value!r} of {origin}: {e}") from e
        if hasattr(value, "save"):  # a PIL image, as datasets decodes them
            buf = io.BytesIO()
            value.save(buf, format="PNG")
            return Image(buf.getvalue(), "image/png")
        raise DatasetError(f"unsupported image value of type {type(value).__name__}")

    def observe(self, item: Item) -> MultimodalObservation:
        images = item["images"]
        if not isinstance(images, list | tuple):
            images = [images]
        return MultimodalObservation(str(item["question"]), tuple(self._image(v) for v in images))


register(
    "math:Geometry3K",
    "gemgym.envs.math_visual:MathVisualEnv",
    description="Geometry3K: geometry problems with diagrams, boxed answer (axon-rl/geometry3k)",
    extra="math",
)
