"""Math envs and the math grader: gold scores 1, wrong scores 0, tricky equivalences, timeouts."""

from __future__ import annotations

import threading
import time

import pytest
from hypothesis import given, settings, strategies as st

import gemgym
from gemgym.envs.dataset import TERMINAL_STATE
from gemgym.envs.math import MATH_DATASETS, MathEnv
from gemgym.errors import ConfigError
from gemgym.grading import extract_boxed, grade_math
from gemgym.grading.pool import GradingPool
from helpers.extras import skip_without

MATH_IDS = sorted(MATH_DATASETS)


@pytest.mark.parametrize("env_id", MATH_IDS)
def test_gold_scores_one_and_wrong_scores_zero_on_every_sample_item(env_id: str) -> None:
    env = gemgym.make(env_id, dataset="sample").unwrapped
    assert isinstance(env, MathEnv)
    for i in range(len(env)):
        env.reset(options={"index": i})
        obs, r, te, tr, info = env.step("The answer is " + env.expert_action())
        assert (obs, r, te, tr) == (TERMINAL_STATE, 1.0, True, False), (i, info)
        env.reset(options={"index": i})
        _, r, *_ = env.step(r"\boxed{123456789}")
        assert r == 0.0


EQUIVALENT = [
    (r"\frac{1}{2}", "0.5"),
    ("0.5", r"\frac{1}{2}"),
    ("1/2", r"\dfrac{1}{2}"),
    (r"\sqrt{8}", r"2\sqrt{2}"),
    (r"2\sqrt{2}", r"\sqrt{8}"),
    ("3", "x=3"),
    ("x=3", "3"),
    (r"\{1,2\}", r"\{2,1\}"),
    ("0.1", r"10\%"),
    (r"10\%", "0.1"),
    ("10", r"10\%"),  # GEM's leniency
    ("3", "3.0"),
    ("1000", "1e3"),
    ("70000", "70,000"),
    ("A", r"\text{(A)}"),
    ("5", r"5\text{ cm}"),
    (r"\frac{3}{4}", r"\dfrac34"),
    ("(x+1)^2", "x^2+2x+1"),
    ("[1,2)", "[1, 2)"),
    (r"(-\infty, 2] \cup (3, \infty)", r"(-\infty,2]\cup(3,\infty)"),
    (r"\left( 3, \frac{\pi}{2} \right)", r"(3, \frac{\pi}{2})"),
    ("90", r"90^\circ"),
]
DIFFERENT = [
    (r"\{1,2\}", r"\{1,3\}"),
    ("(1,2)", "(2,1)"),
    ("[1,2]", "[1,2)"),
    ("1/3", "0.333"),
    ("7", "8"),
    (r"\frac{1}{2}", "0.51"),
    ("2", ""),
]


@pytest.mark.parametrize(("gold", "answer"), EQUIVALENT)
def test_equivalent_answers(gold: str, answer: str) -> None:
    assert grade_math(f"so \\boxed{{{answer}}}", gold).correct


@pytest.mark.parametrize(("gold", "answer"), DIFFERENT)
def test_different_answers(gold: str, answer: str) -> None:
    assert not grade_math(f"so \\boxed{{{answer}}}", gold).correct


def test_last_box_counts_nested_braces_and_several_golds() -> None:
    assert extract_boxed(r"\boxed{1} then \boxed{\frac{a}{b^{2}}}") == r"\frac{a}{b^{2}}"
    assert extract_boxed(r"\boxed{unclosed") is None
    assert grade_math(r"\boxed{1} no wait \boxed{2}", "2").correct
    assert grade_math(r"\boxed{Paris}", ["London", "Paris"]).correct


def test_no_box_is_a_format_error_with_optional_penalty() -> None:
    for penalty, expected in ((False, 0.0), (True, -0.1)):
        env = gemgym.make("math:GSM8K", dataset="sample", format_penalty=penalty)
        env.reset(seed=0)
        _, r, te, tr, info = env.step("18")
        assert (r, te, tr) == (expected, True, False)
        assert info["format_error"] is True and info["extracted"] is None


@pytest.mark.flaky(reruns=2)  # wall-clock bound: a busy machine can miss it once
def test_pathological_answer_costs_at_most_the_limit_then_grading_goes_on() -> None:
    grade_math(r"\boxed{2\sqrt{2}}", r"\sqrt{8}")  # start the pool outside the timing
    t = time.perf_counter()
    g = grade_math(r"\boxed{9^{9^{9^9}}}", "1", timeout=0.5)
    assert time.perf_counter() - t < 1.5
    assert not g.correct and g.timed_out
    t = time.perf_counter()
    assert grade_math(r"\boxed{\sqrt{12}}", r"2\sqrt{3}").correct
    assert time.perf_counter() - t < 1.0  # the killed worker was replaced at once


@skip_without("math")
def test_grading_with_time_limit_works_in_threads() -> None:
    results: list[tuple[bool, bool]] = []

    def work() -> None:
        ok = grade_math(r"\boxed{\sqrt{8}}", r"2\sqrt{2}").correct
        stuck = grade_math(r"\boxed{9^{9^{9^9}}}", "3", timeout=0.3)
        results.append((ok, not stuck.correct and stuck.timed_out))

    threads = [threading.Thread(target=work) for _ in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert results == [(True, True)] * 3


def test_grading_pool_can_be_closed_and_reused() -> None:
    pool = GradingPool(max_workers=1)
    assert pool.verify(r"2\sqrt{2}", r"\sqrt{8}", 5.0) is True
    pool.close()
    assert pool.verify("x^2+2x+1", "(x+1)^2", 5.0) is True
    pool.close()


def test_eval_ids_visit_items_in_order_and_train_ids_shuffle() -> None:
    env = gemgym.make("eval:AIME24", dataset="sample")
    seen = [env.reset(seed=0)[1]["index"]] + [env.reset()[1]["index"] for _ in range(4)]
    assert seen == [0, 1, 2, 3, 4]


def test_list_gold_column_and_bad_config() -> None:
    env = MathEnv(dataset=[{"problem": "2+2?", "answer": ["4", "four"]}])
    env.reset(seed=0)
    assert env.step(r"\boxed{4}")[1] == 1.0
    with pytest.raises(ConfigError):
        MathEnv(dataset="sample", timeout=0)
    with pytest.raises(ConfigError):
        MathEnv(dataset="sample", spec_id="math:Nope")


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_arbitrary_text_never_raises(text: str) -> None:
    env = gemgym.make("math:Math12K", dataset="sample")
    env.reset(seed=0)
    obs, r, te, tr, info = env.step(text)
    assert obs == TERMINAL_STATE and (te, tr) == (True, False) and r in (0.0, 1.0)
    g = grade_math(r"\boxed{" + text + "}", "x^2+1")
    assert isinstance(g.correct, bool)
