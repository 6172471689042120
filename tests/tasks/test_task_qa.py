"""QA and RuleTaker envs: extraction, SQuAD normalisation, several gold answers, F1."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

import gemgym
from gemgym.envs.dataset import TERMINAL_STATE
from gemgym.envs.qa import QA_DATASETS, QaEnv
from gemgym.grading import normalize_qa_answer, qa_exact_match, qa_f1
from gemgym.grading.qa import extract_tagged_answer


@pytest.mark.parametrize("env_id", sorted(QA_DATASETS))
def test_gold_scores_one_and_wrong_scores_zero_on_every_sample_item(env_id: str) -> None:
    env = gemgym.make(env_id, dataset="sample").unwrapped
    assert isinstance(env, QaEnv)
    for i in range(len(env)):
        env.reset(options={"index": i})
        obs, r, te, tr, info = env.step("Let me think. " + env.expert_action())
        assert (obs, r, te, tr) == (TERMINAL_STATE, 1.0, True, False), (i, info)
        assert info["f1"] == 1.0
        env.reset(options={"index": i})
        wrong = (
            r"\boxed{zebra crossing}" if env.extract_boxed else "<answer>zebra crossing</answer>"
        )
        assert env.step(wrong)[1] == 0.0


def test_squad_normalisation_and_several_golds() -> None:
    assert normalize_qa_answer("  The Amazon River! ") == "amazon river"
    assert qa_exact_match("the amazon", ["Amazon", "Nile"])
    assert qa_exact_match("NILE.", ["Amazon", "Nile"])
    assert qa_exact_match("42", 42)
    assert not qa_exact_match("43", [42, "some other answer"])
    assert qa_f1("Amazon river basin", "the Amazon River") == pytest.approx(0.8)
    assert qa_f1("", "x") == 0.0


def test_last_tag_wins_and_missing_answer_is_penalised() -> None:
    assert extract_tagged_answer("<answer>a</answer> ... <ANSWER> b </ANSWER>") == "b"
    env = gemgym.make("qa:NaturalQuestions", dataset="sample")
    env.reset(options={"index": 1})  # Canberra
    _, r, te, tr, info = env.step("Canberra")
    assert (r, te, tr) == (-0.1, True, False) and info["format_error"]
    env.reset(options={"index": 1})
    assert env.step("<answer>Sydney</answer> no: <answer>canberra</answer>")[1] == 1.0


def test_ruletaker_reads_the_box() -> None:
    env = gemgym.make("logic:RuleTaker-d3", dataset="sample")
    env.reset(options={"index": 0})  # True
    assert env.step(r"\boxed{true}")[1] == 1.0
    env.reset(options={"index": 0})
    assert env.step("<answer>True</answer>")[1] == -0.1


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_arbitrary_text_never_raises(text: str) -> None:
    for env_id in ("qa:HotpotQA", "logic:RuleTaker-d0"):
        env = gemgym.make(env_id, dataset="sample")
        env.reset(seed=0)
        obs, r, te, tr, info = env.step(text)
        assert (te, tr) == (True, False) and r in (-0.1, 0.0, 1.0)
        assert 0.0 <= info["f1"] <= 1.0
