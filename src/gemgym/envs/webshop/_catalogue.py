"""WebShop's products, goals and product search, read from WebShop's own files.

WebShop (princeton-nlp/WebShop) ships its shop as three JSON files, which this module reads as
WebShop's ``load_products`` and ``get_human_goals``/``get_synthetic_goals`` do:

* ``items_shuffle.json`` (or ``items_shuffle_1000.json``): a JSON array of scraped products,
  each with ``asin``, ``name``, ``full_description``, ``small_description``, ``pricing``
  (``"$12.99"`` or ``"$12.99 - $15.99"``), ``images``, ``customization_options`` (``{"Color":
  [{"value": "Black", "image": url}, ...], ...}``), ``category``, ``query`` and
  ``product_category`` (``"Beauty & Personal Care › Hair Care › Shampoos"``);
* ``items_ins_v2.json`` (or ``items_ins_v2_1000.json``): ``{asin: {"attributes": [...],
  "instruction": str, "instruction_attributes": [...]}}`` (the attributes of each product, and
  the synthetic instruction);
* ``items_human_ins.json``: ``{asin: [{"instruction": str, "instruction_attributes": [...],
  "instruction_options": [...]}, ...]}`` (the 12,087 crowd-written instructions).

Files are streamed (a JSON array or object is decoded one element at a time, ``.gz`` files are
read through gzip, ``.jsonl`` holds one product a line), so the 1.18M-product file is never held
as text; ``num_products`` keeps the first N products, as WebShop's ``num_products`` does.

Goals are built as WebShop builds them (a price ceiling drawn above the product's price and
appended to the instruction, ``", and price lower than 40.00 dollars"``), shuffled with WebShop's
seed (233) and split as WebShop's baseline splits them: test = the first 500 goals, eval = the
next 1,000, train = the rest. A catalogue with at most 1,500 goals (the shipped one) is split
test = the first fifth, train = the rest. The random draws (prices of products sold at a price
range, price ceilings) use a seeded generator, so a catalogue loads the same every time.

Search is BM25 (``bm25s``, English stop words removed) over the lower-cased title, description,
first feature and option values of each product, as GEM's Lucene index; it returns the best 50.
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import itertools
import json
import random
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from gemgym.errors import ConfigError, DatasetError, missing_dependency

__all__ = [
    "SEARCH_RETURN_N",
    "SHIPPED_DIR",
    "Catalogue",
    "CatalogueSource",
    "Goal",
    "Product",
    "iter_json_items",
    "iter_json_records",
    "load_catalogue",
]

SHIPPED_DIR = Path(__file__).resolve().parent.parent / "data" / "webshop"
"""The catalogue shipped with gemgym (written by ``scripts/make_webshop_catalogue.py``)."""

SEARCH_RETURN_N = 50
"""Products a search returns (WebShop's ``SEARCH_RETURN_N``)."""

PRICE_RANGE = tuple(10.0 * i for i in range(1, 100))
"""Candidate price ceilings of goals (WebShop's ``PRICE_RANGE``)."""

NO_PRICE_LIMIT = 1_000_000.0
"""The price ceiling of a goal whose product costs too much for :data:`PRICE_RANGE`."""

GOAL_SHUFFLE_SEED = 233
"""WebShop shuffles its goals with ``random.seed(233)``."""

_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class Review:
    """A product review (WebShop's review page: title, score out of 5, text)."""

    title: str
    score: int
    body: str


@dataclass(frozen=True, slots=True)
class Product:
    """A product as WebShop's ``load_products`` prepares it.

    ``options`` maps an option name (``"color"``, lower case) to its values (lower case, ``/``
    written `` | ``); ``price`` is what buying costs (the product's price, or a seeded draw
    within its price range).
    """

    asin: str
    name: str
    description: str
    bullet_points: tuple[str, ...]
    pricing: tuple[float, ...]
    price_tag: str
    price: float
    options: Mapping[str, tuple[str, ...]]
    attributes: tuple[str, ...]
    category: str
    query: str
    product_category: str
    main_image: str = ""
    option_to_image: Mapping[str, str] = field(default_factory=dict)
    rating: str = "N.A."
    reviews: tuple[Review, ...] = ()

    def search_text(self) -> str:
        """What the search engine indexes (GEM's ``contents``)."""
        option_text = ", and ".join(
            f"{name}: {', '.join(values)}" for name, values in self.options.items()
        )
        first = self.bullet_points[0] if self.bullet_points else ""
        return " ".join([self.name, self.description, first, option_text]).lower()


@dataclass(frozen=True, slots=True)
class Goal:
    """An instruction and what buying its product right means (WebShop's goal dict)."""

    asin: str
    category: str
    query: str
    name: str
    product_category: str
    instruction_text: str
    attributes: tuple[str, ...]
    price_upper: float
    goal_options: tuple[str, ...]
    weight: float = 1.0


@dataclass(frozen=True)
class CatalogueSource:
    """Where a catalogue comes from (hashable: catalogues are cached per source).

    Attributes:
        products: ``items_shuffle*.json`` (a JSON array, ``.jsonl`` or either gzipped).
        attributes: ``items_ins_v2*.json`` (product attributes, synthetic instructions), or
            ``None`` (every product gets WebShop's ``DUMMY_ATTR``).
        human_instructions: ``items_human_ins.json``, or ``None``.
        num_products: keep the first N products (``None``: all).
        human_goals: goals from the human instructions (WebShop's default) or synthetic goals
            (the ``items_ins_v2`` instruction with each combination of options).
        seed: seed of the price draws.
    """

    products: str
    attributes: str | None = None
    human_instructions: str | None = None
    num_products: int | None = None
    human_goals: bool = True
    seed: int = 0

    @classmethod
    def from_dir(
        cls,
        data_dir: str | Path,
        *,
        num_products: int | None = None,
        human_goals: bool = True,
    ) -> CatalogueSource:
        """The WebShop files in ``data_dir`` (full-size names first, then the ``_1000`` ones)."""
        root = Path(data_dir).expanduser()
        if not root.is_dir():
            raise ConfigError(f"WebShop data_dir {str(root)!r} is not a directory")
        products = _find(root, "items_shuffle")
        if products is None:
            raise ConfigError(
                f"no items_shuffle.json (or items_shuffle_1000.json, .jsonl, .gz) in {str(root)!r}"
            )
        attributes = _find(root, "items_ins_v2")
        human = _find(root, "items_human_ins")
        if human_goals and human is None:
            raise ConfigError(
                f"human_goals=True needs items_human_ins.json in {str(root)!r} "
                "(or pass human_goals=False for the synthetic goals of items_ins_v2.json)"
            )
        if not human_goals and attributes is None:
            raise ConfigError(f"human_goals=False needs items_ins_v2.json in {str(root)!r}")
        return cls(
            str(products),
            str(attributes) if attributes else None,
            str(human) if human else None,
            num_products,
            human_goals,
        )


def _find(root: Path, stem: str) -> Path | None:
    for size in ("", "_1000"):
        for ext in (".json", ".json.gz", ".jsonl", ".jsonl.gz"):
            path = root / f"{stem}{size}{ext}"
            if path.is_file():
                return path
    return None


# -- streaming JSON ---------------------------------------------------------------------------
def _open_text(path: str | Path) -> io.TextIOBase:
    p = Path(path)
    if not p.is_file():
        raise DatasetError(f"WebShop file {str(p)!r} does not exist")
    if p.name.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(p, "rb"), encoding="utf-8")
    return io.TextIOWrapper(open(p, "rb"), encoding="utf-8")


