r"""Negotiation: two players split a pool of items they value differently (Deal or No Deal).

============  =================================================================================
id            ``ma:Negotiation-v0`` (``max_turns=6``: three proposals each)
seats         ``player_0`` (proposes first), ``player_1``
rules         a pool of books, hats and balls (1–4 of each); each player has private values per
              item (whole numbers) that make the whole pool worth 10 to them. Players alternate:
              propose a split or accept the other's last proposal. A deal before the turn limit
              pays each player the value of its share; no deal pays nobody
observation   the rules, the pool, the seat's own values, the proposals so far
action        any text; the last ``\boxed{propose B H L}`` (the books, hats and balls *you* keep;
              the other player gets the rest) or ``\boxed{accept}``
reward        at the end, the value of the seat's share divided by 10 (in [0, 1]; both 0 without
              a deal); an invalid move (malformed, more items than the pool has, accepting when
              nothing was proposed) −0.1 and the seat tries again; 3 in a row end the game
              without a deal
expert        accepts an offer worth at least 6 of 10 (on the last turn, anything worth more than
              0); otherwise proposes, among the splits worth at least 6 to itself, one that
              leaves the other player the most items (ties drawn from the env's generator). Two
              experts reach a deal in most games (not optimal: values are private)
variants      ``make("ma:Negotiation-v0", game_kwargs={"max_turns": 10})``
============  =================================================================================
"""

from __future__ import annotations

import itertools
import random
import re

from gemgym.core import excerpt
from gemgym.envs.games._common import last_boxed
from gemgym.errors import ConfigError
from gemgym.multiagent.game import InvalidMove, TextGame, register_game

__all__ = ["Negotiation"]

_ITEMS = ("books", "hats", "balls")
_TOTAL = 10
_PROPOSE = re.compile(r"^propose\s*:?\s*(\d+)[\s,]+(\d+)[\s,]+(\d+)$")


