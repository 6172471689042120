"""WebShop's reward (Yao et al., 2022, §3.2), written for gemgym without spaCy or thefuzz.

The paper scores a purchase ``y`` against the goal ``u``:

    r = r_type · (|U_att ∩ Y_att| + |U_opt ∩ Y_opt| + 1[y_price ≤ u_price])
              / (|U_att| + |U_opt| + 1)

* an attribute of the goal counts when a product attribute matches it fuzzily (token-set ratio
  above 85) or when it appears verbatim in the title, the features or the description;
* an option of the goal counts when a chosen option matches it fuzzily, after colour names are
  normalised (``"jet black"`` → ``"black"``);
* ``r_type`` is 1 when the product is of the goal's type, lowered to 0.5, 0.1 or 0 as the product
  query, category path and title nouns agree less (:func:`type_reward`).

:func:`token_set_ratio` reproduces thefuzz's ``fuzz.token_set_ratio`` (the rapidfuzz Indel
similarity of sorted token sets, on lower-cased alphanumeric text, rounded to an int). The title
nouns, which WebShop finds with spaCy's part-of-speech tagger, are approximated here by content
words (:func:`title_nouns`): letters-only tokens that are not stop words or common adjectives.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "COLOR_WORDS",
    "FUZZY_THRESHOLD",
    "ProductLike",
    "attribute_matches",
    "normalize_color",
    "option_matches",
    "title_nouns",
    "token_set_ratio",
    "type_reward",
    "webshop_reward",
]

FUZZY_THRESHOLD = 85
"""Two attribute or option strings match when their token-set ratio is above this."""

COLOR_WORDS: tuple[str, ...] = tuple(
    """alabaster apricot aqua ash asphalt azure banana beige black blue blush bordeaux bronze
    brown burgundy camel camo caramel champagne charcoal cheetah chestnut chocolate christmas
    coffee cognac copper coral cranberry cream crystal dark denim eggplant elephant espresso
    fuchsia gold granite grape graphite grass gray green grey heather indigo ivory ivy khaki
    lavender lemon leopard light lilac lime magenta maroon mauve merlot midnight mint mocha
    multicolor mushroom mustard natural navy nude olive orange peach pewter pink plum purple
    rainbow red rose royal rust sand sapphire seashell silver skull slate steel stone stonewash
    sunflower tan taupe teal tiger turquoise violet walnut wheat white wine yellow""".split()  # noqa: SIM905 - a word list reads best as text
)
"""The colour vocabulary of WebShop's option normaliser, in its (alphabetical) order."""

_NON_ALNUM = re.compile(r"[^0-9a-z]+")
_WORD = re.compile(r"[a-z][a-z'.-]*[a-z]|[a-z]")

# Function words and common adjectives: what a part-of-speech tagger would not call a noun.
_NOT_NOUNS = frozenset(
    """a about above after again against all also am an and any are as at be because been
    before being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if in into is
    it its itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves
    new best great good high low top premium quality professional portable large small big mini
    extra super ultra soft hard light heavy long short wide slim thin thick full half classic
    modern vintage cute pretty perfect natural organic fresh pure real original easy simple
    comfortable adjustable durable waterproof lightweight breathable compatible universal
    multi multiple single double triple non free open plus casual formal warm cool hot cold
    black white red blue green yellow pink purple grey gray brown orange beige silver gold navy
    dark bright clear assorted various special fine""".split()  # noqa: SIM905 - a word list reads best as text
)


def _process(text: str) -> str:
    """thefuzz's ``full_process``: ASCII only, lower case, alphanumerics separated by spaces."""
    ascii_text = text.encode("ascii", "ignore").decode()
    return _NON_ALNUM.sub(" ", ascii_text.lower()).strip()


def _lcs_length(a: str, b: str) -> int:
    """Length of the longest common subsequence (bit-parallel, Hyyrö 2004)."""
    if not a or not b:
        return 0
    if len(a) < len(b):
        a, b = b, a
    masks: dict[str, int] = {}
    for i, ch in enumerate(b):
        masks[ch] = masks.get(ch, 0) | (1 << i)
    full = (1 << len(b)) - 1
    v = full
    for ch in a:
        u = v & masks.get(ch, 0)
        v = ((v + u) | (v - u)) & full
    return len(b) - v.bit_count()


def _indel_ratio(a: str, b: str) -> float:
    total = len(a) + len(b)
    return 100.0 if total == 0 else 200.0 * _lcs_length(a, b) / total


def token_set_ratio(s1: str, s2: str) -> int:
    """thefuzz's ``fuzz.token_set_ratio(s1, s2)``: 0–100, how alike the two word sets are.

    The shared words (sorted) are compared with each side's shared-plus-own words; one side's
    words being a subset of the other's gives 100.

    >>> token_set_ratio("essential oils", "essential oil"), token_set_ratio("tea tree", "tea bag")
    (96, 60)
    """
    a = set(_process(s1).split())
    b = set(_process(s2).split())
    if not a or not b:
        return 0
    common = a & b
    only_a = a - b
    only_b = b - a
    if common and (not only_a or not only_b):
        return 100
    sect = " ".join(sorted(common))
    diff_ab = " ".join(sorted(only_a))
    diff_ba = " ".join(sorted(only_b))
    joined_a = f"{sect} {diff_ab}" if sect else diff_ab
    joined_b = f"{sect} {diff_ba}" if sect else diff_ba
    best = _indel_ratio(joined_a, joined_b)
    if sect:
        best = max(best, _indel_ratio(sect, joined_a), _indel_ratio(sect, joined_b))
    return round(best)