_SKIP = {"": re.compile(r"[ \t\r\n]*"), ",": re.compile(r"[ \t\r\n,]*")}


class _Reader:
    """Chunked text with a cursor, for decoding one JSON value at a time."""

    def __init__(self, stream: io.TextIOBase, path: str | Path) -> None:
        self.stream = stream
        self.path = str(path)
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.decoder = json.JSONDecoder()

    def _more(self) -> bool:
        if self.eof:
            return False
        chunk = self.stream.read(_CHUNK)
        if not chunk:
            self.eof = True
            return False
        if self.pos > len(self.buf) // 2:
            self.buf = self.buf[self.pos :]
            self.pos = 0
        self.buf += chunk
        return True

    def peek(self, skip: str = "") -> str:
        """The next character that is not white space (nor a comma with ``skip=","``); ``""``
        at the end."""
        pattern = _SKIP[skip]
        while True:
            found = pattern.match(self.buf, self.pos)
            self.pos = found.end() if found else self.pos
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._more():
                return ""

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise self.error(f"expected {char!r}")
        self.pos += 1

    def value(self) -> Any:
        self.peek()  # raw_decode does not skip white space
        while True:
            try:
                value, end = self.decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as e:
                if self._more():
                    continue
                raise self.error(f"bad JSON ({e.msg})") from None
            if end == len(self.buf) and self._more():
                continue  # a number may go on in the next chunk
            self.pos = end
            return value

    def error(self, what: str) -> DatasetError:
        return DatasetError(f"{self.path}: {what} near {self.buf[self.pos : self.pos + 40]!r}")


