r"""TowerofHanoi: move every disk from tower A to tower C, one disk at a time.

============  =================================================================================
ids           ``game:TowerofHanoi-v0-easy`` (3 disks, 10 turns), ``game:TowerofHanoi-v0-hard``
              (5 disks, 35 turns), ``game:TowerofHanoi-v0-random`` (each episode one of
              3/10, 4/20, 5/35)
observation   reset: the rules; step: ``"At turn 2, you moved disk 1 from tower A to tower C."``;
              ``info["suffix"]`` = the towers, bottom disk first (``"A: [3, 2]"``) and
              ``"Enter your move."``
action        any text; the last ``\boxed{X Y}`` (towers ``A``/``B``/``C``, any case, optional
              comma) moves the top disk of ``X`` onto ``Y``
reward        all disks on C: 1.0 and ``terminated``; legal move: 0.0; illegal move (empty source,
              larger disk onto a smaller one, same tower): 0.0; no parsable move: −0.1 and
              ``terminated``; at the turn limit: ``truncated`` with partial credit
              (disks on C) / (number of disks)
expert        the optimal recursive strategy from any legal position (the largest misplaced disk
              goes to its target once the smaller ones are parked on the third tower)
============  =================================================================================

Differences from upstream GEM (bugs fixed): randomness is per env, ``sample_random_action`` exists,
moving a disk onto its own tower is an invalid move (GEM counted it as a move), a format error at
the last turn is not also truncated, and the turn limit sets ``truncated`` only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gemgym.envs.games._common import (
    INTERNAL_STEP_REWARD,
    INVALID_ACTION_REWARD,
    SUCCESS_REWARD,
    TURN_LIMIT_TEXT,
    GameConfig,
    GameEnv,
    last_match,
)
from gemgym.errors import ConfigError
from gemgym.registry import register

__all__ = ["TowerofHanoiConfig", "TowerofHanoiEnv"]

# Possessive quantifiers: linear time on long runs of spaces (no backtracking).
_MOVE_RE = re.compile(r"\\boxed\{\s*+([ABCabc])\s*+,?+\s*+([ABCabc])\s*+\}")
_TOWERS = "ABC"
_RANDOM_PRESETS = ((3, 10), (4, 20), (5, 35))


@dataclass(frozen=True)
class TowerofHanoiConfig(GameConfig):
    """Configuration; ``num_disks=None`` or ``max_turns=None`` draw a preset each episode."""

    num_disks: int | None = 3
    max_turns: int | None = 100

    @property
    def is_random(self) -> bool:
        return self.num_disks is None or self.max_turns is None

    def validate(self) -> None:
        if self.num_disks is None or self.max_turns is None:
            return
        if not 1 <= self.num_disks <= 20:
            raise ConfigError(f"num_disks must be in 1..20, got {self.num_disks}")


class TowerofHanoiEnv(GameEnv[tuple[int, int]]):
    """Move the tower from A to C within ``max_turns`` moves (see the module docstring)."""

    config: TowerofHanoiConfig

    episode_settings = ("num_disks", "max_turns")
    num_disks: int = 3
    """The disks of the current episode's tower (the config's, or a random preset's)."""
    max_turns: int = 10

    def __init__(self, num_disks: int | None = 3, max_turns: int | None = 100) -> None:
        super().__init__(TowerofHanoiConfig(num_disks, max_turns))
        self.towers: list[list[int]] = [[], [], []]
        self._suffix = ""

    # -- rendering -----------------------------------------------------------------------------
    def _get_instructions(self) -> str:
        return (
            f"You are playing Tower of Hanoi with {self.num_disks} disks.\n"
            "You have to move the disks from tower A to tower C.\n"
            "To move a disk, type the source tower and the target tower "
            "(e.g., '\\boxed{A C}').\n"
            "Note that you can only move the top disk of a tower, and that a bigger disk cannot "
            "be placed on a smaller disk.\n"
            f"You have {self.max_turns} turns.\n"
            "As you play, the history of your moves will be displayed.\n"
        )

    def _render(self) -> str:
        rows = "".join(f"{name}: {self.towers[i]}\n" for i, name in enumerate(_TOWERS))
        return f"Here is the current state of the tower of hanoi:\n{rows}\nEnter your move."

    def get_task_suffix(self) -> str:
        return self._suffix

    # -- episode -------------------------------------------------------------------------------
    def start_episode(self) -> str:
        if self.is_random:
            self.num_disks, self.max_turns = self.rng.choice(_RANDOM_PRESETS)
        self.towers = [list(range(self.num_disks, 0, -1)), [], []]
        self._suffix = self._render()
        return self._get_instructions()

    def parse_move(self, action: str) -> tuple[int, int] | None:
        move = last_match(action, _MOVE_RE)
        if move is None:
            return None
        return _TOWERS.index(move.group(1).upper()), _TOWERS.index(move.group(2).upper())

    def play_move(self, move: tuple[int, int]) -> tuple[str, float, bool | None]:
        turn = self.turn_count
        src, dst = move
        src_name, dst_name = _TOWERS[src], _TOWERS[dst]
        reward = INVALID_ACTION_REWARD
        if not self.towers[src]:
            obs = f"At turn {turn}, you tried to move from tower {src_name}, which is empty."
        elif src == dst:
            obs = f"At turn {turn}, you tried to move a disk from tower {src_name} onto itself."
        elif self.towers[dst] and self.towers[src][-1] > self.towers[dst][-1]:
            obs = (
                f"At turn {turn}, you tried to move from tower {src_name} to tower {dst_name}, "
                f"but the top disk on tower {src_name} is larger than the top disk on tower "
                f"{dst_name}."
            )
        else:
            disk = self.towers[src].pop()
            self.towers[dst].append(disk)
            self._suffix = self._render()
            if len(self.towers[2]) == self.num_disks:
                return "Congratulations! You solved the Tower of Hanoi Puzzle", SUCCESS_REWARD, True
            obs = (
                f"At turn {turn}, you moved disk {disk} from tower {src_name} to tower {dst_name}."
            )
            reward = INTERNAL_STEP_REWARD
        return obs, reward, None

    def turn_limit(self, obs: str, reward: float) -> tuple[str, float]:
        """Partial credit: the share of the disks on tower C."""
        return TURN_LIMIT_TEXT, len(self.towers[2]) / self.num_disks

    # -- agents --------------------------------------------------------------------------------
    def sample_random_action(self) -> str:
        src, dst = self.rng.sample(_TOWERS, 2)
        return f"\\boxed{{{src} {dst}}}"

    def _next_move(self, disk: int, target: int, where: list[int]) -> tuple[int, int] | None:
        """The first move that brings disks ``1..disk`` onto ``target`` (``None``: already there)."""
        while disk > 0:
            src = where[disk]
            if src != target:
                spare = 3 - src - target
                sub = self._next_move(disk - 1, spare, where)
                return sub if sub is not None else (src, target)
            disk -= 1
        return None

    def expert_action(self) -> str:
        """The next move of the optimal solution from the current position."""
        where = [0] * (self.num_disks + 1)
        for t, tower in enumerate(self.towers):
            for d in tower:
                where[d] = t
        move = self._next_move(self.num_disks, 2, where)
        if move is None:  # already solved (episode over); any legal-looking move
            return "\\boxed{A C}"
        return f"\\boxed{{{_TOWERS[move[0]]} {_TOWERS[move[1]]}}}"


_ENTRY = "gemgym.envs.games.tower_of_hanoi:TowerofHanoiEnv"
_CARD = "Move a tower of disks from A to C"
register(
    "game:TowerofHanoi-v0-easy",
    _ENTRY,
    kwargs={"num_disks": 3, "max_turns": 10},
    description=f"{_CARD} (3 disks, 10 turns)",
)
register(
    "game:TowerofHanoi-v0-hard",
    _ENTRY,
    kwargs={"num_disks": 5, "max_turns": 35},
    description=f"{_CARD} (5 disks, 35 turns)",
)
register(
    "game:TowerofHanoi-v0-random",
    _ENTRY,
    kwargs={"num_disks": None, "max_turns": None},
    description=f"{_CARD} (3–5 disks, drawn each episode)",
)
