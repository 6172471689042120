r"""Kuhn poker: one hand of the three-card poker game (two players, hidden cards, zero-sum).

============  =================================================================================
id            ``ma:KuhnPoker-v0``
seats         ``player_0`` (acts first), ``player_1``
rules         the deck is J < Q < K; each player antes 1 chip and gets one card, hidden from the
              other. ``player_0`` checks or bets 1; facing a bet a player calls or folds; after a
              check ``player_1`` checks (showdown) or bets. The higher card wins a showdown
observation   the rules, the seat's own card, the actions so far; at the end both cards
action        any text; the last ``\boxed{check}``, ``\boxed{bet}``, ``\boxed{call}`` or
              ``\boxed{fold}`` (case-insensitive) that is legal now
reward        at the end, the chips won or lost: ±1 (fold, or check-check showdown) or ±2 (a
              called bet); an invalid move −0.1 and the seat tries again; 3 in a row forfeit
              the hand (as a fold: −1 / +1)
expert        a Nash equilibrium (Kuhn's family with α = 1/3): ``player_0`` bets K, bluffs J
              1/3 of the time, checks Q and calls a bet with Q 2/3 of the time; ``player_1``
              bets K, bluffs J 1/3 after a check, calls with Q 1/3 of the time. Mixed moves draw
              from the env's seeded generator; against it, no strategy wins in expectation
              (the game is worth −1/18 to ``player_0``)
============  =================================================================================
"""

from __future__ import annotations

import random

from gemgym.core import excerpt
from gemgym.envs.games._common import last_boxed
from gemgym.multiagent.game import InvalidMove, TextGame, register_game

__all__ = ["KuhnPoker"]

_CARDS = ("J", "Q", "K")
_NAMES = {"J": "Jack", "Q": "Queen", "K": "King"}
_TERMINAL = ("cc", "bc", "bf", "cbc", "cbf")
_WORDS = {"c": "checked", "b": "bet", "f": "folded"}


class KuhnPoker(TextGame):
    """One hand of Kuhn poker (see the module docstring)."""

    possible_agents = ("player_0", "player_1")

    def __init__(self) -> None:
        self.cards: tuple[str, str] = ("J", "Q")
        self.history = ""
        self.forfeited: str | None = None
        self.rng = random.Random()

    def new_game(self, rng: random.Random) -> None:
        self.rng = rng
        a, b = rng.sample(_CARDS, 2)
        self.cards = (a, b)
        self.history = ""
        self.forfeited = None

    def acting(self) -> tuple[str, ...]:
        if self.is_over():
            return ()
        return (self.possible_agents[len(self.history) % 2],)

    def is_over(self) -> bool:
        return self.forfeited is not None or self.history in _TERMINAL

    def _facing_bet(self) -> bool:
        return self.history.endswith("b")

    def legal_actions(self, agent: str) -> list[str]:
        words = ("call", "fold") if self._facing_bet() else ("check", "bet")
        return [f"\\boxed{{{w}}}" for w in words]

    def action_vocabulary(self, agent: str) -> list[str]:
        return [f"\\boxed{{{w}}}" for w in ("check", "bet", "call", "fold")]

    def _history_text(self) -> str:
        if not self.history:
            return "No actions yet."
        parts = []
        for i, h in enumerate(self.history):
            word = "called" if h == "c" and i > 0 and self.history[i - 1] == "b" else _WORDS[h]
            parts.append(f"player_{i % 2} {word}")
        return "Actions so far: " + ", ".join(parts) + "."

    def observe(self, agent: str) -> str:
        me = self.possible_agents.index(agent)
        lines = [
            f"You are {agent} in a hand of Kuhn poker against one opponent. The deck has three "
            "cards: Jack < Queen < King. Each player antes 1 chip and holds one hidden card. "
            "player_0 acts first: check or bet 1 chip. Facing a bet you may call (match it) or "
            "fold (lose the pot). After a check, player_1 may check (showdown) or bet. At a "
            "showdown the higher card wins the pot. Answer with \\boxed{check}, \\boxed{bet}, "
            "\\boxed{call} or \\boxed{fold}.",
            "",
            f"Your card: {_NAMES[self.cards[me]]}.",
            self._history_text(),
        ]
        if self.is_over():
            r = self.returns()[agent]
            other = _NAMES[self.cards[1 - me]]
            lines.append(
                f"Hand over. The opponent held the {other}. You "
                f"{'won' if r > 0 else 'lost'} {abs(int(r))} chip{'s' if abs(r) != 1 else ''}."
            )
        elif self.acting() == (agent,):
            options = "call or fold" if self._facing_bet() else "check or bet"
            lines.append(f"Your move: {options}.")
        return "\n".join(lines)

    def play_move(self, agent: str, action: str) -> None:
        move = last_boxed(action)
        if move is None:
            raise InvalidMove(
                "answer with \\boxed{check}, \\boxed{bet}, \\boxed{call} or \\boxed{fold}"
            )
        move = move.strip().lower()
        if self._facing_bet():
            codes = {"call": "c", "fold": "f"}
            hint = "you face a bet: \\boxed{call} or \\boxed{fold}"
        else:
            codes = {"check": "c", "bet": "b"}
            hint = "no bet to answer: \\boxed{check} or \\boxed{bet}"
        if move not in codes:
            raise InvalidMove(f"{excerpt(move, 40)!r} is not a legal move now; {hint}")
        self.history += codes[move]

    def returns(self) -> dict[str, float]:
        p0, p1 = self.possible_agents
        if self.forfeited is not None:
            return {a: -1.0 if a == self.forfeited else 1.0 for a in self.possible_agents}
        if self.history == "bf":
            return {p0: 1.0, p1: -1.0}
        if self.history == "cbf":
            return {p0: -1.0, p1: 1.0}
        if self.history not in _TERMINAL:
            return {p0: 0.0, p1: 0.0}
        stake = 2.0 if "b" in self.history else 1.0
        p0_wins = _CARDS.index(self.cards[0]) > _CARDS.index(self.cards[1])
        return {p0: stake if p0_wins else -stake, p1: -stake if p0_wins else stake}

    def forfeit(self, agent: str) -> None:
        self.forfeited = agent

    def expert_action(self, agent: str) -> str:
        card = self.cards[self.possible_agents.index(agent)]
        h, u = self.history, self.rng.random()
        if h == "":  # player_0 opens
            move = "bet" if card == "K" or (card == "J" and u < 1 / 3) else "check"
        elif h == "cb":  # player_0 faces a bet after checking
            move = "call" if card == "K" or (card == "Q" and u < 2 / 3) else "fold"
        elif h == "b":  # player_1 faces a bet
            move = "call" if card == "K" or (card == "Q" and u < 1 / 3) else "fold"
        else:  # h == "c": player_1 after a check
            move = "bet" if card == "K" or (card == "J" and u < 1 / 3) else "check"
        return f"\\boxed{{{move}}}"


register_game(
    "ma:KuhnPoker-v0",
    "gemgym.envs.multiagent.kuhn_poker:KuhnPoker",
    description="One hand of Kuhn poker (hidden cards, zero-sum; expert: Nash equilibrium)",
)