def iter_json_records(path: str | Path) -> Iterator[dict[str, Any]]:
    """The objects of a JSON array file (or of a JSON Lines file), one at a time."""
    with _open_text(path) as stream:
        reader = _Reader(stream, path)
        first = reader.peek()
        if first == "[":
            reader.pos += 1
            while True:
                nxt = reader.peek(",")
                if nxt == "]":
                    return
                if nxt == "":
                    raise reader.error("unterminated JSON array")
                item = reader.value()
                if isinstance(item, dict):
                    yield item
        else:  # JSON Lines (or a lone object)
            while reader.peek() != "":
                item = reader.value()
                if isinstance(item, dict):
                    yield item


def iter_json_items(path: str | Path) -> Iterator[tuple[str, Any]]:
    """The ``(key, value)`` pairs of a JSON object file, one at a time."""
    with _open_text(path) as stream:
        reader = _Reader(stream, path)
        reader.expect("{")
        while True:
            nxt = reader.peek(",")
            if nxt == "}":
                return
            if nxt != '"':
                raise reader.error("expected a key")
            key = reader.value()
            reader.expect(":")
            yield str(key), reader.value()


# -- products and goals ------------------------------------------------------------------------
_PRICE_CHARS = re.compile(r"[^\d.]")


def parse_pricing(pricing: Any) -> tuple[tuple[float, ...], str]:
    """WebShop's ``"$12.99"`` / ``"$12.99 - $15.99"`` as ``([12.99], "$12.99")`` /
    ``([12.99, 15.99], "$12.99 to $15.99")``; missing prices are ``[100.0]``."""
    values: list[float] = []
    if isinstance(pricing, list | tuple):
        values = [float(p) for p in pricing if isinstance(p, int | float)]
    elif isinstance(pricing, str) and pricing:
        for part in pricing.split("$")[1:]:
            digits = _PRICE_CHARS.sub("", part)
            try:
                values.append(float(Decimal(digits)))
            except InvalidOperation:
                continue
    if not values:
        return (100.0,), "$100.0"
    if len(values) == 1:
        return (values[0],), f"${values[0]}"
    return (values[0], values[1]), f"${values[0]} to ${values[1]}"


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return " ".join(str(v) for v in value)
    return str(value)


def product_from_raw(
    raw: Mapping[str, Any], attributes: Sequence[str] | None, rng: random.Random
) -> Product | None:
    """A product of ``items_shuffle.json`` prepared as WebShop's ``load_products`` does
    (``None`` for the records WebShop skips: no asin, ``"nan"`` or longer than 10)."""
    asin = raw.get("asin")
    if not isinstance(asin, str) or asin == "nan" or not asin or len(asin) > 10:
        return None
    pricing, price_tag = parse_pricing(raw.get("pricing"))
    price = pricing[0] if len(pricing) == 1 else rng.uniform(pricing[0], pricing[1])
    options: dict[str, tuple[str, ...]] = {}
    option_to_image: dict[str, str] = {}
    custom = raw.get("customization_options")
    if isinstance(custom, Mapping):
        for opt_name, contents in custom.items():
            if not isinstance(contents, list):
                continue
            values = []
            for content in contents:
                if not isinstance(content, Mapping) or content.get("value") is None:
                    continue
                value = str(content["value"]).strip().replace("/", " | ").lower()
                values.append(value)
                if content.get("image"):
                    option_to_image[value] = str(content["image"])
            options[str(opt_name).lower()] = tuple(values)
    small = raw.get("small_description")
    bullets = tuple(str(b) for b in small) if isinstance(small, list) else (_text(small),)
    images = raw.get("images")
    main_image = str(images[0]) if isinstance(images, list) and images else ""
    reviews = tuple(
        Review(
            str(r.get("title", "")),
            int(r.get("score", r.get("stars", 0)) or 0),
            str(r.get("body", r.get("review", ""))),
        )
        for r in raw.get("Reviews") or ()
        if isinstance(r, Mapping)
    )
    return Product(
        asin=asin,
        name=_text(raw.get("name")),
        description=_text(raw.get("full_description")),
        bullet_points=bullets,
        pricing=pricing,
        price_tag=price_tag,
        price=price,
        options=options,
        attributes=tuple(attributes) if attributes else ("DUMMY_ATTR",),
        category=_text(raw.get("category")),
        query=_text(raw.get("query")).lower().strip(),
        product_category=_text(raw.get("product_category")),
        main_image=main_image,
        option_to_image=option_to_image,
        reviews=reviews,
    )


