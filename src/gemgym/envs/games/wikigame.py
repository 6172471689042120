r"""WikiGame: reach a target page by following links, one page per turn.

============  =================================================================================
ids           ``game:WikiGame-v0-easy`` (start and target 2–3 links apart, 30 turns),
              ``game:WikiGame-v0-hard`` (4–6 links apart, 15 turns)
observation   reset: the rules, the start and target pages and a summary of the target;
              step: ``"At turn 2, you navigated to the 'json' page. Here is a summary of the
              page:\n..."``; ``info["suffix"]`` = the current page, the target, a summary and the
              neighbouring pages as ``\boxed{Title}`` lines
action        any text; the last ``\boxed{Title}`` is the page to go to: exactly a linked title
              (or with ``_`` for spaces, as Wikipedia's URLs write them);
              ``\boxed{<PREV_PAGE>}`` goes back (variants ``oneback``, ``freenav``)
reward        GEM's: the target 1.0 (``terminated``, success); any other step −0.05; a title that
              is not a neighbouring page, or a backtrack the variant forbids, −0.2; no
              ``\boxed{}``: −0.2 (the episode goes on, as in GEM); a dead end (a page without
              links, variants ``noregrets``/``eidetic``) 0.0 and ``terminated``; the last turn
              without the target 0.0 and ``truncated`` (a format error or backtrack there keeps its
              own reward, as in GEM)
expert        a shortest path (BFS over the link graph): 1.0 on every easy and hard episode
variants      ``variant=``: ``noregrets`` (default: no going back), ``oneback`` (back once in a
              row; a dead end sends you back for an extra turn, −0.1), ``freenav`` (back any
              time), ``eidetic`` (any page linked from any page seen so far is a neighbour)
backends      ``backend=``: ``"inprocess"`` (default: the shipped pages in memory),
              ``"kiwix"`` (the same pages from ``kiwix-serve`` over a ZIM file gemgym builds with
              ``libzim``; the env starts the server on loopback and stops it on ``close()``, or
              ``trawler_kwargs={"url": ..., "zimfile": ...}`` reads a running one, e.g.
              ``gemgym serve-wiki`` or a Wikipedia ZIM), ``"mw"`` (a MediaWiki API, Wikipedia's
              by default: needs network)
kwargs        ``max_turns``, ``min_distance``/``max_distance`` (the range of shortest-path
              lengths start→target; ``None``: any reachable pair), ``variant``, ``backend``,
              ``trawler_kwargs`` (the backend's: ``url``, ``zimfile``, ``query_delay_ms``,
              ``max_query_attempts``, ``query_use_cache``, ``timeout_s``; ``pages`` for
              ``inprocess``/``kiwix``: a JSONL page set of your own), ``page_summary_length``
              (GEM's ``(n, "characters" | "words" | "sentences")``, default ``(100,
              "characters")``)
============  =================================================================================

The pages are 382 pages of the Python 3.11 documentation (library reference, tutorial, HOWTOs,
language reference, FAQ, setup and usage, glossary) with the 3,295 links between them; a page's
title is its module name (``os.path``, ``json``) or its heading (``More Control Flow Tools``).
Data and licence: ``gemgym/wiki/data/README.md``. A start page always has links; the target is
drawn among the pages whose shortest distance from the start is in ``[min_distance,
max_distance]`` (each seed: a start uniformly among pages with such targets, then a target
uniformly among them). ``reset(options={"start": ..., "target": ...})`` plays a fixed pair.

When the backend does not know its whole link graph (``mw``, or ``kiwix`` over a ZIM other than
gemgym's), pages are drawn as GEM draws them (two random pages, no distance range, not seeded
by the server) and there is no expert.

Differences from upstream GEM: GEM registers both ids with random page pairs and differs only in
turns (30 and 15), over live Wikipedia by default; gemgym draws pairs at a known distance over a
shipped page set, so every episode is solvable within its turns and seeds replay exactly. An
unknown kwarg is an error (GEM swallows it). A backend failure raises
:class:`~gemgym.errors.EnvLostError` (GEM: ``BackendFailureException``). An invalid title is
quoted back as a bounded excerpt. Titles may be written with ``_`` for spaces (GEM's kiwix
backend listed links as URL paths, its MediaWiki backend as titles).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gemgym.core import excerpt, non_text_info
from gemgym.envs.games._common import (
    GameConfig,
    GameEnv,
    Step,
    last_boxed,
)
from gemgym.errors import ConfigError
from gemgym.registry import register
from gemgym.turns import truncate

if TYPE_CHECKING:
    from gemgym.wiki.backends import WikiBackend
    from gemgym.wiki.pages import WikiPage

__all__ = [
    "FAIL_REWARD",
    "FORMAT_ERROR_REWARD",
    "INTERNAL_STEP_REWARD",
    "INVALID_ACTION_REWARD",
    "SUCCESS_REWARD",
    "WikiGameConfig",
    "WikiGameEnv",
]

# GEM's WikiGameReward
SUCCESS_REWARD = 1.0
INTERNAL_STEP_REWARD = -0.05
FAIL_REWARD = 0.0
INVALID_ACTION_REWARD = -0.2
FORMAT_ERROR_REWARD = -0.2

PREV_PAGE = "<PREV_PAGE>"
VARIANTS = ("noregrets", "oneback", "freenav", "eidetic")
SUMMARY_UNITS = ("characters", "words", "sentences")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


@dataclass(frozen=True)
class WikiGameConfig(GameConfig):
    """Configuration (see the module docstring)."""

    max_turns: int = 10
    min_distance: int | None = None
    max_distance: int | None = None
    variant: str = "noregrets"
    backend: str = "inprocess"
    trawler_kwargs: Mapping[str, Any] | None = None
    page_summary_length: tuple[int, str] = (100, "characters")

    def __post_init__(self) -> None:
        # the keys of the mapping, before GameConfig's checks (the types, max_turns, validate())
        kwargs = self.trawler_kwargs
        if kwargs is not None and not (
            isinstance(kwargs, Mapping) and all(isinstance(k, str) for k in kwargs)
        ):
            raise ConfigError(f"trawler_kwargs must be a dict of keywords, got {kwargs!r}")
        summary = self.page_summary_length
        if isinstance(summary, list):  # JSON and YAML configs give lists
            object.__setattr__(self, "page_summary_length", tuple(summary))
        super().__post_init__()

    def validate(self) -> None:
        if self.variant not in VARIANTS:
            raise ConfigError(f"variant must be one of {', '.join(VARIANTS)}, got {self.variant!r}")
        lo, hi = self.min_distance, self.max_distance
        if lo is not None and lo < 1:
            raise ConfigError(f"min_distance must be at least 1, got {lo}")
        if lo is not None and hi is not None and hi < lo:
            raise ConfigError(f"max_distance ({hi}) must be at least min_distance ({lo})")
        n, unit = self.page_summary_length
        if n < 0 or unit not in SUMMARY_UNITS:
            raise ConfigError(
                "page_summary_length must be (n >= 0, one of "
                f"{', '.join(SUMMARY_UNITS)}), got {self.page_summary_length!r}"
            )


class WikiGameEnv(GameEnv[str]):
    """Navigate from a start page to a target page by links (see the module docstring)."""

    config: WikiGameConfig

    format_error_detail = "you did not provide a valid page title"

    def __init__(
        self,
        max_turns: int = 10,
        min_distance: int | None = None,
        max_distance: int | None = None,
        variant: str = "noregrets",
        backend: str = "inprocess",
        trawler_kwargs: Mapping[str, Any] | None = None,
        page_summary_length: tuple[int, str] = (100, "characters"),
    ) -> None:
        from gemgym.wiki.backends import make_backend

        super().__init__(
            WikiGameConfig(
                max_turns,
                min_distance,
                max_distance,
                variant,
                backend,
                dict(trawler_kwargs) if trawler_kwargs is not None else None,
                page_summary_length,
            )
        )
        self.backend: WikiBackend = make_backend(backend, self.config.trawler_kwargs)
        self.start_page: WikiPage | None = None
        self.target_page: WikiPage | None = None
        self.current_page: WikiPage | None = None
        self.page_history: list[WikiPage] = []
        self.backtracked = False
        self.memory: dict[str, None] = {}  # eidetic: every link seen, in order
        self.shortest_distance: int | None = None
        self._to_target: dict[str, int] | None = None

    # -- episode -------------------------------------------------------------------------------
    @property
    def variant(self) -> str:
        return self.config.variant

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """A new episode: a start/target pair drawn for ``seed``, or ``options={"start": ...,
        "target": ...}`` (titles)."""
        super(GameEnv, self).reset(seed=seed)
        self.turn_count = 0
        options = dict(options or {})
        start, target = options.pop("start", None), options.pop("target", None)
        if options:
            raise ConfigError(f"unknown reset options: {', '.join(map(str, options))}")
        if (start is None) != (target is None):
            raise ConfigError('reset options need both "start" and "target"')
        if start is not None:
            first, goal = self._page(str(start)), self._page(str(target))
            if first is None or goal is None:
                missing = start if first is None else target
                raise ConfigError(f"no page titled {missing!r}")
        else:
            first, goal = self._draw_pair()
        self.start_page = self.current_page = first
        self.target_page = goal
        self.page_history = [first]
        self.backtracked = False
        self.memory = dict.fromkeys(first.links)
        pages = self.backend.pages
        self._to_target = pages.distances_to(goal.title) if pages is not None else None
        self.shortest_distance = (
            self._to_target.get(first.title) if self._to_target is not None else None
        )
        info: dict[str, Any] = {"suffix": self.get_task_suffix()}
        info["start"], info["target"] = first.title, goal.title
        info["shortest_distance"] = self.shortest_distance
        return self._instructions(), info

    def _reset_fixed_page(
        self, start_page_title: str, target_page_title: str, seed: int | None = None
    ) -> tuple[str, dict[str, Any]]:
        """GEM's test helper: :meth:`reset` with a fixed start and target."""
        return self.reset(
            seed=seed, options={"start": start_page_title, "target": target_page_title}
        )

    @property
    def trawler(self) -> WikiBackend:
        """GEM's name for :attr:`backend`."""
        return self.backend

    def _page(self, title: str) -> WikiPage | None:
        return self.backend.get_page(title)

    def _draw_pair(self) -> tuple[WikiPage, WikiPage]:
        rng = self.rng
        pages = self.backend.pages
        lo, hi = self.config.min_distance or 1, self.config.max_distance
        if pages is not None:
            starts = [t for t in pages.titles if pages[t].links]
            rng.shuffle(starts)  # the first start with targets: uniform among those
            for start in starts:
                dist = pages.distances_from(start)
                targets = [
                    t
                    for t in pages.titles
                    if lo <= dist.get(t, -1) and (hi is None or dist[t] <= hi)
                ]
                if targets:
                    target = rng.choice(targets)
                    first, goal = self._page(start), self._page(target)
                    if first is not None and goal is not None:
                        return first, goal
            raise ConfigError(f"no start page has a target {lo}–{hi} links away in {pages.name}")
        # GEM's draw: two random pages with links (the backend's randomness)
        for _ in range(50):
            a, b = self.backend.random_title(rng), self.backend.random_title(rng)
            if a is None or b is None or a == b:
                continue
            first, goal = self._page(a), self._page(b)
            if first is not None and goal is not None and first.links and first != goal:
                return first, goal
        from gemgym.errors import EnvLostError

        raise EnvLostError(f"the {self.backend.name} backend gave no random pages")

    # -- text ----------------------------------------------------------------------------------
    def _summary(self, page: WikiPage) -> str:
        n, unit = self.config.page_summary_length
        if unit == "characters":
            return page.text[:n]
        if unit == "words":
            return " ".join(page.text.split()[:n])
        return " ".join(_SENTENCE_END.split(page.text)[:n])

    def _rules_snippet(self) -> str:
        if self.variant == "oneback":
            return (
                "If you wish, you may respond \\boxed{<PREV_PAGE>} to return to the previous "
                "page. Do note, however, that this counts towards your maximum number of turns. "
                "Note that you may NOT backtrack twice in a row. \n"
            )
        if self.variant == "freenav":
            return (
                "If you wish, you may respond \\boxed{<PREV_PAGE>} to return to the previous "
                "page. Do note, however, that this counts towards your maximum number of turns. \n"
            )
        return (
            "Choose wisely, as you may NOT backtrack; you can only visit neighboring pages "
            "(though you may revisit pages). Note that trying to backtrack is an illegal move "
            "and will still count towards your maximum number of turns.\n"
        )

    def _instructions(self) -> str:
        assert self.current_page is not None and self.target_page is not None
        turns = self.max_turns
        return (
            "You are playing the Wikipedia Game, and must reach the target Wikipedia page "
            f"within {turns} turns.\n"
            "This game tests your general knowledge and navigation skills.\n"
            "A page refers to a webpage.\n"
            "A Wikipedia page is a webpage on Wikipedia containing articles on a specific "
            "topic, as identified by its title.\nA neighboring page is any page accessible via "
            "a hyperlink from the current page.\n"
            "You will start at a random Wikipedia page, and must navigate to a target Wikipedia "
            "page by visiting neighboring pages.\n"
            "To visit a neighboring page, enter its EXACT title, wrapped in \\boxed{} tags "
            "(for example, \\boxed{Python_(programming_language)}).\n"
            f"{self._rules_snippet()}"
            f"You started at '{self.current_page.title}' and your target page is "
            f"'{self.target_page.title}'.\n"
            f"Here is a summary of the target page:\n{self._summary(self.target_page)}...\n"
            f"You can visit up to {turns} neighboring pages (excluding the starting page) to "
            "reach the target page.\n"
            "Use the information to navigate to the target page before you run out of turns. "
            "Before you make a guess, mention the pages you think will help you reach the "
            "target page quickly. Then, justify which is the best and enter that page's title "
            "in \\boxed{} tags to navigate there.\n"
            "Enter your first guess to start the game.\n"
        )

    def valid_pages(self, page: WikiPage | None = None) -> list[str]:
        """The titles the agent may go to from ``page`` (default: the current page)."""
        page = page if page is not None else self.current_page
        if page is None:
            return []
        if self.variant == "eidetic":
            return list(self.memory)
        return list(page.links)

    def get_task_suffix(self) -> str:
        if self.current_page is None or self.target_page is None:
            return ""
        links = "".join(f"\n- \\boxed{{{t}}}" for t in self.valid_pages())
        return (
            f"You are currently on the '{self.current_page.title}' page. "
            f"Your target page is '{self.target_page.title}'.\n"
            f"Here is a summary of the page:\n{self._summary(self.current_page)}...\n"
            f"This page has the following neighboring pages: {links}\n"
            "Enter the title of the neighboring page you want to navigate to."
        )

    # -- a turn --------------------------------------------------------------------------------
    def _result(self, obs: str, reward: float, *, terminated: bool = False, **extra: Any) -> Step:
        info = self._info(**extra)
        if terminated:
            return obs, reward, True, False, info
        if self.turn_count >= self.max_turns:
            info["success"] = False
            return truncate((obs, reward, False, False, info))
        return obs, reward, False, False, info

    def _format_error(self, detail: str = "you did not provide a valid page title") -> Step:
        return self._result(
            f"At turn {self.turn_count}, {detail}.", FORMAT_ERROR_REWARD, format_error=True
        )

    def _non_text(self, action: object) -> Step:
        self.turn_count += 1
        obs, reward, terminated, truncated, info = self._format_error(self.format_error_detail)
        info.update(non_text_info(action))
        return obs, reward, terminated, truncated, info

    def _resolve(self, title: str) -> str | None:
        valid = self.valid_pages()
        if title in valid:
            return title
        spaced = title.replace("_", " ")
        matches = [t for t in valid if t.replace("_", " ") == spaced]
        return matches[0] if len(matches) == 1 else None

    def step(self, action: str) -> Step:
        if not isinstance(action, str):
            return self._non_text(action)
        assert self.current_page is not None and self.target_page is not None
        self.turn_count = turn = self.turn_count + 1
        raw = last_boxed(action)
        title = raw.strip() if raw is not None else ""
        if not title:
            return self._format_error()
        if title == PREV_PAGE:
            return self._backtrack()
        resolved = self._resolve(title)
        if resolved is None:
            return self._invalid_title(title)
        page = self._page(resolved)
        if page is None:
            from gemgym.errors import EnvLostError

            raise EnvLostError(
                f"the {self.backend.name} backend has no page {resolved!r}, which "
                f"'{self.current_page.title}' links to"
            )
        if page.title == self.target_page.title:
            self._arrive(page)
            obs = (
                f"Congratulations! You have reached the target page '{self.target_page.title}' "
                f"in {turn} turns."
            )
            return self._result(obs, SUCCESS_REWARD, terminated=True, success=True)
        if not page.links and self.variant != "eidetic":
            return self._dead_end(page)
        self._arrive(page)
        obs = (
            f"At turn {turn}, you navigated to the '{page.title}' page. "
            f"Here is a summary of the page:\n{self._summary(page)}...\n"
        )
        return self._limit(obs, INTERNAL_STEP_REWARD)

    def _limit(self, obs: str, reward: float, **extra: Any) -> Step:
        """GEM: a move or an invalid title at the last turn ends the game with the fail reward."""
        if self.turn_count >= self.max_turns:
            assert self.target_page is not None
            obs = (
                f"At turn {self.turn_count}, you have reached the maximum number of turns "
                f"without reaching the target page '{self.target_page.title}'."
            )
            return self._result(obs, FAIL_REWARD, **extra)
        return self._result(obs, reward, **extra)

    def _arrive(self, page: WikiPage) -> None:
        self.current_page = page
        self.page_history.append(page)
        self.backtracked = False
        self.memory.update(dict.fromkeys(page.links))

    def _invalid_title(self, title: str) -> Step:
        assert self.current_page is not None
        guess = title.lower()
        hint = next((t for t in self.valid_pages() if guess in t.lower()), None)
        snippet = (
            f"Did you mean '{hint}'?"
            if hint is not None
            else "and neither could it be construed as a valid neighboring page title of it. "
        )
        obs = (
            f"At turn {self.turn_count}, you guessed '{excerpt(title)}', which is neither a "
            f"neighboring page of '{self.current_page.title}', {snippet}"
            "You must match **exactly** one of the neighboring page titles to navigate there."
        )
        return self._limit(obs, INVALID_ACTION_REWARD, invalid_action=True)

    def _backtrack(self) -> Step:
        turn = self.turn_count
        if self.variant in ("noregrets", "eidetic"):
            obs = (
                f"At turn {turn}, you attempted to backtrack to the previous page, but "
                "backtracking is not allowed in this variant of the Wikipedia Game."
            )
            return self._result(obs, INVALID_ACTION_REWARD, invalid_action=True)
        if len(self.page_history) < 2:
            obs = (
                f"At turn {turn}, you attempted to backtrack to the previous page, but there is "
                "no previous page that you can return to."
            )
            return self._result(obs, INVALID_ACTION_REWARD, invalid_action=True)
        if self.variant == "oneback" and self.backtracked:
            obs = (
                f"At turn {turn}, you attempted to backtrack to the previous page, but you have "
                "already backtracked once and cannot do so again."
            )
            return self._result(obs, INVALID_ACTION_REWARD, invalid_action=True)
        self.page_history.pop()
        self.current_page = self.page_history[-1]
        self.backtracked = True
        obs = (
            f"At turn {turn}, you backtracked to the previous page '{self.current_page.title}'. "
            f"Here is a summary of the page:\n{self._summary(self.current_page)}...\n"
        )
        return self._result(obs, INTERNAL_STEP_REWARD)

    def _dead_end(self, page: WikiPage) -> Step:
        assert self.current_page is not None
        turn = self.turn_count
        if self.variant == "noregrets":
            self.current_page = page
            self.page_history.append(page)
            obs = (
                f"At turn {turn}, you navigated to the '{page.title}' page, which is a dead-end "
                "page with no neighboring pages."
            )
            return self._result(obs, FAIL_REWARD, terminated=True, success=False, dead_end=True)
        # oneback, freenav: sent back at the cost of an extra turn
        self.backtracked = True
        obs = (
            f"At turn {turn}, you reached a dead-end page '{page.title}' with no neighboring "
            "pages. You have been automatically backtracked to the previous page "
            f"'{self.current_page.title}' at the cost of an additional turn. So now, you are at "
            f"turn {turn + 1}. Here is a summary of the page:\n"
            f"{self._summary(self.current_page)}...\n"
        )
        self.turn_count = min(turn + 1, self.max_turns)
        return self._result(obs, 2 * INTERNAL_STEP_REWARD, dead_end=True)

    # -- agents --------------------------------------------------------------------------------
    def sample_random_action(self) -> str:
        """A random neighbouring page (``<PREV_PAGE>`` on a page without any)."""
        valid = self.valid_pages()
        return "\\boxed{" + (self.rng.choice(valid) if valid else PREV_PAGE) + "}"

    def expert_action(self) -> str:
        """The first neighbouring page on a shortest path to the target (BFS)."""
        if self._to_target is None:
            raise NotImplementedError(
                f"the expert needs the whole link graph, which the {self.backend.name} backend "
                "does not know"
            )
        dist = self._to_target
        best = min(self.valid_pages(), key=lambda t: dist.get(t, 1 << 30), default=None)
        if best is None or best not in dist:
            return "\\boxed{" + PREV_PAGE + "}"
        return "\\boxed{" + best + "}"

    def close(self) -> None:
        self.backend.close()
        super().close()


_CARD = "Reach a target page by following links (WikiGame, Python documentation pages)"
register(
    "game:WikiGame-v0-easy",
    "gemgym.envs.games.wikigame:WikiGameEnv",
    kwargs={"max_turns": 30, "min_distance": 2, "max_distance": 3},
    description=f"{_CARD}: 2–3 links apart, 30 turns",
)
register(
    "game:WikiGame-v0-hard",
    "gemgym.envs.games.wikigame:WikiGameEnv",
    kwargs={"max_turns": 15, "min_distance": 4, "max_distance": 6},
    description=f"{_CARD}: 4–6 links apart, 15 turns",
)