def _value_vectors(counts: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Every private value vector (non-negative ints) with ``sum(count * value) == 10``."""
    ranges = [range(_TOTAL // c + 1) for c in counts]
    return [
        v
        for v in itertools.product(*ranges)
        if sum(c * x for c, x in zip(counts, v, strict=True)) == _TOTAL
    ]


class Negotiation(TextGame):
    """Split a pool of items (see the module docstring).

    Args:
        max_turns: turns (proposals or acceptance) before the game ends without a deal.
    """

    possible_agents = ("player_0", "player_1")

    def __init__(self, max_turns: int = 6) -> None:
        if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 2:
            raise ConfigError(f"max_turns must be an int >= 2, got {max_turns!r}")
        self.max_turns = max_turns
        self.counts: tuple[int, ...] = (1, 1, 1)
        self.values: dict[str, tuple[int, ...]] = {}
        self.proposals: list[tuple[str, tuple[int, ...]]] = []
        self.turn = 0
        self.deal: dict[str, tuple[int, ...]] | None = None
        self.ended = False
        self.rng = random.Random()

    def new_game(self, rng: random.Random) -> None:
        self.rng = rng
        while True:  # pools like 4 4 4 cannot be worth exactly 10: draw again
            self.counts = tuple(rng.randint(1, 4) for _ in _ITEMS)
            vectors = _value_vectors(self.counts)
            if vectors:
                break
        self.values = {a: rng.choice(vectors) for a in self.possible_agents}
        self.proposals = []
        self.turn = 0
        self.deal = None
        self.ended = False

    def acting(self) -> tuple[str, ...]:
        if self.is_over():
            return ()
        return (self.possible_agents[self.turn % 2],)

    def is_over(self) -> bool:
        return self.ended or self.deal is not None or self.turn >= self.max_turns

    def _other(self, agent: str) -> str:
        return self.possible_agents[1 - self.possible_agents.index(agent)]

    def _worth(self, agent: str, share: tuple[int, ...]) -> int:
        return sum(v * n for v, n in zip(self.values[agent], share, strict=True))

    def _offer_to(self, agent: str) -> tuple[int, ...] | None:
        """What ``agent`` gets if it accepts the other player's last proposal."""
        if not self.proposals or self.proposals[-1][0] == agent:
            return None
        keep = self.proposals[-1][1]
        return tuple(c - k for c, k in zip(self.counts, keep, strict=True))

    @staticmethod
    def _fmt(share: tuple[int, ...]) -> str:
        return ", ".join(f"{n} {item}" for n, item in zip(share, _ITEMS, strict=True))

    def observe(self, agent: str) -> str:
        vals = ", ".join(
            f"{item}: {v} each" for item, v in zip(_ITEMS, self.values[agent], strict=True)
        )
        lines = [
            f"You are {agent} in a negotiation with one other player. You split a pool of "
            "items; each player values the items differently and privately, and the whole "
            f"pool is worth {_TOTAL} points to each. Players alternate turns (player_0 first). "
            "On your turn, propose a split with \\boxed{propose B H L}, the numbers of books, "
            "hats and balls YOU keep (the other player gets the rest), or accept the other "
            f"player's last proposal with \\boxed{{accept}}. Without a deal within {self.max_turns} "
            "turns nobody scores.",
            "",
            f"Pool: {self._fmt(self.counts)}.",
            f"Your values: {vals}.",
        ]
        for who, keep in self.proposals:
            rest = tuple(c - k for c, k in zip(self.counts, keep, strict=True))
            mine = keep if who == agent else rest
            lines.append(
                f"{who} proposed to keep {self._fmt(keep)} (you would get {self._fmt(mine)}, "
                f"worth {self._worth(agent, mine)} to you)."
                if who != agent
                else f"You proposed to keep {self._fmt(keep)} "
                f"(worth {self._worth(agent, keep)} to you)."
            )
        if self.is_over():
            if self.deal is not None:
                got = self.deal[agent]
                lines.append(
                    f"Deal! You get {self._fmt(got)}, worth {self._worth(agent, got)} points."
                )
            else:
                lines.append("The game ended without a deal; nobody scores.")
        elif self.acting() == (agent,):
            lines.append(f"Your turn ({self.max_turns - self.turn} turns left).")
        return "\n".join(lines)

    def play_move(self, agent: str, action: str) -> None:
        move = last_boxed(action)
        if move is None:
            raise InvalidMove("answer with \\boxed{propose B H L} or \\boxed{accept}")
        move = move.strip().lower()
        if move == "accept":
            offer = self._offer_to(agent)
            if offer is None:
                raise InvalidMove("there is no proposal of the other player to accept")
            self.deal = {agent: offer, self._other(agent): self.proposals[-1][1]}
            self.turn += 1
            return
        m = _PROPOSE.match(move)
        if m is None:
            raise InvalidMove(
                f"{excerpt(move, 40)!r} is neither \\boxed{{propose B H L}} nor \\boxed{{accept}}"
            )
        # int() raises on 4,300+ digits; any count over 6 digits exceeds the pool anyway
        keep = tuple(int(g) if len(g) <= 6 else 10**6 for g in m.groups())
        if any(k > c for k, c in zip(keep, self.counts, strict=True)):
            raise InvalidMove(f"the pool has only {self._fmt(self.counts)}")
        self.proposals.append((agent, keep))
        self.turn += 1

    def returns(self) -> dict[str, float]:
        if self.deal is None:
            return dict.fromkeys(self.possible_agents, 0.0)
        return {a: self._worth(a, self.deal[a]) / _TOTAL for a in self.possible_agents}

    def forfeit(self, agent: str) -> None:
        self.ended = True

    def _splits(self) -> list[tuple[int, ...]]:
        return list(itertools.product(*(range(c + 1) for c in self.counts)))

    def legal_actions(self, agent: str) -> list[str]:
        moves = [f"\\boxed{{propose {a} {b} {c}}}" for a, b, c in self._splits()]
        if self._offer_to(agent) is not None:
            moves.append("\\boxed{accept}")
        return moves

    def action_vocabulary(self, agent: str) -> list[str]:
        return [*self.legal_actions(agent), "\\boxed{accept}", "\\boxed{propose 5 5 5}"]

    def expert_action(self, agent: str) -> str:
        offer = self._offer_to(agent)
        last_turn = self.turn == self.max_turns - 1
        if offer is not None:
            worth = self._worth(agent, offer)
            if worth >= 6 or (last_turn and worth > 0):
                return "\\boxed{accept}"
        best = max(self._worth(agent, s) for s in self._splits())
        floor = min(6, best)
        good = [s for s in self._splits() if self._worth(agent, s) >= floor]
        most = max(sum(self.counts) - sum(s) for s in good)
        pick = self.rng.choice([s for s in good if sum(self.counts) - sum(s) == most])
        return f"\\boxed{{propose {pick[0]} {pick[1]} {pick[2]}}}"


register_game(
    "ma:Negotiation-v0",
    "gemgym.envs.multiagent.negotiation:Negotiation",
    description="Split a pool of items with private values (negotiation; general-sum)",
)
