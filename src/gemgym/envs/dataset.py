"""Dataset loading shared by every task env (math, QA, code, ...), and their base class.

A task env draws one *item* (a dict such as ``{"question": ..., "answer": ...}``) per episode.
Where the items come from is the env's ``dataset`` parameter, a :data:`DatasetSource`:

* ``None`` (the default of every registered id): the env's Hub dataset (its :class:`DatasetSpec`),
  from the local Hugging Face cache or downloaded. When it cannot be had (offline with no cache, or
  ``datasets`` not installed) the env falls back to the small real sample shipped inside gemgym and
  says so with a :class:`DatasetWarning`, so every id works offline for tests and demos. gemgym
  never probes the network itself: with ``HF_HUB_OFFLINE=1`` (or ``HF_DATASETS_OFFLINE=1``, or the
  Hugging Face libraries' own offline flags) only the cache is read, otherwise ``datasets`` is
  asked, and its error (no route to the Hub, say) is what the warning reports.
* ``"sample"``: the shipped sample, silently (no network, no ``datasets`` needed).
* a Hub id (``"axon-rl/GSM-8k"``): loaded with ``datasets.load_dataset`` (extra ``gemgym[datasets]``);
  failing that, a :class:`~gemgym.errors.DatasetError` names the dataset and how to give a local file.
* a local path: ``.jsonl``/``.json`` (read directly, no ``datasets`` needed), ``.parquet``,
  ``.arrow``, ``.csv`` or a directory written by ``Dataset.save_to_disk`` (through ``datasets``).
* an in-memory sequence of dicts (or a ``datasets.Dataset``).

``columns`` maps the env's field names to the source's column names, e.g.
``{"question": "problem", "answer": "solution"}``. Without it, common aliases are tried
(``problem``/``prompt``/``query`` for ``question``; ``solution``-free names such as ``gold``,
``target``, ``ground_truth``, ``final_answer`` for ``answer``).

Order: the items are visited in a permutation drawn from the env's seed; at the end of each pass
(epoch) the order is reshuffled with ``seed + epoch``. ``reset(seed=s)`` restarts that order at its
first item, so the same seed gives the same item in every process; ``reset()`` moves to the next
item; ``reset(options={"index": i})`` serves item ``i`` of the dataset (unshuffled numbering).

Single-turn task envs (:class:`DatasetEnv`) end on their first step with ``terminated=True,
truncated=False`` (GEM set both) and return :data:`TERMINAL_STATE` as the final observation, the
string upstream GEM used, kept so GEM code that compares against it still works.

Loaded datasets are cached per process (by source, split and columns): many envs over the same
dataset share one copy, and pickling an env that reads a file or Hub dataset sends only the source,
not the rows.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from gemgym.core import Env, non_text_info
from gemgym.errors import ConfigError, DatasetError, missing_dependency

__all__ = [
    "COLUMN_ALIASES",
    "DATA_DIR",
    "TERMINAL_STATE",
    "DatasetEnv",
    "DatasetSource",
    "DatasetSpec",
    "DatasetWarning",
    "Item",
    "ItemSource",
    "load_items",
]

TERMINAL_STATE = "<｜TERMINAL_STATE｜>"
"""Observation returned after a single-turn env's last step (upstream GEM's sentinel string)."""

DATA_DIR = Path(__file__).with_name("data")
"""The folder of the samples shipped with gemgym (see its README.md for sources and licences)."""

Item = dict[str, Any]
"""One dataset row, with the env's field names (``question``, ``answer``, ...)."""

DatasetSource = str | os.PathLike[str] | Sequence[Mapping[str, Any]] | None
"""What a task env's ``dataset`` parameter accepts (see the module docstring)."""

COLUMN_ALIASES: Mapping[str, tuple[str, ...]] = {
    "question": ("question", "problem", "prompt", "query", "input"),
    "answer": ("answer", "answers", "gold", "target", "ground_truth", "final_answer", "label"),
}
"""Column names tried, in order, for a field that ``columns`` does not map."""

ObsT = TypeVar("ObsT")


class DatasetWarning(UserWarning):
    """A task env fell back to its shipped sample because its full dataset was unavailable."""


