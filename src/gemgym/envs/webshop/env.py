r"""WebShop: find, customise and buy the product a shopper's instruction asks for.

============  =================================================================================
ids           ``webshop:{train,test}-{html,text,text_rich}`` (GEM's ids and kwargs:
              ``observation_mode``, ``split``, ``max_turns=15``, ``error_tolerance=15``,
              ``format_error_reward=-0.1``, ``show_attrs``)
data          by default the catalogue shipped in ``gemgym/envs/data/webshop/`` (400 products in
              5 categories and their instructions, written in WebShop's file formats by
              ``scripts/make_webshop_catalogue.py``); ``data_dir=`` a folder with WebShop's own
              ``items_shuffle.json``, ``items_ins_v2.json`` and ``items_human_ins.json`` (the
              1.18M-product shop, or the ``_1000`` files), or each file by ``products=``,
              ``attributes=``, ``human_instructions=``; ``num_products=`` keeps the first N;
              ``human_goals=False`` uses WebShop's synthetic goals. Splits: test = the first 500
              shuffled goals, train = from the 1,501st (WebShop's); the shipped catalogue's test
              split is its first fifth
pages         search → results (10 a page, 50 in all; ``Next >``/``< Prev``) → item (options,
              ``Description``, ``Features``, ``Reviews``, ``Attributes`` with ``show_attrs``) →
              ``Buy Now``; ``Back to Search`` from any page but the first
observation   the page: ``text`` (its texts after the instruction, ``" [SEP] "``-joined),
              ``text_rich`` (a line a text, ``[button] X [button_]``, chosen options and visited
              products ``[clicked button]``) or ``html`` (a self-contained page: save it and open
              it in a browser). ``info["suffix"]``: the instruction, then GEM's admissible actions
              (``['click[back to search]', ..., 'search[<your query>]']``) and the request to
              answer in ``\boxed{}``; ``info["prefix"]``: GEM's task preamble (the instruction and
              the steps taken)
action        the last ``\boxed{...}`` holding ``search[query]`` (from any page, as GEM) or
              ``click[name]`` with a name of the current page (case-insensitive)
reward        buying: WebShop's reward in [0, 1] (attributes, options and price matched, times
              the product-type match; see :mod:`gemgym.envs.webshop._reward`), ``terminated``;
              ``info["success"]`` when it is 1.0. Any other valid action: 0.0. An unparsable or
              inadmissible action (or a non-text one): ``format_error_reward`` (−0.1), the page
              stays; more than ``error_tolerance`` of them end the episode (``terminated``). The
              15th turn without a purchase ends it ``truncated`` (``info["turn_limit"]``)
info          ``page``, ``parsed_action``, ``suffix``, ``prefix``; ``invalid_action`` /
              ``format_error``; at the purchase ``purchased``, ``options``, ``goal_asin``,
              ``reward_info`` (``r_type``, ``r_att``, ``r_option``, ``r_price``, ...)
expert        searches the instruction (the product's name if the goal is not among the 50
              results), pages to the goal product, clicks it, chooses the goal's options and
              buys: 1.0 on every shipped instruction
reset         ``options={"goal_index": i}`` (GEM: ``session=i``) plays goal ``i`` of the split;
              otherwise a goal drawn with the env's generator (WebShop's weights)
============  =================================================================================

Differences from upstream GEM: offline, with no Java, Flask, spaCy or torch: search is BM25 with
``bm25s`` over the fields GEM's Lucene index holds (no stemming), and the reward's product-type
check reads title nouns from a word list rather than spaCy's tagger (the attribute, option and
price parts are WebShop's, fuzzy matching included). Goals are picked with the env's own
generator (GEM: the global ``random``), the turn limit ends an episode ``truncated`` only (GEM
sets both flags), the text observations leave out the empty texts that the whitespace of GEM's
templates adds (``[SEP]  [SEP]`` runs), a synthetic goal's options are matched by value (GEM
passes ``(name, value)`` pairs), and the admissible actions are preceded by the instruction in
``info["suffix"]`` (``instruction_in_suffix=False`` gives GEM's suffix alone), because gemgym's
agents see the observation and the suffix, not the prefix. ``session_prefix`` is accepted and
has no effect (there are no server sessions).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from gemgym.core import Env, excerpt, non_text_info
from gemgym.envs.webshop._catalogue import (
    Catalogue,
    CatalogueSource,
    Goal,
    Product,
    load_catalogue,
    shipped_source,
)
from gemgym.envs.webshop._pages import PRODUCT_WINDOW, SUB_PAGES, Page, PageKind, render
from gemgym.envs.webshop._reward import (
    FUZZY_THRESHOLD,
    normalize_color,
    token_set_ratio,
    webshop_reward,
)
from gemgym.errors import ConfigError
from gemgym.registry import register
from gemgym.turns import TURN_LIMIT_INFO_KEY, check_turn_limit

__all__ = [
    "OBSERVATION_MODES",
    "WebShopConfig",
    "WebShopEnv",
    "parse_webshop_action",
]

OBSERVATION_MODES = ("html", "text", "text_rich")

INSTRUCTION_TEMPLATE = (
    "\nYou are an expert autonomous agent operating in the WebShop e‑commerce environment.\n"
    "Your task is to: {task_description}.\n"
    "Prior to this step, you have already taken {step_count} step(s). Below are the history "
    "actions you took and the corresponding observation:\n\n"
)
"""GEM's ``info["prefix"]``."""