def normalize_color(option: str) -> str:
    """The first colour word of :data:`COLOR_WORDS` found in ``option`` (a substring), or
    ``option`` unchanged when it names none."""
    for color in COLOR_WORDS:
        if color in option:
            return color
    return option


def title_nouns(title: str) -> list[str]:
    """The words of a product title that name things (approximating spaCy's nouns and proper
    nouns): lower-cased letter words of two or more characters that are not function words or
    common adjectives. Numbers, sizes and model codes are left out, as the tagger tags them NUM
    or as modifiers."""
    words = []
    for raw in title.lower().split():
        token = raw.strip("()[]{},.;:!?\"'&/|*+-–—")
        if len(token) >= 2 and _WORD.fullmatch(token) and token not in _NOT_NOUNS:
            words.append(token)
    return words


class ProductLike(Protocol):
    """What the reward reads of a product (a :class:`~gemgym.envs.webshop._catalogue.Product`)."""

    @property
    def name(self) -> str: ...
    @property
    def query(self) -> str: ...
    @property
    def product_category(self) -> str: ...
    @property
    def attributes(self) -> Sequence[str]: ...
    @property
    def bullet_points(self) -> Sequence[str]: ...
    @property
    def description(self) -> str: ...


class GoalLike(Protocol):
    """What the reward reads of a goal (a :class:`~gemgym.envs.webshop._catalogue.Goal`)."""

    @property
    def name(self) -> str: ...
    @property
    def query(self) -> str: ...
    @property
    def product_category(self) -> str: ...
    @property
    def attributes(self) -> Sequence[str]: ...
    @property
    def goal_options(self) -> Sequence[str]: ...
    @property
    def price_upper(self) -> float: ...


@dataclass(frozen=True)
class TypeMatch:
    """The parts of the type reward."""

    r_type: float
    query_match: bool
    category_match: bool
    title_score: float


def type_reward(product: ProductLike, goal: GoalLike) -> TypeMatch:
    """Whether the product is of the goal's type.

    ``r_type`` is 1.0 when the search query of the two products is the same, or their category
    paths share at least two levels, or more than 20 % of the goal title's nouns are in the
    product's title; 0.5 when none holds; 0.1 when under 10 % of the nouns are shared, 0.0 when
    none is (a goal title without nouns scores 0.2).
    """
    query_match = product.query == goal.query
    bought_levels = {level.strip() for level in product.product_category.split("›")}
    goal_levels = {level.strip() for level in goal.product_category.split("›")}
    category_match = len(bought_levels & goal_levels) >= 2
    desired = set(title_nouns(goal.name))
    bought = set(title_nouns(product.name))
    title_score = 0.2 if not desired else len(desired & bought) / len(desired)
    r_type = 1.0
    if not (query_match or category_match or title_score > 0.2):
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return TypeMatch(r_type, query_match, category_match, title_score)


def attribute_matches(product: ProductLike, goal_attributes: Iterable[str]) -> int:
    """How many goal attributes the product has (fuzzy on its attribute list, else verbatim in
    its title, features or description)."""
    title = product.name.lower()
    features = " ".join(product.bullet_points).lower()
    description = product.description.lower()
    count = 0
    for wanted in goal_attributes:
        fuzzy = any(token_set_ratio(have, wanted) > FUZZY_THRESHOLD for have in product.attributes)
        if fuzzy or wanted in title or wanted in features or wanted in description:
            count += 1
    return count


def option_matches(chosen: Iterable[str], goal_options: Iterable[str]) -> int:
    """How many goal options one of the chosen options matches (colours normalised first)."""
    picked = [normalize_color(o) for o in chosen]
    count = 0
    for wanted in goal_options:
        target = normalize_color(wanted)
        if any(token_set_ratio(have, target) > FUZZY_THRESHOLD for have in picked):
            count += 1
    return count


def webshop_reward(
    product: ProductLike, goal: GoalLike, price: float, options: Mapping[str, str]
) -> tuple[float, dict[str, Any]]:
    """The reward of buying ``product`` at ``price`` with ``options`` chosen, for ``goal``.

    Returns ``(reward, parts)``: ``parts`` holds ``r_type``, ``r_att``, ``r_option`` (``None``
    when the goal names no option), ``r_price`` and the matches behind them.
    """
    kind = type_reward(product, goal)
    n_att = attribute_matches(product, goal.attributes)
    n_opt = option_matches(options.values(), goal.goal_options)
    r_price = price <= goal.price_upper
    n_goal_att = len(goal.attributes)
    n_goal_opt = len(goal.goal_options)
    total = (n_att + n_opt + int(r_price)) / (n_goal_att + n_goal_opt + 1) * kind.r_type
    parts: dict[str, Any] = {
        "r_type": kind.r_type,
        "query_match": kind.query_match,
        "category_match": kind.category_match,
        "title_score": kind.title_score,
        "r_att": n_att / n_goal_att if n_goal_att else None,
        "r_option": n_opt / n_goal_opt if n_goal_opt else None,
        "r_price": r_price,
        "attribute_matches": n_att,
        "option_matches": n_opt,
    }
    return total, parts
