"""The token episode record and the sampling settings, without a model."""

from __future__ import annotations

from pathlib import Path

import pytest

from gemgym.errors import ConfigError
from gemgym.llm.backend import Generation, SamplingParams
from gemgym.llm.record import TokenEpisode, TokenTurn, read_token_jsonl, write_token_jsonl


def _episode() -> TokenEpisode:
    ep = TokenEpisode(
        "game:X",
        3,
        7,
        "start",
        model="m",
        prompt_ids=[1, 2, 3],
        prompt_messages=[{"role": "user", "content": "start"}],
        group=1,
    )
    ep.turns.append(
        TokenTurn(
            "start",
            "call",
            action_ids=[10, 11],
            logprobs=[-0.5, -0.25],
            finish_reason="stop",
            reward=0.1,
            next_ids=[4, 5],
            next_observation="tool says 4",
            next_role="tool",
            info={"use_tool": True},
        )
    )
    ep.turns.append(
        TokenTurn(
            "tool says 4",
            "4",
            action_ids=[12],
            finish_reason="length",
            reward=1.0,
            terminated=True,
            next_ids=[6],
            retokenized=True,
            info={"success": True},
        )
    )
    ep.finish_reason = "env_end"
    return ep


def test_views_line_up_with_the_ids() -> None:
    ep = _episode()
    assert ep.input_ids == [1, 2, 3, 10, 11, 4, 5, 12, 6]
    assert ep.loss_mask == [0, 0, 0, 1, 1, 0, 0, 1, 0]
    assert ep.turn_index == [-1, -1, -1, 0, 0, -1, -1, 1, -1]
    assert ep.logprobs == [None, None, None, -0.5, -0.25, None, None, None, None]
    assert (ep.num_tokens, ep.num_action_tokens, ep.total_return) == (9, 3, 1.1)
    assert ep.retokenized and ep.success
    assert [m["role"] for m in ep.messages] == ["user", "assistant", "tool", "assistant"]
    assert "[tool]\ntool says 4" in ep.transcript()
    tok = ep.to_tokenized()
    assert tok.input_ids.tolist() == ep.input_ids and tok.num_turns == 2
    old = ep.to_episode()
    assert old.rewards == [0.1, 1.0] and old.transitions[1].observation == "tool says 4"
    assert old.success


def test_jsonl_round_trip_keeps_errors_and_flags(tmp_path: Path) -> None:
    ep = _episode()
    failed = TokenEpisode(
        "game:X", 4, None, model="m", prompt_ids=[1], finish_reason="error", error="HTTP 500"
    )
    path = tmp_path / "e.jsonl"
    assert write_token_jsonl([ep, failed], path) == 2
    back = list(read_token_jsonl(path))
    assert [b.to_dict() for b in back] == [ep.to_dict(), failed.to_dict()]
    assert back[1].error == "HTTP 500" and back[0].turns[1].retokenized
    path.write_text("{}\n")
    with pytest.raises(ConfigError, match="not a gemgym token episode"):
        list(read_token_jsonl(path))


@pytest.mark.parametrize(
    "bad",
    [
        {"temperature": -1},
        {"top_p": 0},
        {"max_tokens": 0},
        {"max_context": 1},
        {"stop": "</python>"},
        {"stop": ("",)},
    ],
)
def test_bad_sampling_settings_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        SamplingParams(**bad)  # type: ignore[arg-type]


def test_sampling_settings_round_trip() -> None:
    p = SamplingParams(temperature=0.5, stop=("</python>",), max_context=100, seed=3)
    assert SamplingParams.from_dict(p.to_dict()) == p
    assert p.replace(max_tokens=5).max_tokens == 5
    g = Generation.failed("boom")
    assert (g.finish_reason, g.error, g.completion_tokens) == ("error", "boom", 0)