_BOX = "\\boxed{"
_PRICE_CLAUSE = re.compile(r", and price lower than [\d.]+ dollars$")


def _last_boxed(text: str) -> str | None:
    """GEM's ``\\boxed{(.+)}`` (greedy, within a line), last match; linear time."""
    for line in reversed(text.split("\n")):
        close = line.rfind("}")
        start = line.find(_BOX)
        if start == -1 or close == -1:
            continue
        if close >= start + len(_BOX) + 1:
            return line[start + len(_BOX) : close]
    return None


def parse_webshop_action(action: str) -> tuple[str | None, str | None]:
    """``(name, argument)`` of a reply, as GEM parses it.

    The content of the last ``\\boxed{...}`` is split as ``name[argument]`` (the last ``[``
    before the last ``]``; the argument lower-cased); content without brackets is a name with no
    argument; no box gives ``(None, None)``.

    >>> parse_webshop_action("I will search. \\\\boxed{search[Red Shoes]}")
    ('search', 'red shoes')
    """
    content = _last_boxed(action)
    if content is None:
        return None, None
    close = content.rfind("]")
    bracket = content.rfind("[", 1, close - 1) if close > 1 else -1
    if bracket == -1:
        return content, None
    return content[:bracket], content[bracket + 1 : close].lower()


@dataclass(frozen=True)
class WebShopConfig:
    """The env's settings (see the module docstring); :meth:`validate` checks them."""

    observation_mode: str = "text"
    split: str = "train"
    max_turns: int | None = 15
    error_tolerance: int = 15
    format_error_reward: float = -0.1
    show_attrs: bool = False
    data_dir: str | None = None
    products: str | None = None
    attributes: str | None = None
    human_instructions: str | None = None
    num_products: int | None = None
    human_goals: bool = True
    instruction_in_suffix: bool = True
    session: int | None = None
    session_prefix: str | None = None

    def validate(self) -> None:
        if self.observation_mode not in OBSERVATION_MODES:
            raise ConfigError(
                f"observation_mode must be one of {OBSERVATION_MODES}, got {self.observation_mode!r}"
            )
        check_turn_limit(self.max_turns)
        tol = self.error_tolerance
        if isinstance(tol, bool) or not isinstance(tol, int) or tol < 0:
            raise ConfigError(f"error_tolerance must be an int >= 0, got {tol!r}")
        if not isinstance(self.format_error_reward, int | float) or not math.isfinite(
            self.format_error_reward
        ):
            raise ConfigError(
                f"format_error_reward must be a finite number, got {self.format_error_reward!r}"
            )
        if self.num_products is not None and (
            isinstance(self.num_products, bool)
            or not isinstance(self.num_products, int)
            or self.num_products < 1
        ):
            raise ConfigError(f"num_products must be a positive int, got {self.num_products!r}")
        if self.data_dir is not None and self.products is not None:
            raise ConfigError("give data_dir= or products= (with attributes=, ...), not both")
        if self.products is None and (self.attributes or self.human_instructions):
            raise ConfigError("attributes= and human_instructions= need products=")

    def source(self) -> CatalogueSource:
        """Where the products and instructions come from."""
        if self.data_dir is not None:
            return CatalogueSource.from_dir(
                self.data_dir, num_products=self.num_products, human_goals=self.human_goals
            )
        if self.products is not None:
            return CatalogueSource(
                str(Path(self.products).expanduser()),
                str(Path(self.attributes).expanduser()) if self.attributes else None,
                str(Path(self.human_instructions).expanduser())
                if self.human_instructions
                else None,
                self.num_products,
                self.human_goals,
            )
        shipped = shipped_source()
        if self.num_products is not None or not self.human_goals:
            return CatalogueSource(
                shipped.products,
                shipped.attributes,
                shipped.human_instructions,
                self.num_products,
                self.human_goals,
            )
        return shipped