@dataclass(frozen=True)
class DatasetSpec:
    """Where a task env's items come from by default.

    Attributes:
        name: a short human name (``"GSM8K"``), used in messages.
        hub_id: the Hugging Face Hub dataset (``"axon-rl/GSM-8k"``), or ``None`` for envs that
            only have local data.
        split: the split to load.
        subset: the Hub dataset's configuration name, if any.
        sample: the shipped sample, a path relative to :data:`DATA_DIR` (``"math/gsm8k.jsonl"``).
        columns: the Hub data's column names for the env's fields, e.g. ``{"question": "problem"}``.
    """

    name: str
    hub_id: str | None = None
    split: str = "train"
    subset: str | None = None
    sample: str | None = None
    columns: Mapping[str, str] = field(default_factory=dict)


class ItemSource:
    """An immutable list of items with the seeded, epoch-reshuffled visiting order.

    Copies (``copy.deepcopy``, :meth:`Env.spawn`) share the same object; pickling sends only the
    source when the items came from a file, the Hub or the shipped sample.
    """

    def __init__(self, items: Sequence[Item], *, origin: str, key: tuple[Any, ...] | None = None):
        if not items:
            raise DatasetError(f"dataset {origin} has no items")
        self.items: Sequence[Item] = items
        self.origin = origin
        self._key = key
        self._perm_cache: tuple[int, list[int]] | None = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> Item:
        return self.items[index]

    def permutation(self, seed: int) -> list[int]:
        """The visiting order for one epoch, drawn from ``seed`` (the last one is cached)."""
        import random

        cached = self._perm_cache
        if cached is not None and cached[0] == seed:
            return cached[1]
        order = list(range(len(self.items)))
        random.Random(seed).shuffle(order)
        with self._lock:
            self._perm_cache = (seed, order)
        return order

    def index_at(self, seed: int, position: int) -> int:
        """The dataset index visited at ``position`` of the order seeded by ``seed``."""
        n = len(self.items)
        epoch, offset = divmod(position, n)
        return self.permutation(seed + epoch)[offset]

    def __deepcopy__(self, memo: dict[int, Any]) -> ItemSource:
        return self

    def __copy__(self) -> ItemSource:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        if self._key is not None:
            return (_cached_source, self._key)
        return (_memory_source, (list(self.items), self.origin))


def _memory_source(items: list[Item], origin: str) -> ItemSource:
    return ItemSource(items, origin=origin)


# -- loading -------------------------------------------------------------------------------------

_CACHE: dict[tuple[Any, ...], ItemSource] = {}
_CACHE_LOCK = threading.Lock()
_WARNED: set[str] = set()