def _price_ceiling(price: float, rng: random.Random) -> tuple[float, str]:
    above = [p for p in PRICE_RANGE if p > price][:4]
    if len(above) >= 2:
        upper = sorted(rng.sample(above, 2))[1]
        return upper, f", and price lower than {upper:.2f} dollars"
    return NO_PRICE_LIMIT, ""


def human_goals(
    products: Sequence[Product],
    instructions: Mapping[str, Sequence[Mapping[str, Any]]],
    rng: random.Random,
) -> list[Goal]:
    """WebShop's ``get_human_goals``: one goal per crowd instruction that names attributes."""
    goals = []
    for product in products:
        for ins in instructions.get(product.asin, ()):
            attrs = tuple(str(a) for a in ins.get("instruction_attributes") or ())
            if not attrs:
                continue
            upper, price_text = _price_ceiling(product.price, rng)
            raw_options = ins.get("instruction_options") or ()
            if isinstance(raw_options, Mapping):
                raw_options = list(raw_options.values())
            goals.append(
                Goal(
                    asin=product.asin,
                    category=product.category,
                    query=product.query,
                    name=product.name,
                    product_category=product.product_category,
                    instruction_text=str(ins.get("instruction", "")).strip(".") + price_text,
                    attributes=attrs,
                    price_upper=upper,
                    goal_options=tuple(str(o) for o in raw_options),
                )
            )
    return goals


def synthetic_goals(
    products: Sequence[Product],
    instructions: Mapping[str, Mapping[str, Any]],
    rng: random.Random,
) -> list[Goal]:
    """WebShop's ``get_synthetic_goals``: the ``items_ins_v2`` instruction of a product with
    every combination of its options, weighted towards rare attributes."""
    goals: list[Goal] = []
    counts: dict[str, int] = {}
    for product in products:
        entry = instructions.get(product.asin) or {}
        text = entry.get("instruction")
        attrs = tuple(str(a) for a in entry.get("instruction_attributes") or ())
        if not text or not attrs:
            continue
        upper, price_text = _price_ceiling(product.price, rng)
        names = sorted(product.options)
        for combo in itertools.product(*(product.options[n] for n in names)):
            chosen = dict(zip(names, combo, strict=True))
            option_text = ", and ".join(f"{k}: {v}" for k, v in chosen.items())
            option_text = f" with {option_text}" if option_text else ""
            goals.append(
                Goal(
                    asin=product.asin,
                    category=product.category,
                    query=product.query,
                    name=product.name,
                    product_category=product.product_category,
                    instruction_text=f"{text}{option_text}{price_text}",
                    attributes=attrs,
                    price_upper=upper,
                    goal_options=tuple(combo),
                )
            )
            for a in attrs:
                counts[a] = counts.get(a, 0) + 1
    return [
        dataclasses.replace(
            g, weight=sum(1.0 / counts[a] for a in g.attributes) / len(g.attributes)
        )
        for g in goals
    ]


