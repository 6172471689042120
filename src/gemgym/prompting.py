"""What a model is shown: an env's observation together with the state it shows a human.

Many games keep the board (or the remaining guesses, the grid, the stack of disks) out of the
observation and put it in ``info["suffix"]``, as GEM does: the observation says what happened on
the last turn, the suffix shows the state to act on. :func:`gemgym play` prints both, and so must
every path that sends an observation to a model (the OpenAI agent, the token-level rollouts, the
evaluation harness, the trainers). :func:`model_view` is that one rule:

>>> model_view("Your guess 5 is too low.", {"suffix": "Guesses left: 3"})
'Your guess 5 is too low.\\nGuesses left: 3'
>>> model_view("Hello", {})
'Hello'

Chat observations (a message list) already carry what the env means to show and are returned as
they are; a multimodal observation gets the suffix appended to its text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, overload

from gemgym.core import ChatObservation, MultimodalObservation

__all__ = ["model_view"]


@overload
def model_view(observation: str, info: Mapping[str, Any] | None) -> str: ...
@overload
def model_view(
    observation: MultimodalObservation, info: Mapping[str, Any] | None
) -> MultimodalObservation: ...
@overload
def model_view(observation: ChatObservation, info: Mapping[str, Any] | None) -> ChatObservation: ...
@overload
def model_view(observation: Any, info: Mapping[str, Any] | None) -> Any: ...
def model_view(observation: Any, info: Mapping[str, Any] | None) -> Any:
    """The observation as a model should see it: with ``info["suffix"]`` appended when present.

    The suffix is not repeated when the observation already ends with it (wrappers such as
    :class:`~gemgym.wrappers.ObservationHistory` fold it in themselves).
    """
    suffix = str((info or {}).get("suffix") or "")
    if not suffix:
        return observation
    if isinstance(observation, str):
        return _join(observation, suffix)
    if isinstance(observation, MultimodalObservation):
        return MultimodalObservation(_join(observation.text, suffix), observation.images)
    return observation


def _join(text: str, suffix: str) -> str:
    if text.rstrip().endswith(suffix.strip()):
        return text
    return f"{text}\n{suffix}" if text else suffix
