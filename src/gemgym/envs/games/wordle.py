r"""Wordle: find a secret word from green/yellow/grey letter feedback.

============  =================================================================================
ids           ``game:Wordle-v0-easy`` (3 letters, 15 turns), ``game:Wordle-v0-hard`` (5 letters,
              25 turns), ``game:Wordle-v0-random`` (each episode 3–5 letters, 5 turns a letter)
observation   reset: the rules; step: ``"At turn 2, you guessed CRANE.\nFeedback:\nC R A N E\n
              G X Y X X"`` (``G`` right letter and place, ``Y`` in the word elsewhere, ``X`` not
              in the word); ``info["suffix"]`` = ``"Enter your guess."``
action        any text; the last ``\boxed{WORD}`` (letters, any case, spaces between letters
              ignored) is the guess
reward        0.5 / length for each position that turns green for the first time, plus 0.5 when
              the word is found (``terminated``; an episode sums to at most 1.0); a guess of the
              wrong length, not in the dictionary (``only_real_words``) or repeated: 0.0 (invalid
              move, the episode goes on); no ``\boxed{WORD}``: −0.1 and ``terminated``; the turn
              limit: ``truncated``
expert        consistent-guess: among the secret words that agree with all feedback so far, the
              one whose letters are most frequent at their positions (solves every preset)
============  =================================================================================

Feedback follows Wordle's duplicate-letter rule: greens are marked first, then each yellow uses up
one unmatched occurrence of that letter in the secret, left to right.

Words ship with the package (``games/data/``, see its README): secrets come from 931 common words
(GEM: NLTK's 850-word ``en-basic``), and a guess is a real word if it is in SCOWL's size-50 list
or among the secrets.

Differences from upstream GEM (bugs fixed): randomness is per env; ``only_real_words`` is enforced
(GEM ignored it: any letter string was accepted); the feedback is a readable line, not a printed
Python list; the word lists load once per process instead of being filtered again at every reset
(and nothing is downloaded); a format error at the last turn is not also truncated, and the turn
limit sets ``truncated`` only. The random preset draws 3–5 letters with ``5 × length`` turns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gemgym.core import excerpt
from gemgym.envs.games._common import (
    INVALID_ACTION_REWARD,
    SUCCESS_REWARD,
    GameConfig,
    GameEnv,
    last_boxed_match,
    words_by_length,
)
from gemgym.errors import ConfigError
from gemgym.registry import register

__all__ = ["WordleConfig", "WordleEnv", "wordle_feedback"]

# Possessive quantifiers: no backtracking, so long runs of letters or spaces stay linear.
_GUESS_RE = re.compile(r"\\boxed\{\s*+([a-zA-Z]++(?:\s++[a-zA-Z]++)*+)\s*+\}")
_SUFFIX = "Enter your guess."
_MIN_LEN, _MAX_LEN = 3, 8
_VALID: dict[int, frozenset[str]] = {}


def _secrets(length: int) -> tuple[str, ...]:
    return words_by_length("words_common.txt").get(length, ())


def _valid_words(length: int) -> frozenset[str]:
    found = _VALID.get(length)
    if found is None:
        found = frozenset(words_by_length("words_valid.txt.gz").get(length, ())) | frozenset(
            _secrets(length)
        )
        _VALID[length] = found
    return found


def wordle_feedback(secret: str, guess: str) -> str:
    """Wordle's feedback for ``guess`` (same length as ``secret``): one of ``G``/``Y``/``X`` per letter.

    Greens are marked first; then, left to right, a letter is yellow while the secret still has an
    unmatched occurrence of it.
    """
    if secret == guess:
        return "G" * len(secret)
    if len(secret) != len(guess):
        raise ValueError(f"secret and guess differ in length ({len(secret)} and {len(guess)})")
    if set(guess).isdisjoint(secret):  # no letter in common: all grey (most random guesses)
        return "X" * len(guess)
    unmatched = [s for s, g in zip(secret, guess, strict=True) if s != g]
    marks = ""
    for s, g in zip(secret, guess, strict=True):
        if s == g:
            marks += "G"
        elif g in unmatched:
            marks += "Y"
            unmatched.remove(g)
        else:
            marks += "X"
    return marks


@dataclass(frozen=True)
class WordleConfig(GameConfig):
    """Configuration; ``word_length=None`` draws 3–5 letters each episode, ``max_turns=None``
    gives ``5 × length`` turns."""

    word_length: int | None = 5
    only_real_words: bool = True
    max_turns: int | None = 20

    @property
    def is_random(self) -> bool:
        return self.word_length is None

    def validate(self) -> None:
        if self.word_length is not None and not _MIN_LEN <= self.word_length <= _MAX_LEN:
            raise ConfigError(
                f"word_length must be in {_MIN_LEN}..{_MAX_LEN} (or None), got {self.word_length}"
            )


class WordleEnv(GameEnv[str]):
    """Guess the secret word within ``max_turns`` turns (see the module docstring)."""

    task_suffix = _SUFFIX

    config: WordleConfig

    format_error_detail = "you did not provide a valid guess"

    episode_settings = ("word_length", "max_turns")
    word_length: int = 5
    """The length of the current episode's word (the config's, or drawn)."""

    def __init__(
        self,
        word_length: int | None = 5,
        only_real_words: bool = True,
        max_turns: int | None = 20,
    ) -> None:
        super().__init__(WordleConfig(word_length, only_real_words, max_turns))
        if max_turns is None:  # derived from the length (again at each reset)
            self.max_turns = 5 * self.word_length
        self.secret_word = ""
        self.previous_guesses: set[str] = set()
        self.history: list[tuple[str, str]] = []
        self.greens: list[bool] = []
        self._instructions: dict[tuple[int, int], str] = {}
        self._expert_cache: tuple[int, tuple[str, ...]] = (0, ())
        self._pool = _secrets(self.word_length)

    @property
    def only_real_words(self) -> bool:
        """Whether a guess must be a dictionary word (the config's)."""
        return self.config.only_real_words

    def _get_instructions(self) -> str:
        key = (self.word_length, self.max_turns)
        text = self._instructions.get(key)
        if text is None:
            example = _secrets(self.word_length)[0]
            text = (
                "You are playing Wordle.\n"
                f"You have to guess the secret {self.word_length}-letter word within "
                f"{self.max_turns} turns.\n"
                "After you enter your guess, I will mark your guess as follows:\n"
                "  - G (green): correct letter in the correct position\n"
                "  - Y (yellow): letter exists in the word but in the wrong position\n"
                "  - X (wrong): letter is not in the word\n"
                + ("Every guess must be a real English word.\n" if self.only_real_words else "")
                + "After thinking, format your final answer inside \\boxed{...}, for example, "
                f"\\boxed{{{example}}}.\n"
                "As you play, the history of your guesses will be appended below. Use the "
                "information to complete the game before you run out of guesses.\n"
            )
            self._instructions[key] = text
        return text

    def start_episode(self) -> str:
        rng = self.rng
        config = self.config
        if config.word_length is None:
            self.word_length = rng.randint(3, 5)
        if config.max_turns is None:
            self.max_turns = 5 * self.word_length
        pool = self._pool = _secrets(self.word_length)
        self.secret_word = pool[rng.randrange(len(pool))]
        self.previous_guesses = set()
        self.history = []
        self.greens = [False] * self.word_length
        self._expert_cache = (0, pool)
        return self._get_instructions()

    def parse_move(self, action: str) -> str | None:
        match = last_boxed_match(action, _GUESS_RE)
        if match is None:
            return None
        guess = match.group(1)
        return (guess if guess.isalpha() else "".join(guess.split())).upper()

    def play_move(self, guess: str) -> tuple[str, float, bool | None]:
        turn = self.turn_count
        reward = INVALID_ACTION_REWARD
        n = self.word_length
        if len(guess) != n:
            obs = (
                f"At turn {turn}, you guessed {excerpt(guess)}, which has {len(guess)} letters "
                f"but the secret word has {n} letters."
            )
        elif self.config.only_real_words and guess not in _valid_words(n):
            obs = (
                f"At turn {turn}, you guessed {guess}, which is not a valid English word. "
                "All guesses must be real words."
            )
        elif guess in self.previous_guesses:
            obs = f"At turn {turn}, you guessed {guess}, which has been already guessed before."
        else:
            self.previous_guesses.add(guess)
            marks = wordle_feedback(self.secret_word, guess)
            self.history.append((guess, marks))
            new = 0
            if "G" in marks:
                greens = self.greens
                for i, m in enumerate(marks):
                    if m == "G" and not greens[i]:
                        greens[i] = True
                        new += 1
            reward = 0.5 * new / n
            if guess == self.secret_word:
                obs = (
                    f"Congratulations! You guessed the secret word {self.secret_word} "
                    f"in {turn} turns."
                )
                return obs, reward + 0.5 * SUCCESS_REWARD, True
            obs = (
                f"At turn {turn}, you guessed {guess}.\nFeedback:\n"
                f"{' '.join(guess)}\n{' '.join(marks)}"
            )
        return obs, reward, None

    def sample_random_action(self) -> str:
        pool = self._pool
        return "\\boxed{" + pool[self.rng.randrange(len(pool))] + "}"

    def candidates(self) -> tuple[str, ...]:
        """The secret words that agree with every feedback received so far."""
        done, cands = self._expert_cache
        if done > len(self.history) or not cands:
            done, cands = 0, _secrets(self.word_length)
        for guess, marks in self.history[done:]:
            cands = tuple(w for w in cands if wordle_feedback(w, guess) == marks)
        self._expert_cache = (len(self.history), cands)
        return cands

    def expert_action(self) -> str:
        """Consistent guess: the candidate with the most frequent letters at their positions."""
        cands = [w for w in self.candidates() if w not in self.previous_guesses]
        if not cands:  # cannot happen while the secret is among the secrets; stay well-formed
            return self.sample_random_action()
        freq: list[dict[str, int]] = [{} for _ in range(self.word_length)]
        for w in cands:
            for i, ch in enumerate(w):
                freq[i][ch] = freq[i].get(ch, 0) + 1
        best = max(cands, key=lambda w: (sum(freq[i][ch] for i, ch in enumerate(w)), len(set(w))))
        return "\\boxed{" + best + "}"


_ENTRY = "gemgym.envs.games.wordle:WordleEnv"
_CARD = "Find a secret word from green/yellow/grey letter feedback"
register(
    "game:Wordle-v0-easy",
    _ENTRY,
    kwargs={"word_length": 3, "only_real_words": True, "max_turns": 15},
    description=f"{_CARD} (3 letters, 15 turns)",
)
register(
    "game:Wordle-v0-hard",
    _ENTRY,
    kwargs={"word_length": 5, "only_real_words": True, "max_turns": 25},
    description=f"{_CARD} (5 letters, 25 turns)",
)
register(
    "game:Wordle-v0-random",
    _ENTRY,
    kwargs={"word_length": None, "only_real_words": True, "max_turns": None},
    description=f"{_CARD} (3–5 letters, 5 turns a letter)",
)
