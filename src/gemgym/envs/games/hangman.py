r"""Hangman: find a hidden word by guessing its letters (or the whole word).

============  =================================================================================
ids           ``game:Hangman-v0-easy`` (3 letters, 10 turns), ``game:Hangman-v0-hard`` (7
              letters, 20 turns), ``game:Hangman-v0-random`` (each episode 3–6 letters, turns
              ``round(10 + 2.5 × (length − 3))``)
observation   reset: the rules; step: ``"At turn 2, you successfully guessed a letter 'E' that is
              in the secret word."``; ``info["suffix"]`` = the grid (column labels ``C00 C01 …``
              over the word, ``_`` for hidden letters) and ``"Enter your guess."``
action        any text; the last ``\boxed{L}`` (one letter) or ``\boxed{WORD}`` (the whole word),
              any case
reward        a letter in the word: 0.5 × (letters it reveals) / length; the right word: 0.5 ×
              (share of letters still hidden) + 0.5, and ``terminated``; revealing the last
              letter also wins (+0.5, ``terminated``): a won game sums to 1.0; a missing letter or
              a wrong word: 0.0; a repeated letter or a word of the wrong length: 0.0 (invalid
              move); no ``\boxed{letters}``: −0.1 and ``terminated``; the turn limit:
              ``truncated``
expert        letter frequency over the words of the list that fit the grid and the misses: it
              guesses the word when one fits, else the letter most of them contain
============  =================================================================================

Words ship with the package (``games/data/``, see its README): 931 common words of 3–8 letters
(GEM: NLTK's ``en-basic``), or, with ``hardcore=True``, 9,297 less common words of 5–9 letters
(GEM: NLTK's large ``en`` list).

Differences from upstream GEM (bugs fixed): randomness is per env; revealing every letter wins the
game (GEM kept going until the word was typed out); the rules' examples are no longer swapped (GEM
showed a word as the letter example and vice versa); the random preset has a turn limit (GEM's
compared with ``None``); nothing is downloaded; a format error at the last turn is not also
truncated, and the turn limit sets ``truncated`` only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gemgym.envs.games._common import (
    INTERNAL_STEP_REWARD,
    INVALID_ACTION_REWARD,
    SUCCESS_REWARD,
    GameConfig,
    GameEnv,
    last_boxed_match,
    words_by_length,
)
from gemgym.errors import ConfigError
from gemgym.registry import register

__all__ = ["HangmanConfig", "HangmanEnv"]

_HEADERS: dict[int, str] = {}  # the column labels of a board, by length
_GUESS_RE = re.compile(r"\\boxed\{\s*([a-zA-Z]+)\s*\}")
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_ENGLISH_ORDER = "ETAOINSHRDLCUMWFGYPBVKJXQZ"
_RANDOM_LENGTHS = {False: (3, 6), True: (5, 8)}


def _word_file(hardcore: bool) -> str:
    return "words_rare.txt" if hardcore else "words_common.txt"


def _turns_for(length: int) -> int:
    return int(10 + 2.5 * (length - 3) + 0.5)


@dataclass(frozen=True)
class HangmanConfig(GameConfig):
    """Configuration; ``word_length=None`` draws a length each episode (3–6, or 5–8 with
    ``hardcore``) and ``max_turns=None`` derives the turns from it."""

    word_length: int | None = 5
    hardcore: bool = False
    max_turns: int | None = 20

    @property
    def is_random(self) -> bool:
        return self.word_length is None

    def validate(self) -> None:
        if self.word_length is not None:
            lengths = sorted(words_by_length(_word_file(self.hardcore)))
            if self.word_length not in lengths:
                raise ConfigError(
                    f"no {'hardcore ' if self.hardcore else ''}words of {self.word_length} "
                    f"letters; word_length must be one of {lengths} (or None)"
                )


class HangmanEnv(GameEnv[str]):
    """Find the hidden word within ``max_turns`` turns (see the module docstring)."""

    config: HangmanConfig

    format_error_detail = "you did not provide a valid guess"

    episode_settings = ("word_length", "max_turns")
    word_length: int = 5
    """The length of the current episode's word (the config's, or drawn)."""

    def __init__(
        self,
        word_length: int | None = 5,
        hardcore: bool = False,
        max_turns: int | None = 20,
    ) -> None:
        super().__init__(HangmanConfig(word_length, hardcore, max_turns))
        if max_turns is None:  # derived from the length (again at each reset)
            self.max_turns = _turns_for(self.word_length)
        self.secret_word = ""
        self.board: list[str] = []
        self.guessed_letters: set[str] = set()
        self.wrong_words: set[str] = set()

    @property
    def hardcore(self) -> bool:
        """Whether the words come from the large list of less common words (the config's)."""
        return self.config.hardcore

    def _words(self) -> tuple[str, ...]:
        return words_by_length(_word_file(self.hardcore)).get(self.word_length, ())

    def _get_instructions(self) -> str:
        example_word = self._words()[0]
        return (
            "You are playing Hangman.\n"
            f"The objective of the game is to guess the {self.word_length}-letter word by "
            "providing one letter guesses or the entire word.\n"
            "The cells that need to be populated with letters are represented by '_'.\n\n"
            "There are two ways you can answer. You can provide one letter guesses in the format "
            f"of \\boxed{{E}}, or you can guess the entire word in the format of "
            f"\\boxed{{{example_word}}}.\n"
            "If the given letter is in the word, it will be revealed in the grid.\n"
            "If the given word is correct, or every letter is revealed, you win.\n"
            "As you play, the history of your choices will be appended below. Use the "
            "information to figure out the word and win.\n"
            "Some rules:\n"
            "1. You can only guess one letter/word at a time.\n"
            f"2. You have to win within {self.max_turns} turns.\n\n"
        )

    def _render_board(self) -> str:
        board = self.board
        header = _HEADERS.get(len(board))
        if header is None:
            header = _HEADERS[len(board)] = " ".join(f"C{i:02}" for i in range(len(board)))
        # each cell "  x ", joined in one call
        return header + "\n" + ("  " + "   ".join(board) + " " if board else "")

    def get_task_suffix(self) -> str:
        return (
            f"Here is the current state of the Hangman grid:\n{self._render_board()}\n\n"
            "Enter your guess."
        )

    def start_episode(self) -> str:
        rng = self.rng
        if self.config.word_length is None:
            self.word_length = rng.randint(*_RANDOM_LENGTHS[self.hardcore])
        if self.config.max_turns is None:
            self.max_turns = _turns_for(self.word_length)
        words = self._words()
        self.secret_word = words[rng.randrange(len(words))]
        self.board = ["_"] * self.word_length
        self.guessed_letters = set()
        self.wrong_words = set()
        return self._get_instructions()

    def parse_move(self, action: str) -> str | None:
        match = last_boxed_match(action, _GUESS_RE)
        return match.group(1).upper() if match is not None else None

    def play_move(self, guess: str) -> tuple[str, float, bool | None]:
        turn = self.turn_count
        secret = self.secret_word
        n = len(secret)
        reward = INVALID_ACTION_REWARD
        if len(guess) > 1:
            if guess == secret:
                hidden = self.board.count("_") / n
                self.board = list(secret)
                obs = f"Congratulations! You guessed the word '{secret}' correctly!"
                reward = 0.5 * hidden + 0.5 * SUCCESS_REWARD
                return obs, reward, True
            if len(guess) != n:
                obs = (
                    f"At turn {turn}, you guessed '{guess}', which is of length {len(guess)}, "
                    f"but the secret word is of length {n}."
                )
            else:
                self.wrong_words.add(guess)
                obs = f"At turn {turn}, you guessed '{guess}', which is incorrect."
                reward = INTERNAL_STEP_REWARD
        elif guess in self.guessed_letters:
            obs = f"At turn {turn}, you guessed '{guess}', which has been already guessed before."
        else:
            self.guessed_letters.add(guess)
            if guess in secret:
                revealed = 0
                for i, ch in enumerate(secret):
                    if ch == guess:
                        self.board[i] = ch
                        revealed += 1
                reward = 0.5 * revealed / n
                if "_" not in self.board:
                    obs = f"Congratulations! You revealed the word '{secret}'."
                    reward += 0.5 * SUCCESS_REWARD
                    return obs, reward, True
                obs = (
                    f"At turn {turn}, you successfully guessed a letter '{guess}' that is in the "
                    "secret word."
                )
            else:
                obs = f"At turn {turn}, you guessed a letter '{guess}' that is not in the secret word."
                reward = INTERNAL_STEP_REWARD
        return obs, reward, None

    def sample_random_action(self) -> str:
        rng = self.rng
        if rng.random() < 0.5:
            words = self._words()
            return "\\boxed{" + words[rng.randrange(len(words))] + "}"
        return "\\boxed{" + _LETTERS[rng.randrange(26)] + "}"

    def candidates(self) -> list[str]:
        """Words of the list that fit the grid, the missed letters and the wrong words."""
        board = self.board
        guessed = self.guessed_letters
        out = []
        for word in self._words():
            if word in self.wrong_words:
                continue
            for ch, shown in zip(word, board, strict=True):
                if (shown != "_" and ch != shown) or (shown == "_" and ch in guessed):
                    break
            else:
                out.append(word)
        return out

    def expert_action(self) -> str:
        """The word if only one fits, else the unguessed letter most fitting words contain."""
        cands = self.candidates()
        if len(cands) == 1:
            return "\\boxed{" + cands[0] + "}"
        counts: dict[str, int] = {}
        for word in cands:
            for ch in set(word):
                if ch not in self.guessed_letters:
                    counts[ch] = counts.get(ch, 0) + 1
        if counts:
            best = max(sorted(counts), key=lambda ch: counts[ch])
            return "\\boxed{" + best + "}"
        for ch in _ENGLISH_ORDER:  # the word is not in the list: plain English frequency
            if ch not in self.guessed_letters:
                return "\\boxed{" + ch + "}"
        return "\\boxed{" + self.board[0].replace("_", "A") + "}"


_ENTRY = "gemgym.envs.games.hangman:HangmanEnv"
_CARD = "Find a hidden word letter by letter"
register(
    "game:Hangman-v0-easy",
    _ENTRY,
    kwargs={"word_length": 3, "hardcore": False, "max_turns": 10},
    description=f"{_CARD} (3 letters, 10 turns)",
)
register(
    "game:Hangman-v0-hard",
    _ENTRY,
    kwargs={"word_length": 7, "hardcore": False, "max_turns": 20},
    description=f"{_CARD} (7 letters, 20 turns)",
)
register(
    "game:Hangman-v0-random",
    _ENTRY,
    kwargs={"word_length": None, "hardcore": False, "max_turns": None},
    description=f"{_CARD} (3–6 letters, random each episode)",
)
