r"""Sokoban: push every box onto a target.

============  =================================================================================
ids           ``game:Sokoban-v0-easy`` (6×6 room, 2 boxes, 20 turns), ``game:Sokoban-v0-hard``
              (8×8, 4 boxes, 50 turns), ``game:Sokoban-v0-random`` (each episode 6×6/2/20 or
              8×8/5/50, as GEM)
observation   reset: the rules and legend; step: ``"At turn 4, you pushed a box while you moved
              left."``; ``info["suffix"]`` = the room (``#`` wall, ``_`` floor, ``O`` target,
              ``X`` box, ``√`` box on a target, ``P`` you) and ``"Enter your move."``
action        any text; the last ``\boxed{up|down|left|right}`` (any case); walking into a box
              pushes it if the cell behind it is free
reward        all boxes on targets: 1.0 and ``terminated``; a move or push: 0.0; walking into a
              wall or pushing a box into a wall or another box: 0.0 (nothing moves); no
              parsable move: −0.1 and ``terminated``; at the turn limit: ``truncated`` with
              partial credit (boxes on targets) / (boxes)
expert        A* over (player, boxes) states, counting moves, with the sum of each box's distance
              to its nearest target as heuristic (admissible, so plans are shortest); at most
              100,000 expanded states, then the level's generation path
============  =================================================================================

Levels are generated solvable within the turn limit: a random walk carves the room, boxes start
on the targets, and the level is played *backwards* (the player walks and pulls boxes) for at
most ``max_turns`` moves; of several such walks the one that displaces the boxes most is kept,
with every box off its target. Replaying the walk forwards solves the level, so the shortest
solution never exceeds the turn limit.

Differences from upstream GEM (bugs fixed): randomness is per env (GEM mixed the global state
with per-call seeds), every level is solvable in ``max_turns`` moves (GEM's reverse search had no
such bound), no ``**_`` kwargs (GEM's random preset passed an ignored ``room_size``), a format
error at the last turn is not also truncated and the turn limit sets ``truncated`` only.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from gemgym.envs.games._common import (
    DIRECTIONS,
    INTERNAL_STEP_REWARD,
    INVALID_ACTION_REWARD,
    SUCCESS_REWARD,
    TURN_LIMIT_TEXT,
    GameConfig,
    GameEnv,
    parse_direction,
)
from gemgym.errors import ConfigError
from gemgym.registry import register

__all__ = ["SokobanConfig", "SokobanEnv"]

_RANDOM_PRESETS = (((6, 6), 2, 20), ((8, 8), 5, 50))
_SEARCH_BUDGET = 100_000
_REVERSE_WALKS = 8
_OPPOSITE = {"up": "down", "down": "up", "left": "right", "right": "left"}

State = tuple[int, frozenset[int]]


@dataclass(frozen=True)
class SokobanConfig(GameConfig):
    """Configuration; any of ``dim_room``/``max_turns``/``num_boxes`` ``None`` draws a preset."""

    dim_room: tuple[int, int] | None = (6, 6)
    max_turns: int | None = 100
    num_boxes: int | None = 3

    @property
    def is_random(self) -> bool:
        return self.dim_room is None or self.max_turns is None or self.num_boxes is None

    def validate(self) -> None:
        if self.dim_room is None or self.max_turns is None or self.num_boxes is None:
            return
        if len(self.dim_room) != 2 or not all(5 <= d <= 16 for d in self.dim_room):
            raise ConfigError(
                f"dim_room must be (rows, cols) with each in 5..16, got {self.dim_room}"
            )
        rows, cols = self.dim_room
        if not 1 <= self.num_boxes <= (rows - 2) * (cols - 2) // 4:
            raise ConfigError(
                f"num_boxes must be in 1..{(rows - 2) * (cols - 2) // 4} for a "
                f"{rows}x{cols} room, got {self.num_boxes}"
            )


class SokobanEnv(GameEnv[str]):
    """Push the boxes onto the targets within ``max_turns`` moves (see the module docstring)."""

    config: SokobanConfig

    format_error_detail = "your submitted action is not valid"

    episode_settings = ("dim_room", "max_turns", "num_boxes")
    dim_room: tuple[int, int] = (6, 6)
    """The (rows, cols) of the current episode's room (the config's, or a random preset's)."""
    max_turns: int = 20
    num_boxes: int = 2
    """The boxes of the current episode (the config's, or a random preset's)."""

    def __init__(
        self,
        dim_room: tuple[int, int] | None = (6, 6),
        max_turns: int | None = 100,
        num_boxes: int | None = 3,
    ) -> None:
        if isinstance(dim_room, list):  # JSON and the CLI give lists
            dim_room = tuple(dim_room)
        super().__init__(SokobanConfig(dim_room, max_turns, num_boxes))
        self.walls: frozenset[int] = frozenset()
        self.targets: frozenset[int] = frozenset()
        self.boxes: frozenset[int] = frozenset()
        self.player = 0
        self._suffix = ""
        self._plan: list[str] = []
        self._plan_state: State | None = None
        self._generation_plan: list[str] = []
        self._start_state: State | None = None

    @property
    def width(self) -> int:
        """Number of columns."""
        return self.dim_room[1]

    def _step_of(self, direction: str) -> int:
        return {"up": -self.width, "down": self.width, "left": -1, "right": 1}[direction]

    # -- generation ----------------------------------------------------------------------------
    def _carve(self) -> set[int]:
        rows, cols = self.dim_room
        rng = self.rng
        r, c = rng.randint(1, rows - 2), rng.randint(1, cols - 2)
        floor = {r * cols + c}
        dr, dc = rng.choice(((1, 0), (-1, 0), (0, 1), (0, -1)))
        for _ in range(int(1.7 * (rows + cols)) * 2):
            if rng.random() < 0.35:
                dr, dc = rng.choice(((1, 0), (-1, 0), (0, 1), (0, -1)))
            r = min(max(r + dr, 1), rows - 2)
            c = min(max(c + dc, 1), cols - 2)
            floor.add(r * cols + c)
            if rng.random() < 0.5:  # widen the corridor sideways
                sr = min(max(r + dc, 1), rows - 2)
                sc = min(max(c + dr, 1), cols - 2)
                floor.add(sr * cols + sc)
        return floor

    def _reverse_walk(
        self, floor: set[int], player: int
    ) -> tuple[int, frozenset[int], list[str], int] | None:
        """Play backwards (walk, pull) from the solved state for at most ``max_turns`` moves.

        Returns the best start found on the way (every box off its target, most displaced
        boxes) with its forward solution, or ``None``.
        """
        rng = self.rng
        width = self.width
        origin = {b: b for b in self.targets}  # box cell -> the target it started on
        walk: list[str] = []
        best: tuple[int, frozenset[int], list[str], int] | None = None
        steps = [(d, self._step_of(d)) for d in DIRECTIONS]
        while len(walk) < self.max_turns:
            free = [
                (d, st) for d, st in steps if player + st in floor and player + st not in origin
            ]
            if not free:
                break
            pulls = [(d, st) for d, st in free if player - st in origin]
            if pulls and rng.random() < 0.7:
                direction, step = pulls[int(rng.random() * len(pulls))]
                pulled = True
            else:
                direction, step = free[int(rng.random() * len(free))]
                pulled = False
            if pulled:
                origin[player] = origin.pop(player - step)
            player += step
            walk.append(_OPPOSITE[direction])
            if pulled and not any(cell in self.targets for cell in origin):
                score = sum(
                    abs(a // width - b // width) + abs(a % width - b % width)
                    for a, b in origin.items()
                )
                if best is None or score > best[3]:
                    best = (player, frozenset(origin), walk[::-1], score)
        return best

    def _generate(self) -> None:
        rng = self.rng
        for _ in range(1000):
            floor = self._carve()
            if len(floor) < 2 * self.num_boxes + 4:
                continue
            cells = sorted(floor)
            picks = rng.sample(cells, self.num_boxes + 1)
            self.targets = frozenset(picks[1:])
            best: tuple[int, frozenset[int], list[str], int] | None = None
            for _walk in range(_REVERSE_WALKS):
                found = self._reverse_walk(floor, picks[0])
                if found is not None and (best is None or found[3] > best[3]):
                    best = found
            if best is None:
                continue
            rows, cols = self.dim_room
            self.walls = frozenset(i for i in range(rows * cols) if i not in floor)
            self.player, self.boxes, self._generation_plan, _ = best
            self._start_state = (self.player, self.boxes)
            return
        raise ConfigError(  # pragma: no cover - presets always succeed
            f"could not generate a {self.dim_room} Sokoban room with {self.num_boxes} boxes; "
            "use a larger room or fewer boxes"
        )

    # -- rendering -----------------------------------------------------------------------------
    def _get_instructions(self) -> str:
        return (
            "You are solving the Sokoban puzzle. You are the player and you need to push all "
            "boxes to targets.\n"
            "When you are right next to a box, you can push it by moving in the same direction.\n"
            "You cannot push a box through a wall or another box, and you cannot pull a box.\n"
            f"you have to complete the puzzle within {self.max_turns} turns.\n"
            "On the board, objects are represented as:\n"
            "- The player (you) appears as 'P'\n"
            "- Walls are represented with '#'\n"
            "- Boxes are marked as 'X'\n"
            "- Empty goals are shown with 'O'\n"
            "- Boxes on goals are visualized with '√'\n"
            "- Empty floor is shown as '_'\n\n"
            "To submit your move, type the command in \\boxed{}.\n"
            "For example: \\boxed{up} to move up.\n"
            "Use logic and deduction to push all boxes onto the target positions!"
        )

    def _render(self) -> str:
        rows, cols = self.dim_room
        lines = []
        for r in range(rows):
            chars = []
            for i in range(r * cols, (r + 1) * cols):
                if i in self.walls:
                    chars.append("#")
                elif i == self.player:
                    chars.append("P")
                elif i in self.boxes:
                    chars.append("√" if i in self.targets else "X")
                else:
                    chars.append("O" if i in self.targets else "_")
            lines.append(" ".join(chars) + "\n")
        return f"Here is the current board layout:\n{''.join(lines)}\nEnter your move."

    def get_task_suffix(self) -> str:
        return self._suffix

    # -- episode -------------------------------------------------------------------------------
    def start_episode(self) -> str:
        if self.is_random:
            self.dim_room, self.num_boxes, self.max_turns = self.rng.choice(_RANDOM_PRESETS)
        self._generate()
        self._plan, self._plan_state = [], None
        self._suffix = self._render()
        return self._get_instructions()

    def parse_move(self, action: str) -> str | None:
        return parse_direction(action)

    def play_move(self, direction: str) -> tuple[str, float, bool | None]:
        turn = self.turn_count
        step = self._step_of(direction)
        nxt = self.player + step
        reward = INVALID_ACTION_REWARD
        blocked = nxt in self.walls or (
            nxt in self.boxes and (nxt + step in self.walls or nxt + step in self.boxes)
        )
        if blocked:
            obs = (
                f"At turn {turn}, you cannot move {direction} - you would collide with wall or "
                "other boxes!"
            )
        else:
            pushed = nxt in self.boxes
            if pushed:
                self.boxes = (self.boxes - {nxt}) | {nxt + step}
            self.player = nxt
            self._suffix = self._render()
            if self.boxes == self.targets:
                obs = "Congratulations! You have solved the Sokoban puzzle!"
                return obs, SUCCESS_REWARD, True
            obs = f"At turn {turn}, you {'pushed a box while you ' if pushed else ''}moved {direction}."
            reward = INTERNAL_STEP_REWARD
        return obs, reward, None

    def turn_limit(self, obs: str, reward: float) -> tuple[str, float]:
        """Partial credit: the share of the boxes on targets."""
        return TURN_LIMIT_TEXT, len(self.boxes & self.targets) / self.num_boxes

    # -- agents --------------------------------------------------------------------------------
    def sample_random_action(self) -> str:
        return "\\boxed{" + DIRECTIONS[int(self.rng.random() * 4)] + "}"

    def _distance_to_targets(self, box: int) -> int:
        w = self.width
        return min(abs(box // w - t // w) + abs(box % w - t % w) for t in self.targets)

    def solve(self) -> list[str] | None:
        """A shortest move sequence from the current state (A*), ``None`` over budget."""
        start: State = (self.player, self.boxes)
        h_cache: dict[int, int] = {}

        def h(boxes: frozenset[int]) -> int:
            total = 0
            for b in boxes:
                d = h_cache.get(b)
                if d is None:
                    d = h_cache[b] = self._distance_to_targets(b)
                total += d
            return total

        steps = [(d, self._step_of(d)) for d in DIRECTIONS]
        walls, targets = self.walls, self.targets
        parent: dict[State, tuple[State, str] | None] = {start: None}
        heap = [(h(start[1]), 0, 0, start)]
        seen_g = {start: 0}
        tick = 0
        while heap and tick < _SEARCH_BUDGET:
            _, g, _, state = heapq.heappop(heap)
            player, boxes = state
            if boxes == targets:
                plan: list[str] = []
                link = parent[state]
                while link is not None:
                    state, move = link
                    plan.append(move)
                    link = parent[state]
                return plan[::-1]
            if g > seen_g[state]:
                continue
            for direction, step in steps:
                nxt = player + step
                if nxt in walls:
                    continue
                new_boxes = boxes
                if nxt in boxes:
                    dest = nxt + step
                    if dest in walls or dest in boxes:
                        continue
                    new_boxes = (boxes - {nxt}) | {dest}
                new_state = (nxt, new_boxes)
                if seen_g.get(new_state, 1 << 30) <= g + 1:
                    continue
                seen_g[new_state] = g + 1
                parent[new_state] = (state, direction)
                tick += 1
                heapq.heappush(heap, (g + 1 + h(new_boxes), g + 1, tick, new_state))
        return None

    def expert_action(self) -> str:
        """The next move of a shortest solution from the current state."""
        state = (self.player, self.boxes)
        if self._plan_state != state or not self._plan:
            plan = self.solve()
            if plan is None:
                plan = list(self._generation_plan) if state == self._start_state else []
            self._plan = plan
        if not self._plan:
            return self.sample_random_action()
        direction = self._plan.pop(0)
        step = self._step_of(direction)
        nxt = self.player + step
        boxes = (self.boxes - {nxt}) | {nxt + step} if nxt in self.boxes else self.boxes
        self._plan_state = (nxt, boxes)
        return "\\boxed{" + direction + "}"


_ENTRY = "gemgym.envs.games.sokoban:SokobanEnv"
_CARD = "Push every box onto a target"
register(
    "game:Sokoban-v0-easy",
    _ENTRY,
    kwargs={"dim_room": (6, 6), "num_boxes": 2, "max_turns": 20},
    description=f"{_CARD} (6×6, 2 boxes, 20 turns)",
)
register(
    "game:Sokoban-v0-hard",
    _ENTRY,
    kwargs={"dim_room": (8, 8), "num_boxes": 4, "max_turns": 50},
    description=f"{_CARD} (8×8, 4 boxes, 50 turns)",
)
register(
    "game:Sokoban-v0-random",
    _ENTRY,
    kwargs={"dim_room": None, "num_boxes": None, "max_turns": None},
    description=f"{_CARD} (6×6/2 boxes or 8×8/5 boxes, drawn each episode)",
)
