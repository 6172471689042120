"""pass@k, mean@k, compare, suites, rescore, the backend agent, and the board in the collector."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
from pathlib import Path
from typing import Any

import pytest

from gemgym.cli import main
from gemgym.episodes import ActRequest, EnvAccess, Episode
from gemgym.errors import ConfigError
from gemgym.evaluation.agents import BackendAgent
from gemgym.evaluation.scoring import compare_runs, pass_at_k, summarize
from gemgym.evaluation.suites import MATH_EVAL, QA_EVAL, resolve


def _brute_pass_at_k(n: int, c: int, k: int) -> float:
    """The share of k-subsets of the n samples holding at least one success."""
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(samples, k))
    return sum(any(s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_pass_at_k_is_the_unbiased_estimator(n: int) -> None:
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert math.isclose(pass_at_k(n, c, k), _brute_pass_at_k(n, c, k), abs_tol=1e-12)
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)


def _rec(env: str, task: int, sample: int, success: bool, status: str = "ok") -> dict[str, Any]:
    return {
        "env": env, "task": task, "sample": sample, "success": success, "status": status,
        "return": float(success), "turns": 1, "difficulty": "easy" if task % 2 else "hard",
        "usage": {"prompt_tokens": 3, "completion_tokens": 2}, "latency_s": 0.1,
    }  # fmt: skip


def test_summary_counts_errors_apart_and_scores_pass_and_mean_at_k() -> None:
    records = [
        _rec("a", 0, 0, True), _rec("a", 0, 1, False),  # task 0: 1 of 2
        _rec("a", 1, 0, False), _rec("a", 1, 1, False),  # task 1: 0 of 2
        _rec("a", 2, 0, True), _rec("a", 2, 1, False, status="error"),  # task 2: 1 of 1 scored
    ]  # fmt: skip
    s = summarize(records, ks=(1, 2))["envs"]["a"]
    assert (s["episodes"], s["scored"], s["errors"]) == (6, 5, 1)
    assert s["success_rate"] == pytest.approx(2 / 5)
    assert s["mean_at_k"] == pytest.approx((0.5 + 0.0 + 1.0) / 3)
    assert s["pass_at_k"]["1"] == pytest.approx((0.5 + 0.0 + 1.0) / 3)
    assert s["pass_at_k"]["2"] == pytest.approx((1.0 + 0.0) / 2)  # task 2 has < 2 scored
    assert set(s["difficulties"]) == {"easy", "hard"}
    assert s["difficulties"]["easy"]["tasks"] == 1
    families = summarize(records)["families"]
    assert list(families["a"]) == ["easy", "hard"]  # easiest first


def test_compare_pairs_tasks_and_gives_an_interval() -> None:
    a = [_rec("x", t, 0, False) for t in range(40)]
    b = [_rec("x", t, 0, t < 30) for t in range(40)]
    same = [_rec("y", t, 0, t % 2 == 0) for t in range(10)]
    (row_x, row_y) = compare_runs(a + same, b + same)
    assert row_x["env"] == "x" and row_x["tasks"] == 40
    assert row_x["delta"] == pytest.approx(0.75) and 0 < row_x["ci"] < 0.75
    assert row_x["significant"]
    assert row_y["delta"] == 0 and not row_y["significant"]


def test_suites_ids_globs_and_tools() -> None:
    math_suite = resolve(["math"])
    assert [e.name for e in math_suite] == list(MATH_EVAL) + [f"{i}+python" for i in MATH_EVAL]
    assert [e.name for e in resolve(["qa-search"])] == [f"{i}+search" for i in QA_EVAL]
    games = resolve(["games"])
    assert len(games) >= 36 and all(e.env_id.startswith("game:") for e in games)
    assert [e.name for e in resolve(["game:Wordle-v0-*", "game:Wordle-v0-easy"])] == [
        "game:Wordle-v0-easy", "game:Wordle-v0-hard", "game:Wordle-v0-random",
    ]  # fmt: skip
    assert resolve(["eval:AIME24+python"])[0].tool == "python"
    with pytest.raises(ConfigError, match="did you mean"):
        resolve(["game:Wordle-v0-eazy"])
    with pytest.raises(ConfigError, match="matches no"):
        resolve(["nothing:*"])
    with pytest.raises(ConfigError, match="unknown tool"):
        resolve(["eval:AIME24+calculator"])
    with pytest.raises(ConfigError, match="pass its URL as search_url"):
        resolve(["eval:HotpotQA+search"])[0].make()


def test_rescore_replays_with_the_current_graders(tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert main(["eval", "game:GuessTheNumber-v0-easy", "game:Hangman-v0-easy", "--agent",
                 "random", "--tasks", "4", "--n", "2", "--quiet", "--out", str(run)]) == 0  # fmt: skip
    before = (run / "summary.json").read_text()
    assert main(["eval", "rescore", str(run)]) == 0
    after = json.loads((run / "summary.json").read_text())
    assert json.loads(before)["summary"] == after["summary"]
    # a stored reward that today's grader disagrees with is corrected
    lines = (run / "episodes.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["return"], first["success"] = 123.0, not first["success"]
    (run / "episodes.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    assert main(["eval", "rescore", str(run)]) == 0
    fixed = json.loads((run / "episodes.jsonl").read_text().splitlines()[0])
    assert fixed["return"] != 123.0
    assert (
        json.loads(before)["summary"] == json.loads((run / "summary.json").read_text())["summary"]
    )


def test_compare_command(tmp_path: Path, capsys: Any) -> None:
    for name, agent in (("a", "random"), ("b", "oracle")):
        assert main(["eval", "game:GuessTheNumber-v0-easy", "--agent", agent, "--tasks", "20",
                     "--quiet", "--out", str(tmp_path / name)]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["eval", "compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert "GuessTheNumber" in out and "100.0%" in out and "±" in out


class _FakeBackend:
    """A stand-in for a token-level backend (fakes stand only for remote LLM APIs)."""

    name = "fake"

    def __init__(self) -> None:
        from gemgym.llm.backend import BackendCapabilities

        self.requests: list[Any] = []
        self.capabilities = BackendCapabilities(token_ids=False, logprobs=False)

    async def generate(self, request: Any) -> Any:
        from gemgym.llm.backend import Generation

        self.requests.append(request)
        return Generation([1, 2], None, "\\boxed{3}", "stop", prompt_tokens=7)

    async def aclose(self) -> None:
        pass


def test_backend_agent_sends_the_board_and_derived_seeds() -> None:
    import gemgym

    env = gemgym.make("game:Hangman-v0-easy")
    obs, info = env.reset(seed=0)
    backend = _FakeBackend()
    agent = BackendAgent(backend, system_prompt="play", seed=5)
    from gemgym.prompting import model_view

    request = ActRequest(
        Episode("game:Hangman-v0-easy", 0, 0, obs, reset_info=info),
        model_view(obs, info),
        turn=0,
        slot=0,
        seed=None,
        role="user",
        env=EnvAccess(lambda name: getattr(env, name)()),
    )
    reply = asyncio.run(agent.act(request))
    assert reply.action == "\\boxed{3}" and reply.prompt_tokens == 7
    (req,) = backend.requests
    assert req.messages[0] == {"role": "system", "content": "play"}
    assert info["suffix"].strip().splitlines()[-1] in req.messages[-1]["content"]
    assert req.sampling.seed is not None and req.prompt_ids is None  # a text backend


def test_the_collector_policy_sees_the_board() -> None:
    from gemgym.rl import Collector

    seen: list[str] = []

    def policy(observations: list[Any]) -> list[str]:
        seen.extend(observations)
        return ["\\boxed{e}"] * len(observations)

    with Collector("game:Hangman-v0-easy", policy, num_envs=2, seed=0, max_turns=1) as c:
        c.collect(2)
    import gemgym

    _, info = gemgym.make("game:Hangman-v0-easy").reset(seed=0)
    assert any(info["suffix"].strip() in s for s in seen)