_FILE_FORMATS = {".parquet": "parquet", ".arrow": "arrow", ".csv": "csv", ".tsv": "csv"}


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def _hub_offline() -> bool:
    """Whether the Hugging Face libraries are told to stay offline.

    Any of ``HF_HUB_OFFLINE``, ``HF_DATASETS_OFFLINE`` or ``TRANSFORMERS_OFFLINE`` set to a true
    value, or the libraries' own flags (read from those variables when they were imported, or set
    by a program): ``huggingface_hub.constants.HF_HUB_OFFLINE``, ``datasets.config.HF_HUB_OFFLINE``.
    The flags are read only from modules already imported (nothing heavy is imported to ask), and
    the network is never probed: when not offline, ``datasets`` is asked and handles failures.
    """
    if any(_truthy(v) for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")):
        return True
    for module, flags in (
        ("huggingface_hub.constants", ("HF_HUB_OFFLINE",)),
        ("datasets.config", ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")),
    ):
        loaded = sys.modules.get(module)
        if loaded is not None and any(getattr(loaded, f, False) is True for f in flags):
            return True
    return False


def _hub_cached(hub_id: str) -> bool:
    """Whether some copy of ``hub_id`` may be in the local Hugging Face caches."""
    home = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface"))
    hub = Path(os.environ.get("HF_HUB_CACHE", home / "hub"))
    ds = Path(os.environ.get("HF_DATASETS_CACHE", home / "datasets"))
    return (hub / f"datasets--{hub_id.replace('/', '--')}").exists() or (
        ds / hub_id.replace("/", "___")
    ).exists()


def _read_json_rows(path: Path) -> list[Item]:
    text = path.read_text(encoding="utf-8")
    stripped = text.lstrip()
    try:
        if stripped.startswith("["):
            rows = json.loads(stripped)
        else:
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError as e:
        raise DatasetError(f"{path} is not valid JSON Lines (or a JSON list): {e}") from e
    if not all(isinstance(r, dict) for r in rows):
        raise DatasetError(f"{path}: every row must be a JSON object")
    return [dict(r) for r in rows]


def _import_datasets() -> Any:
    try:
        import datasets
    except ImportError as e:
        raise missing_dependency("datasets", "datasets") from e
    datasets.utils.logging.disable_progress_bar()
    return datasets


def _read_file(path: Path, split: str) -> list[Item]:
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json"):
        return _read_json_rows(path)
    datasets = _import_datasets()
    try:
        if path.is_dir():
            loaded = datasets.load_from_disk(str(path))
            if isinstance(loaded, datasets.DatasetDict):
                if split not in loaded:
                    raise DatasetError(f"{path} has splits {list(loaded)}, not {split!r}")
                loaded = loaded[split]
        elif suffix in _FILE_FORMATS:
            kw = {"delimiter": "\t"} if suffix == ".tsv" else {}
            loaded = datasets.load_dataset(
                _FILE_FORMATS[suffix], data_files=str(path), split="train", **kw
            )
        else:
            raise DatasetError(
                f"cannot read {path}: use .jsonl, .json, .parquet, .arrow, .csv or a directory "
                "written by datasets.Dataset.save_to_disk"
            )
    except DatasetError:
        raise
    except Exception as e:
        raise DatasetError(f"could not read {path}: {type(e).__name__}: {e}") from e
    return [dict(r) for r in loaded]


def _fallback_message(spec: DatasetSpec, error: BaseException) -> str:
    """The one-line warning of an env that uses its shipped sample instead of its Hub dataset:
    why (briefly), and how to get the full data."""
    cause = error.__cause__
    if isinstance(error, ImportError):
        why = "no datasets library"
    elif cause is None:  # offline, not cached
        why = "offline, not cached"
    else:
        from gemgym.core import excerpt

        why = excerpt(f"{type(cause).__name__}: {cause}".splitlines()[0], 120)
    return (
        f"{spec.name}: using gemgym's small sample, not {spec.hub_id} ({why}). Full data: load "
        "it once online (then cached) or pass dataset='file.jsonl'; dataset='sample' silences this."
    )


def _how_to_provide(spec: DatasetSpec, env_id: str | None = None) -> str:
    fields_ = ", ".join(spec.columns) or "question, answer"
    where = f"gemgym.make({env_id!r}, dataset=...)" if env_id else "the env's dataset= parameter"
    sample = (
        f", or dataset='sample' for the small sample shipped with gemgym ({spec.sample})"
        if spec.sample
        else ""
    )
    return (
        f"Download it once where the Hub is reachable (it is then cached; HF_HUB_OFFLINE=1 "
        f"reads the cache), or save it as a local file and pass dataset='path/to/file.jsonl' "
        f"(or .parquet/.arrow) to {where}, mapping its columns with columns={{...}} "
        f"(fields: {fields_}){sample}."
    )


def _read_hub(hub_id: str, spec: DatasetSpec, split: str, env_id: str | None) -> list[Item]:
    what = f"dataset {hub_id!r} ({spec.name}, split {split!r})"
    if _hub_offline() and not _hub_cached(hub_id):
        raise DatasetError(
            f"{what} is not in the local Hugging Face cache and the Hugging Face libraries are "
            f"set offline (HF_HUB_OFFLINE/HF_DATASETS_OFFLINE). {_how_to_provide(spec, env_id)}"
        )
    try:
        datasets = _import_datasets()
    except ImportError as e:
        raise DatasetError(f"{what} needs the datasets library: {e}") from e
    try:
        subset = spec.subset if hub_id == spec.hub_id else None
        loaded = datasets.load_dataset(hub_id, subset, split=split)
    except Exception as e:
        raise DatasetError(
            f"could not load {what} from the Hugging Face Hub ({type(e).__name__}: {e}). "
            f"{_how_to_provide(spec, env_id)}"
        ) from e
    return [dict(r) for r in loaded]


def _resolve_columns(
    rows: Sequence[Item], required: Iterable[str], columns: Mapping[str, str], origin: str
) -> dict[str, str]:
    """Map each required field to a column present in the rows (explicit mapping first)."""
    first = rows[0]
    mapping: dict[str, str] = {}
    for fld in required:
        if fld in columns:
            col = columns[fld]
            if col not in first:
                raise DatasetError(
                    f"dataset {origin}: columns maps {fld!r} to {col!r}, which is not a column; "
                    f"its columns are {sorted(first)}"
                )
            mapping[fld] = col
            continue
        found = next((c for c in (fld, *COLUMN_ALIASES.get(fld, ())) if c in first), None)
        if found is None:
            raise DatasetError(
                f"dataset {origin} has no column for {fld!r} (its columns are {sorted(first)}); "
                f"pass columns={{{fld!r}: '<column name>'}}"
            )
        mapping[fld] = found
    return mapping


def _normalise(rows: Sequence[Item], mapping: Mapping[str, str]) -> list[Item]:
    if all(f == c for f, c in mapping.items()):
        return [dict(r) for r in rows]
    return [{**r, **{f: r[c] for f, c in mapping.items()}} for r in rows]


def _cached_source(
    kind: str,
    ref: str,
    split: str,
    columns: tuple[tuple[str, str], ...],
    required: tuple[str, ...],
    spec: DatasetSpec,
) -> ItemSource:
    """Load (once per process) the items of a file, Hub or sample source."""
    key = (kind, ref, split, columns, required, spec.subset)
    found = _CACHE.get(key)
    if found is not None:
        return found
    with _CACHE_LOCK:
        found = _CACHE.get(key)
        if found is not None:
            return found
        if kind == "file":
            rows, origin = _read_file(Path(ref), split), ref
        elif kind == "sample":
            rows, origin = _read_json_rows(DATA_DIR / ref), f"sample {ref}"
        else:
            rows, origin = _read_hub(ref, spec, split, None), f"{ref!r} (split {split!r})"
        if not rows:
            raise DatasetError(f"dataset {origin} is empty")
        mapping = _resolve_columns(rows, required, dict(columns), origin)
        src = ItemSource(
            _normalise(rows, mapping),
            origin=origin,
            key=(kind, ref, split, columns, required, spec),
        )
        _CACHE[key] = src
        return src


def load_items(
    source: DatasetSource | Any,
    *,
    spec: DatasetSpec,
    required: Sequence[str] = ("question", "answer"),
    columns: Mapping[str, str] | None = None,
    split: str | None = None,
    env_id: str | None = None,
) -> ItemSource:
    """Load a task env's items from ``source`` (see the module docstring for what it accepts).

    Args:
        source: ``None`` (the spec's Hub dataset, else its sample with a :class:`DatasetWarning`),
            ``"sample"``, a Hub id, a local path, or a sequence of dicts.
        spec: the env's default dataset.
        required: the fields every item must have after column mapping.
        columns: field name -> column name; for ``None`` and Hub sources the spec's own
            mapping applies under it.
        split: the split to load (default: the spec's).
        env_id: the env id, for error messages.

    Raises:
        DatasetError: the source cannot be read, is empty, or lacks a required column (the message
            says how to provide the data).
        DependencyNotInstalled: a source that needs ``datasets`` when it is missing.
    """
    split = split or spec.split
    req = tuple(required)
    user_cols = dict(columns or {})
    if isinstance(source, os.PathLike):
        source = os.fspath(source)
    if source is None or source == spec.hub_id:
        if spec.hub_id is None:
            source = "sample"
        else:
            cols = tuple(sorted({**spec.columns, **user_cols}.items()))
            try:
                return _cached_source("hub", spec.hub_id, split, cols, req, spec)
            except (DatasetError, ImportError) as e:
                if source is not None or spec.sample is None:
                    raise DatasetError(str(e)) from e
                if spec.name not in _WARNED:  # once per process and dataset, one short line
                    _WARNED.add(spec.name)
                    warnings.warn(_fallback_message(spec, e), DatasetWarning, stacklevel=3)
                source = "sample"
    if isinstance(source, str):
        if source == "sample":
            if spec.sample is None:
                raise ConfigError(f"{spec.name} has no shipped sample; pass dataset=<path or id>")
            return _cached_source("sample", spec.sample, split, tuple(user_cols.items()), req, spec)
        path = Path(source).expanduser()
        if path.exists():
            resolved = str(path.resolve())
            return _cached_source("file", resolved, split, tuple(user_cols.items()), req, spec)
        if source.endswith((".jsonl", ".json", ".parquet", ".arrow", ".csv", ".tsv")):
            raise DatasetError(f"dataset file {source!r} does not exist")
        cols = tuple(sorted(user_cols.items()))
        return _cached_source("hub", source, split, cols, req, spec)
    return _from_memory(source, req, user_cols)


def _from_memory(source: Any, required: tuple[str, ...], columns: Mapping[str, str]) -> ItemSource:
    if isinstance(source, Mapping) or not isinstance(source, Iterable):
        raise ConfigError(
            "dataset must be None, 'sample', a Hub id, a local path or a sequence of dicts, "
            f"got {type(source).__name__}"
        )
    rows = [dict(r) if isinstance(r, Mapping) else r for r in source]
    if not rows:
        raise DatasetError("the in-memory dataset is empty")
    if not all(isinstance(r, dict) for r in rows):
        raise ConfigError("an in-memory dataset must be a sequence of dicts (one per item)")
    mapping = _resolve_columns(rows, required, columns, "(in memory)")
    return ItemSource(_normalise(rows, mapping), origin="(in memory)")


# -- the base class of single-turn task envs -------------------------------------------------------


class DatasetEnv(Env[ObsT | str, str], Generic[ObsT]):
    """Base class of single-turn envs over a dataset: ``reset`` draws an item, ``step`` grades.

    Subclasses set :attr:`dataset_spec` (or pass ``spec=`` to :meth:`_init_dataset`), call
    :meth:`_init_dataset` from their constructor, and implement :meth:`observe` (the prompt for an
    item) and :meth:`grade` (reward and info for an answer). ``step`` ends the episode with
    ``terminated=True``; the observation is :data:`TERMINAL_STATE`.

    ``reset`` options: ``{"index": i}`` serves item ``i`` (dataset numbering, ``0 <= i < len``).
    ``info`` of ``reset`` holds ``"index"``, the served item's dataset index, and the item's
    ``"difficulty"`` and ``"level"`` when it has them (``gemgym eval`` reports per difficulty).
    """

    metadata: ClassVar[Mapping[str, Any]] = {"multi_turn": False, "category": "task"}
    dataset_spec: ClassVar[DatasetSpec]
    required_fields: ClassVar[tuple[str, ...]] = ("question", "answer")

    source: ItemSource
    item: Item | None = None
    item_index: int = -1
    shuffle: bool = True
    _order_seed: int | None = None
    _position: int = -1

    def _init_dataset(
        self,
        dataset: DatasetSource | Any,
        *,
        columns: Mapping[str, str] | None = None,
        split: str | None = None,
        spec: DatasetSpec | None = None,
        shuffle: bool = True,
    ) -> None:
        """Load the items (shared with other envs over the same source).

        ``shuffle=False`` visits the items in dataset order (evaluation sets); the seed is then
        irrelevant to the order.
        """
        self.shuffle = shuffle
        if spec is not None:
            self.dataset_spec = spec  # type: ignore[misc]
        self.source = load_items(
            dataset,
            spec=self.dataset_spec,
            required=self.required_fields,
            columns=columns,
            split=split,
        )

    def __len__(self) -> int:
        return len(self.source)

    def _next_index(self, seed: int | None, options: Mapping[str, Any] | None) -> int:
        if options and "index" in options:
            index = options["index"]
            n = len(self.source)
            if isinstance(index, bool) or not isinstance(index, int) or not -n <= index < n:
                raise ConfigError(f"options['index'] must be an int in [0, {n}), got {index!r}")
            return index % n
        if seed is not None or self._order_seed is None:
            self._order_seed = seed if seed is not None else self.rng.getrandbits(32)
            self._position = -1
        self._position += 1
        if not self.shuffle:
            return self._position % len(self.source)
        return self.source.index_at(self._order_seed, self._position)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[ObsT | str, dict[str, Any]]:
        super().reset(seed=seed)
        self.item_index = self._next_index(seed, options)
        self.item = self.source[self.item_index]
        info: dict[str, Any] = {"index": self.item_index}
        for key in ("difficulty", "level"):
            if self.item.get(key) is not None:
                info[key] = self.item[key]
        return self.observe(self.item), info

    def step(self, action: str) -> tuple[ObsT | str, float, bool, bool, dict[str, Any]]:
        if self.item is None:
            from gemgym.errors import ResetNeeded

            raise ResetNeeded("call reset() before step()")
        if isinstance(action, str):
            reward, info = self.grade(action, self.item)
        else:  # gemgym's one rule: a non-str action is the empty reply (a format error)
            reward, info = self.grade("", self.item)
            info.update(non_text_info(action))
        info.setdefault("index", self.item_index)
        return TERMINAL_STATE, reward, True, False, info

    def observe(self, item: Item) -> ObsT:
        """The prompt shown for ``item``."""
        raise NotImplementedError

    def grade(self, action: str, item: Item) -> tuple[float, dict[str, Any]]:
        """The reward and info for the answer ``action`` to ``item``; never raises on bad text."""
        raise NotImplementedError
