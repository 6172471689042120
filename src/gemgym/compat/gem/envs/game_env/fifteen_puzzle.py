"""``gem.envs.game_env.fifteen_puzzle``: GEM's ``FifteenPuzzleEnv`` over gemgym's.

GEM's constructor (``max_turns``, ``num_rows``, ``init_algo``, ``mc_rand_moves``) and the board
as GEM code reads and sets it: ``env.board`` a list of rows with ``None`` for the empty cell,
``env.blank_pos``, ``env.turn_count`` and GEM's helpers ``_move``, ``_is_solvable``,
``_is_solved``, ``_get_empty_position``, ``_generate_goal_board``. The game itself (moves,
rewards, the turn limit) is gemgym's.

``init_algo="monte_carlo"`` (GEM's default) starts from the goal and plays ``mc_rand_moves``
random moves, never undoing the previous one; ``"pure_random"`` draws uniformly among solvable
boards (gemgym's own start). The random moves come from the env's own generator (seeded by
``reset(seed)``), not from the global ``random`` as in GEM.
"""

from __future__ import annotations

from typing import Any

from gemgym.compat.gem._adapt import AdaptedEnv, warn_ignored
from gemgym.envs.games import fifteen_puzzle as _game

__all__ = ["FifteenPuzzleEnv"]

Grid = list[list[int | None]]

_OPPOSITE = {"up": "down", "down": "up", "left": "right", "right": "left"}


class FifteenPuzzleEnv(AdaptedEnv):
    """GEM's sliding puzzle (see the module docstring)."""

    gemgym_entry_point = "gemgym.envs.games.fifteen_puzzle:FifteenPuzzleEnv"
    VALID_INITIALIZATION_ALGOS = ("monte_carlo", "pure_random")

    def __init__(
        self,
        max_turns: int | None = 20,
        num_rows: int | None = 2,
        init_algo: str = "monte_carlo",
        mc_rand_moves: int = 100,
        **kwargs: Any,
    ) -> None:
        if init_algo not in self.VALID_INITIALIZATION_ALGOS:
            raise ValueError(
                f"init_algo must be one of {self.VALID_INITIALIZATION_ALGOS}, got {init_algo!r}"
            )
        if mc_rand_moves <= 0:
            raise ValueError(f"mc_rand_moves must be positive, got {mc_rand_moves}")
        seed = kwargs.pop("seed", None)
        for name in kwargs:
            warn_ignored("FifteenPuzzleEnv()", name)
        super().__init__(max_turns=max_turns, num_rows=num_rows, seed=seed)
        self._gem_init_algo = init_algo
        self._gem_mc_moves = mc_rand_moves
        self.reset()  # GEM's envs start reset

    @property
    def init_algo(self) -> str:
        return self._gem_init_algo

    @property
    def mc_rand_moves(self) -> int:
        return self._gem_mc_moves

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = super().reset(seed, **kwargs)
        if self._gem_init_algo == "monte_carlo":
            self._scramble()
            info = {**info, "suffix": self._inner.get_task_suffix()}
        return obs, info

    # -- the board in GEM's form -------------------------------------------------------------
    @property
    def _inner(self) -> Any:
        return self.gemgym_env.unwrapped

    @property
    def board(self) -> Grid:
        n = self._inner.num_rows
        flat = self._inner.board
        return [[flat[r * n + c] or None for c in range(n)] for r in range(n)]

    @board.setter
    def board(self, grid: Grid) -> None:
        self._set_flat(tuple(t or 0 for row in grid for t in row))

    @property
    def blank_pos(self) -> tuple[int, int]:
        return self._get_empty_position()

    @blank_pos.setter
    def blank_pos(self, value: tuple[int, int]) -> None:
        pass  # derived from the board, as GEM's code keeps them in step

    def _set_flat(self, flat: tuple[int, ...]) -> None:
        inner = self._inner
        inner.board = flat
        inner._suffix = inner._render()

    def _get_empty_position(self) -> tuple[int, int]:
        r, c = divmod(self._inner.board.index(0), self._inner.num_rows)
        return r, c

    def _generate_goal_board(self) -> Grid:
        n = self._inner.num_rows
        goal: list[int | None] = [*range(1, n * n), None]
        return [goal[r * n : (r + 1) * n] for r in range(n)]

    def _move(self, direction: str) -> bool:
        moved = _game._apply(self._inner.board, direction, self._inner.num_rows)
        if moved is None:
            return False
        self._set_flat(moved)
        return True

    def _is_solvable(self, board: Grid) -> bool:
        n = self._inner.num_rows
        flat = tuple(t or 0 for row in board for t in row)
        if sorted(flat) != list(range(n * n)):
            return False
        return _game.is_solvable(flat, n)

    def _is_solved(self) -> bool:
        return self.board == self._generate_goal_board()

    def _scramble(self) -> None:
        """GEM's Monte Carlo start: random moves from the goal, never undoing the last one."""
        n = self._inner.num_rows
        rng = self._inner.rng
        flat = _game._goal(n)
        last: str | None = None
        for _ in range(self._gem_mc_moves):
            options = [
                d
                for d in ("up", "down", "left", "right")
                if d != _OPPOSITE.get(last or "") and _game._apply(flat, d, n) is not None
            ]
            last = rng.choice(options)
            moved = _game._apply(flat, last, n)
            assert moved is not None  # chosen among the legal moves
            flat = moved
        self._set_flat(flat)