# -- the catalogue -----------------------------------------------------------------------------
class Catalogue:
    """Products by asin, the goals (in WebShop's shuffled order) and the search engine.

    A catalogue is read-only once built and shared: copies of an env (``spawn``, deep copies)
    share it, and a pickled one is loaded again from its source on the other side (once per
    process, :func:`load_catalogue`).
    """

    def __init__(self, products: Sequence[Product], goals: Sequence[Goal], source: CatalogueSource):
        if not products:
            raise DatasetError(f"the WebShop catalogue {source.products!r} has no products")
        self.source = source
        self.products: dict[str, Product] = {p.asin: p for p in products}
        self._order: list[str] = list(self.products)
        self.goals: list[Goal] = list(goals)
        self.queries: list[str] = sorted({p.query for p in products if p.query})
        self._index: Any = None
        self._bm25s: Any = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.products)

    def __repr__(self) -> str:
        return f"<Catalogue {len(self.products)} products, {len(self.goals)} goals>"

    def __deepcopy__(self, memo: dict[int, Any]) -> Catalogue:
        return self

    def __reduce__(self) -> tuple[Any, tuple[CatalogueSource]]:
        return load_catalogue, (self.source,)

    def split(self, name: str) -> list[Goal]:
        """The goals of a split: ``train``, ``test``, ``eval`` or ``all`` (module docstring)."""
        n = len(self.goals)
        if n > 1500:
            bounds = {"test": (0, 500), "eval": (500, 1500), "train": (1500, n), "all": (0, n)}
        else:
            cut = max(1, n // 5)
            bounds = {"test": (0, cut), "train": (cut, n), "all": (0, n)}
        if name not in bounds:
            raise ConfigError(
                f"split must be one of {sorted(bounds)} for this catalogue, got {name!r}"
            )
        lo, hi = bounds[name]
        goals = self.goals[lo:hi]
        if not goals:
            raise DatasetError(f"the {name!r} split of {self.source.products!r} has no goals")
        return goals

    def build_index(self) -> None:
        """Build the BM25 index now (the first search does it otherwise)."""
        with self._lock:
            if self._index is not None:
                return
            try:
                import bm25s
            except ImportError as e:
                raise missing_dependency("bm25s", "search") from e
            corpus = [self.products[a].search_text() for a in self._order]
            tokens = bm25s.tokenize(corpus, stopwords="en", show_progress=False)
            index = bm25s.BM25()
            index.index(tokens, show_progress=False)
            self._bm25s = bm25s
            self._index = index

    def search(self, query: str, k: int = SEARCH_RETURN_N) -> list[str]:
        """The asins of the ``k`` products that best match ``query`` (none share a word: none)."""
        if self._index is None:
            self.build_index()
        tokens = self._bm25s.tokenize(
            [query.lower()], stopwords="en", show_progress=False, return_ids=False
        )
        if not tokens or not tokens[0]:
            return []
        k = min(k, len(self._order))
        with self._lock:
            ids, scores = self._index.retrieve(tokens, k=k, show_progress=False)
        hits = sorted(
            ((float(s), int(i)) for i, s in zip(ids[0], scores[0], strict=True) if s > 0),
            key=lambda h: (-h[0], h[1]),
        )
        return [self._order[i] for _, i in hits]


_CATALOGUES: dict[CatalogueSource, Catalogue] = {}
_LOAD_LOCK = threading.Lock()


def load_catalogue(source: CatalogueSource) -> Catalogue:
    """The catalogue of ``source``, read once per process (later calls return the same one)."""
    with _LOAD_LOCK:
        found = _CATALOGUES.get(source)
        if found is None:
            found = _read(source)
            _CATALOGUES[source] = found
        return found


def _read(source: CatalogueSource) -> Catalogue:
    rng = random.Random(source.seed)
    # Products are prepared as they stream in (the raw records, with fields WebShop drops, are
    # never all held); their attributes are filled in from the second file afterwards.
    products: list[Product] = []
    seen: set[str] = set()
    for raw in iter_json_records(source.products):
        asin = raw.get("asin")
        if not isinstance(asin, str) or asin in seen:
            continue
        seen.add(asin)
        product = product_from_raw(raw, None, rng)
        if product is not None:
            products.append(product)
        if source.num_products is not None and len(seen) >= source.num_products:
            break
    attributes: dict[str, Mapping[str, Any]] = {}
    if source.attributes is not None:
        for asin, value in iter_json_items(source.attributes):
            if asin in seen and isinstance(value, Mapping):
                attributes[asin] = value
    for i, product in enumerate(products):
        attrs = attributes.get(product.asin, {}).get("attributes")
        if isinstance(attrs, list) and attrs:
            products[i] = dataclasses.replace(product, attributes=tuple(str(a) for a in attrs))
    if source.human_goals:
        human: dict[str, Sequence[Mapping[str, Any]]] = {}
        if source.human_instructions is not None:
            for asin, entries in iter_json_items(source.human_instructions):
                if asin in seen and isinstance(entries, list):
                    human[asin] = [e for e in entries if isinstance(e, Mapping)]
        goals = human_goals(products, human, rng)
    else:
        goals = synthetic_goals(products, attributes, rng)
    random.Random(GOAL_SHUFFLE_SEED).shuffle(goals)
    return Catalogue(products, goals, source)


def shipped_source() -> CatalogueSource:
    """The catalogue shipped with gemgym."""
    return CatalogueSource(
        products=str(SHIPPED_DIR / "items_shuffle.json.gz"),
        attributes=str(SHIPPED_DIR / "items_ins_v2.json.gz"),
        human_instructions=str(SHIPPED_DIR / "items_human_ins.json.gz"),
    )