@dataclass
class _Session:
    """Where the shopper is: the page and what led there."""

    kind: PageKind = "search"
    query: str | None = None
    results: list[str] = field(default_factory=list)
    page_no: int = 1
    asin: str | None = None
    chosen: dict[str, str] = field(default_factory=dict)
    visited: set[str] = field(default_factory=set)
    sub: str = "description"
    reward: float = 0.0
    done: bool = False


class WebShopEnv(Env[str, str]):
    """WebShop's shop as a text env (see the module docstring)."""

    metadata: ClassVar[dict[str, Any]] = {"multi_turn": True}

    def __init__(
        self,
        observation_mode: str = "text",
        split: str = "train",
        max_turns: int | None = 15,
        error_tolerance: int = 15,
        format_error_reward: float = -0.1,
        show_attrs: bool = False,
        *,
        data_dir: str | Path | None = None,
        products: str | Path | None = None,
        attributes: str | Path | None = None,
        human_instructions: str | Path | None = None,
        num_products: int | None = None,
        human_goals: bool = True,
        instruction_in_suffix: bool = True,
        session: int | None = None,
        session_prefix: str | None = None,
    ) -> None:
        self.config = WebShopConfig(
            observation_mode=observation_mode,
            split=split,
            max_turns=max_turns,
            error_tolerance=error_tolerance,
            format_error_reward=float(format_error_reward)
            if isinstance(format_error_reward, int | float)
            else format_error_reward,
            show_attrs=bool(show_attrs),
            data_dir=str(data_dir) if data_dir is not None else None,
            products=str(products) if products is not None else None,
            attributes=str(attributes) if attributes is not None else None,
            human_instructions=str(human_instructions) if human_instructions is not None else None,
            num_products=num_products,
            human_goals=human_goals,
            instruction_in_suffix=instruction_in_suffix,
            session=session,
            session_prefix=session_prefix,
        )
        self.config.validate()
        self.observation_mode = observation_mode
        self.max_turns = max_turns
        self.error_tolerance = error_tolerance
        self.format_error_reward = self.config.format_error_reward
        self.catalogue: Catalogue = load_catalogue(self.config.source())
        goals = self.catalogue.split(split)  # checks the split
        self.num_goals = len(goals)
        self._weighted = any(g.weight != goals[0].weight for g in goals)
        self.goal: Goal | None = None
        self.goal_index = -1
        self.instruction_text = ""
        self.turn_count = 0
        self.error_turn_count = 0
        self._session = _Session()
        self._page: Page | None = None
        self._searched: list[str] = []

    # -- episode --------------------------------------------------------------------------------
    def warmup(self) -> None:
        """Build the search index before the first episode."""
        self.catalogue.build_index()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        options = dict(options or {})
        goals = self.catalogue.split(self.config.split)
        index = options.pop("goal_index", options.pop("session", self.config.session))
        text = options.pop("instruction_text", None)
        if options:
            raise ConfigError(
                f"unknown reset options {sorted(options)}; WebShop takes goal_index "
                "(or GEM's session) and instruction_text"
            )
        if index is not None:
            if isinstance(index, bool) or not isinstance(index, int):
                raise ConfigError(f"goal_index must be an int, got {index!r}")
            if not 0 <= index < len(goals):
                raise ConfigError(f"goal_index {index} is outside 0..{len(goals) - 1}")
        elif self._weighted:
            index = self.rng.choices(range(len(goals)), [g.weight for g in goals])[0]
        else:
            index = self.rng.randrange(len(goals))
        self.goal_index = index
        self.goal = goals[index]
        self.instruction_text = str(text) if text is not None else self.goal.instruction_text
        self.turn_count = 0
        self.error_turn_count = 0
        self._session = _Session()
        self._searched = []
        self._render()
        return self._observation(), self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.goal is None:
            raise ConfigError("call reset() before step()")
        s = self._session
        if s.done:
            return self._observation(), 0.0, True, False, self._info()
        self.turn_count += 1
        info: dict[str, Any] = {}
        name: str | None = None
        arg: str | None = None
        if not isinstance(action, str):
            info.update(non_text_info(action))
        else:
            name, arg = parse_webshop_action(action)
            if name is None:
                info["format_error"] = True
            else:
                shown = f"{name}[{arg}]" if arg else name
                info["parsed_action"] = excerpt(shown)
        clickables = self._page.clickables if self._page is not None else {}
        reward = 0.0
        if name == "search" and arg is not None:
            self._search(arg)
        elif name == "click" and arg is not None and arg in clickables and arg != "search":
            reward = self._click(arg, info)
        else:
            self.error_turn_count += 1
            reward = self.format_error_reward
            if name is not None:
                info["invalid_action"] = True
            if self.error_turn_count > self.error_tolerance:
                s.done = True
        self._render()
        info.update(self._info())
        terminated = s.done
        truncated = False
        if terminated and not info.get("success"):
            info["success"] = False
        if not terminated and self.max_turns is not None and self.turn_count >= self.max_turns:
            truncated = True
            info[TURN_LIMIT_INFO_KEY] = True
            info["success"] = False
        return self._observation(), reward, terminated, truncated, info

    # -- the shop --------------------------------------------------------------------------------
    def _search(self, query: str) -> None:
        s = self._session
        s.kind = "results"
        s.query = query
        if len(query) <= 2000:  # the expert's memory; a huge query is never its own
            self._searched.append(query)
        s.results = self.catalogue.search(query)
        s.page_no = 1
        s.asin = None
        s.chosen = {}

    def _click(self, key: str, info: dict[str, Any]) -> float:
        s = self._session
        target = self._page.clickables[key] if self._page is not None else None
        if key == "buy now":
            return self._buy(info)
        if key == "back to search":
            self._session = _Session()
            return 0.0
        if key == "next >" and s.kind == "results":
            s.page_no += 1
        elif key == "< prev" and s.kind == "results":
            s.page_no -= 1
        elif key == "< prev" and s.kind == "sub":
            s.kind = "item"
        elif key == "< prev" and s.kind == "item":
            s.kind = "results"
            s.asin = None
            s.chosen = {}
        elif key in SUB_PAGES and s.kind == "item":
            s.kind = "sub"
            s.sub = key
        elif target is not None and target.kind == "product":
            s.kind = "item"
            s.asin = key.upper()
            s.visited.add(s.asin)
        elif target is not None and target.kind == "option" and target.option_name is not None:
            s.kind = "item"
            s.chosen[target.option_name] = key
        return 0.0

    def _buy(self, info: dict[str, Any]) -> float:
        s = self._session
        assert self.goal is not None and s.asin is not None
        product = self.catalogue.products[s.asin]
        reward, parts = webshop_reward(product, self.goal, product.price, s.chosen)
        s.kind = "done"
        s.reward = reward
        s.done = True
        info.update(
            success=reward >= 1.0,
            purchased=s.asin,
            options=dict(s.chosen),
            goal_asin=self.goal.asin,
            reward_info=parts,
        )
        return reward

    def _render(self) -> None:
        s = self._session
        product = self.catalogue.products.get(s.asin) if s.asin else None
        lo = (s.page_no - 1) * PRODUCT_WINDOW
        shown = [self.catalogue.products[a] for a in s.results[max(lo, 0) : lo + PRODUCT_WINDOW]]
        self._page = render(
            s.kind,
            instruction=self.instruction_text,
            products=shown if lo >= 0 else [],
            product=product,
            page_no=s.page_no,
            total=len(s.results),
            chosen=s.chosen,
            sub=s.sub,
            show_attrs=self.config.show_attrs,
            asin=s.asin,
            reward=s.reward,
        )

    # -- what the agent sees -------------------------------------------------------------------
    @property
    def page(self) -> Page:
        """The current page."""
        if self._page is None:
            raise ConfigError("call reset() first")
        return self._page

    def _observation(self) -> str:
        page = self.page
        if self.observation_mode == "html":
            return page.html
        if self.observation_mode == "text_rich":
            return page.text_rich(list(self._session.chosen.values()), self._session.visited)
        return page.text()

    def admissible_actions(self) -> list[str]:
        """GEM's admissible actions: ``click[name]`` for each clickable name, then
        ``search[<your query>]`` on the search page."""
        page = self.page
        actions = [f"click[{name}]" for name in page.clickables if name != "search"]
        if page.has_search_bar:
            actions.append("search[<your query>]")
        return actions

    def get_task_suffix(self) -> str:
        """GEM's suffix (the admissible actions and the answer format), after the instruction
        unless ``instruction_in_suffix=False``."""
        suffix = (
            "\nYour admissible actions of the current situation are:"
            f"{self.admissible_actions()}\n"
            "Now it's your turn to take one action for the current step."
            "You should first reason step-by-step about the current situation, then think "
            "carefully which admissible action best advances the shopping goal."
            "Once you've finished your reasoning, you should choose an admissible action for "
            "current step and present it within \\boxed{}. For example, \\boxed{search[...]} or "
            "\\boxed{click[...]}."
        )
        if self.config.instruction_in_suffix:
            return f"Instruction: {self.instruction_text}{suffix}"
        return suffix

    def get_task_prefix(self) -> str:
        """GEM's prefix: the task and the number of steps taken."""
        return INSTRUCTION_TEMPLATE.format(
            task_description=self.instruction_text, step_count=self.turn_count
        )

    def _info(self) -> dict[str, Any]:
        return {
            "suffix": self.get_task_suffix(),
            "prefix": self.get_task_prefix(),
            "page": self._session.kind,
        }

    # -- agents ------------------------------------------------------------------------------------
    def sample_random_action(self) -> str:
        """A random admissible action: a search for a random product query on the search page,
        else a random click."""
        page = self.page
        if page.has_search_bar:
            query = self.rng.choice(self.catalogue.queries) if self.catalogue.queries else "item"
            return f"\\boxed{{search[{query}]}}"
        names = [n for n in page.clickables if n != "search"]
        if not names:
            return "\\boxed{click[buy now]}"
        return f"\\boxed{{click[{self.rng.choice(names)}]}}"

    def expert_action(self) -> str:
        """Buy the goal product with the goal's options (see the module docstring)."""
        goal = self.goal
        s = self._session
        if goal is None or s.done:
            return "\\boxed{click[buy now]}"
        by_instruction = _PRICE_CLAUSE.sub("", goal.instruction_text).lower()
        known = self.catalogue.products.get(goal.asin)
        by_name = (known.name if known is not None else goal.name).lower()
        if s.kind == "search":
            query = by_name if by_instruction in self._searched else by_instruction
            return f"\\boxed{{search[{query}]}}"
        if s.kind == "results":
            if goal.asin not in s.results:
                if s.query == by_name and s.results:  # not found even by name: the best match
                    return f"\\boxed{{click[{s.results[0].lower()}]}}"
                return "\\boxed{click[back to search]}"
            target = s.results.index(goal.asin) // PRODUCT_WINDOW + 1
            if target > s.page_no:
                return "\\boxed{click[next >]}"
            if target < s.page_no:
                return "\\boxed{click[< prev]}"
            return f"\\boxed{{click[{goal.asin.lower()}]}}"
        if s.kind == "sub":
            return "\\boxed{click[< prev]}"
        product = self.catalogue.products[s.asin] if s.asin else None
        if product is None or (s.asin != goal.asin and goal.asin in s.results):
            return "\\boxed{click[< prev]}"
        for wanted in goal.goal_options:
            pick = _best_option(product, wanted)
            if pick is not None and s.chosen.get(pick[0]) != pick[1]:
                return f"\\boxed{{click[{pick[1]}]}}"
        return "\\boxed{click[buy now]}"


def _best_option(product: Product, wanted: str) -> tuple[str, str] | None:
    """The ``(option name, value)`` of ``product`` that best matches a goal option."""
    target = wanted.strip().lower()
    for name, values in product.options.items():
        if target in values:
            return name, target
    norm = normalize_color(target)
    best: tuple[int, str, str] | None = None
    for name, values in product.options.items():
        for value in values:
            score = token_set_ratio(normalize_color(value), norm)
            if score > FUZZY_THRESHOLD and (best is None or score > best[0]):
                best = (score, name, value)
    return (best[1], best[2]) if best is not None else None


for _mode in OBSERVATION_MODES:
    for _split in ("train", "test"):
        register(
            f"webshop:{_split}-{_mode}",
            "gemgym.envs.webshop.env:WebShopEnv",
            kwargs={
                "observation_mode": _mode,
                "split": _split,
                "max_turns": 15,
                "error_tolerance": 15,
                "format_error_reward": -0.1,
            },
            description=f"WebShop: find and buy the product asked for ({_split} goals, {_mode} pages)",
            extra="search",
        )
