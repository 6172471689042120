"""Common GEM idioms, written as a GEM user writes them, and a runner for them.

Each idiom is a small self-contained snippet that imports only ``gem`` (and the standard library,
``numpy`` or ``datasets``, as GEM's own README, GETTING_STARTED.md, examples and tests do) and
asserts what GEM documents or its own code does. The list is drawn from axon-rl/gem at 4069f2f:
README.md's interface loop, GETTING_STARTED.md's tool examples, examples/register_new_env.py, the
rl2 / OpenRLHF / oat examples and tests/.

This file imports nothing from gemgym, so the same list runs on real GEM
(``/path/to/gem-venv/bin/python scripts/gem_idioms.py``) and on gemgym's layer
(``python -m gemgym.compat.gem scripts/gem_idioms.py``, or tests/compat/test_gem_idioms.py).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import textwrap
import traceback
from dataclasses import dataclass


@dataclass(frozen=True)
class Idiom:
    """One GEM idiom: a name, where GEM shows it, the snippet, the modules it needs."""

    name: str
    source: str  # where in GEM's repository the idiom comes from
    code: str
    needs: tuple[str, ...] = ()


_MATH_DS = """
from datasets import Dataset
ds = Dataset.from_dict({
    "problem": ["What is 2 + 2?", "What is 3 * 3?", "What is 10 - 4?"],
    "answer": ["4", "9", "6"],
})
"""

_QA_DS = """
from datasets import Dataset
ds = Dataset.from_dict({
    "problem": ["What is the capital of France?", "Who wrote Hamlet?"],
    "answer": [["Paris"], ["William Shakespeare", "Shakespeare"]],
})
"""

_TOKENIZER = """
class Tok:  # the part of a Hugging Face tokenizer GEM's chat wrappers call
    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True, **kw):
        text = "".join(f"<|{m['role']}|>{m['content']}<|end|>" for m in messages)
        return text + ("<|assistant|>" if add_generation_prompt else "")
"""

_MA_ENV = """
from gem.envs.multiagent.multi_agent_env import AgentSelector, MultiAgentEnv

class Echo(MultiAgentEnv):  # GEM's subclassing pattern (tests/test_multiagent)
    def __init__(self, mode="sequential"):
        super().__init__()
        self.possible_agents = ["a", "b"]
        self.agents = list(self.possible_agents)
        self.agent_selector = AgentSelector(self.agents, mode=mode)
        self.turn = 0

    def observe(self, agent):
        return f"{agent} at turn {self.turn}"

    def _process_actions(self, actions):
        self.turn += 1
        obs = {a: self.observe(a) for a in actions}
        rew = {a: 1.0 for a in actions}
        done = self.turn >= 4
        term = {a: done for a in actions}
        trunc = {a: False for a in actions}
        for a in actions:
            self.terminations[a] = done
        return obs, rew, term, trunc, {a: {} for a in actions}
"""


def _idiom(name: str, source: str, code: str, *needs: str) -> Idiom:
    return Idiom(name, source, textwrap.dedent(code).strip() + "\n", needs)


IDIOMS: list[Idiom] = [
    # -- making, resetting, stepping -------------------------------------------------------------
    _idiom(
        "make_reset",
        "README.md (Interface)",
        """
        import gem
        env = gem.make("game:GuessTheNumber-v0-hard")
        obs, info = env.reset()
        assert isinstance(obs, str) and obs and isinstance(info, dict)
        """,
    ),
    _idiom(
        "step_five_tuple",
        "README.md (Interface); gem/core.py Env.step",
        """
        import gem
        env = gem.make("game:GuessTheNumber-v0-hard")
        env.reset()
        obs, reward, terminated, truncated, info = env.step("\\\\boxed{25}")
        assert isinstance(obs, str) and isinstance(info, dict)
        assert isinstance(float(reward), float)
        assert isinstance(terminated, bool) and isinstance(truncated, bool)
        """,
    ),
    _idiom(
        "readme_random_loop",
        "README.md (Interface): sample_random_action until terminated or truncated",
        """
        import gem
        env = gem.make("game:GuessTheNumber-v0-hard")
        observation, info = env.reset()
        for _ in range(100):
            action = env.sample_random_action()
            assert isinstance(action, str)
            observation, reward, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        else:
            raise AssertionError("the episode did not end")
        """,
    ),
    _idiom(
        "game_state_attribute",
        "gem/envs/game_env/guess_the_number.py: the game's state as attributes (game_number)",
        """
        import gem
        env = gem.make("game:GuessTheNumber-v0-hard")
        env.reset(seed=1)
        assert 1 <= env.game_number <= 50
        _, reward, terminated, truncated, _ = env.step("\\\\boxed{%d}" % env.game_number)
        assert reward == 1.0 and terminated and not truncated
        """,
    ),
    _idiom(
        "sample_random_action_games",
        "gem/envs/game_env/*.py sample_random_action; tests/test_env/test_game.py",
        """
        import gem
        for env_id in ["game:GuessTheNumber-v0-easy", "game:Minesweeper-v0-easy",
                       "game:Mastermind-v0-easy", "game:Game2048-v0-easy", "game:Sokoban-v0-easy",
                       "game:FifteenPuzzle-v0-easy"]:
            env = gem.make(env_id)
            env.reset(seed=0)
            action = env.sample_random_action()
            assert isinstance(action, str) and action, env_id
            out = env.step(action)
            assert len(out) == 5, env_id
        """,
    ),
    _idiom(
        "reset_seed_reproducible",
        "gem/core.py Env.reset(seed) seeds the episode",
        """
        import gem
        a, b = gem.make("game:GuessTheNumber-v0-hard"), gem.make("game:GuessTheNumber-v0-hard")
        a.reset(seed=7)
        b.reset(seed=7)
        assert a.game_number == b.game_number
        numbers = set()
        for seed in range(10):
            a.reset(seed=seed)
            numbers.add(a.game_number)
        assert len(numbers) > 1
        """,
    ),
    _idiom(
        "reset_positional_seed",
        "examples/train_openrlhf/agent_func_multi_turn_*.py: env.reset(seed_int)",
        """
        import gem
        env = gem.make("game:GuessTheNumber-v0-hard")
        env.reset(123)
        first = env.game_number
        env.reset(124)
        env.reset(123)
        assert env.game_number == first
        """,
    ),
    _idiom(
        "make_kwargs_override",
        "gem/envs/registration.py make(env_id, **kwargs) over the registered kwargs",
        """
        import gem
        env = gem.make("game:GuessTheNumber-v0-hard", max_turns=2)
        assert env.max_turns == 2
        env.reset()
        done = False
        for _ in range(2):
            _, _, terminated, truncated, _ = env.step("\\\\boxed{0}")  # out of range: never right
            done = terminated or truncated
        assert done
        """,
    ),
    _idiom(
        "make_env_id_keyword",
        "examples/train_rl2/async_multi_turn.py: gem.make(env_id=..., seed=...)",
        """
        import gem
        env = gem.make(env_id="game:GuessTheNumber-v0-easy", seed=233)
        obs, _ = env.reset()
        assert "number" in obs.lower()
        """,
    ),
    _idiom(
        "env_id_attribute",
        "gem/envs/registration.py make sets env.env_id and env.entry_point",
        """
        import gem
        env = gem.make("game:Sudoku-v0-easy")
        assert env.env_id == "game:Sudoku-v0-easy"
        assert "sudoku" in str(env.entry_point).lower()
        """,
    ),
    _idiom(
        "unknown_id_value_error",
        "gem/envs/registration.py make: unknown id -> ValueError",
        """
        import gem
        try:
            gem.make("game:NoSuchGame-v0")
        except ValueError:
            pass
        else:
            raise AssertionError("no ValueError")
        """,
    ),
    _idiom(
        "env_registry_listing",
        "gem/envs/registration.py ENV_REGISTRY (EnvSpec id, entry_point, kwargs)",
        """
        from gem.envs.registration import ENV_REGISTRY
        for env_id in ["game:GuessTheNumber-v0-hard", "game:Sudoku-v0-easy", "math:GSM8K",
                       "qa:NaturalQuestions", "code:CodeContest", "rg:arc_1d"]:
            assert env_id in ENV_REGISTRY, env_id
        spec = ENV_REGISTRY["game:GuessTheNumber-v0-hard"]
        assert spec.id == "game:GuessTheNumber-v0-hard"
        assert spec.kwargs["max_turns"] == 7
        games = [k for k in ENV_REGISTRY if k.startswith("game:")]
        assert len(games) >= 20
        """,
    ),
    _idiom(
        "print_envs",
        "README.md (Interface): gem.print_envs()",
        """
        import contextlib, io
        import gem
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            gem.print_envs()
        assert "game:GuessTheNumber-v0-hard" in buf.getvalue()
        """,
    ),
    _idiom(
        "register_custom_env",
        "examples/register_new_env.py case 2: subclass gem.core.Env, register, make",
        """
        import random, string
        import gem
        from gem.core import Env
        from gem.envs.registration import register
        from gem.utils.constants import TERMINAL_STATE
        from gem.utils.parsing import extract_last_boxed_answer

        class ReverseStringEnv(Env):
            def __init__(self, str_len=5):
                super().__init__()
                self.str_len = str_len

            def reset(self, seed=None):
                super().reset(seed)
                chars = string.ascii_letters + string.digits
                self.gt_str = "".join(random.choices(chars, k=self.str_len))
                return f"Please reverse the string: {self.gt_str}.", {}

            def step(self, action):
                answer = extract_last_boxed_answer(action)
                reward = 1.0 if answer == self.gt_str[::-1] else 0.0
                return TERMINAL_STATE, reward, True, True, {}

        register("game:ReverseString-idiom", ReverseStringEnv, str_len=6)
        env = gem.make("game:ReverseString-idiom")
        obs, _ = env.reset(seed=3)
        assert len(env.gt_str) == 6 and env.gt_str in obs
        _, reward, terminated, _, _ = env.step("\\\\boxed{" + env.gt_str[::-1] + "}")
        assert reward == 1.0 and terminated
        """,
    ),
    _idiom(
        "register_dataset_env_string_entry_point",
        "examples/register_new_env.py case 1: register a math dataset by entry-point string",
        _MATH_DS
        + """
import gem
from gem.envs.registration import register
register("math:Idiom-Example", "gem.envs.math_env:MathEnv", dataset=ds,
         question_key="problem", answer_key="answer")
env = gem.make("math:Idiom-Example")
obs, _ = env.reset()
assert obs in ds["problem"]
""",
        "datasets",
    ),
    _idiom(
        "register_duplicate_raises",
        "gem/envs/registration.py register: an id twice -> ValueError",
        """
        from gem.envs.registration import register
        try:
            register("game:GuessTheNumber-v0-hard", "gem.envs.game_env.guess_the_number:GuessTheNumberEnv")
        except ValueError:
            pass
        else:
            raise AssertionError("no ValueError")
        """,
    ),
    _idiom(
        "unwrapped",
        "gem/core.py Env.unwrapped / EnvWrapper.unwrapped",
        """
        import gem
        from gem.wrappers.wrapper_factory import WRAPPER_FACTORY
        env = gem.make("game:GuessTheNumber-v0-easy")
        wrapped = WRAPPER_FACTORY["concat"](env)
        assert wrapped.unwrapped is env.unwrapped
        assert wrapped.env is env
        """,
    ),
    _idiom(
        "wrapper_forwards_attributes",
        "gem/core.py EnvWrapper: the env's attributes read through the wrapper",
        """
        import gem
        from gem.wrappers.wrapper_factory import WRAPPER_FACTORY
        env = WRAPPER_FACTORY["concat"](gem.make("game:GuessTheNumber-v0-hard"))
        assert env.max_turns == 7 and env.max_number == 50
        obs, _ = env.reset()
        assert "50" in obs
        """,
    ),
    # -- dataset envs (math, QA, code) -------------------------------------------------------------
    _idiom(
        "math_env_hf_dataset",
        "gem/envs/math_env.py MathEnv(dataset=<datasets.Dataset>); \\boxed{} graded",
        _MATH_DS
        + """
import gem
env = gem.make("math:GSM8K", dataset=ds)
obs, _ = env.reset()
gold = {"What is 2 + 2?": "4", "What is 3 * 3?": "9", "What is 10 - 4?": "6"}[obs]
obs2, reward, terminated, truncated, info = env.step("so \\\\boxed{" + gold + "}")
assert reward == 1.0 and terminated
assert info["correct"]
""",
        "datasets",
    ),
    _idiom(
        "math_wrong_answer_zero",
        "gem/envs/math_env.py: a wrong answer scores 0",
        _MATH_DS
        + """
import gem
env = gem.make("math:GSM8K", dataset=ds)
env.reset()
_, reward, terminated, _, _ = env.step("\\\\boxed{1000}")
assert reward == 0 and terminated
""",
        "datasets",
    ),
    _idiom(
        "math_env_class_positional",
        "gem/envs/math_env.py MathEnv(dataset_name, split, dataset, ...) constructed directly",
        _MATH_DS
        + """
from gem.envs.math_env import MathEnv
env = MathEnv("", None, ds)
obs, _ = env.reset()
assert obs in ds["problem"]
""",
        "datasets",
    ),
    _idiom(
        "math_reset_idx",
        "gem/envs/math_env.py reset(idx=...) picks an item",
        _MATH_DS
        + """
import gem
env = gem.make("math:GSM8K", dataset=ds, eval=True)
obs, _ = env.reset(idx=1)
assert obs == "What is 3 * 3?"
assert env.answer == "9"
""",
        "datasets",
    ),
    _idiom(
        "dataset_fixed_order",
        "gem/envs/math_env.py: shuffle once with make(seed=), walk that order on reset()",
        _MATH_DS
        + """
import gem
a = gem.make("math:GSM8K", dataset=ds, seed=5)
b = gem.make("math:GSM8K", dataset=ds, seed=5)
qa = [a.reset()[0] for _ in range(3)]
qb = [b.reset()[0] for _ in range(3)]
assert qa == qb and sorted(qa) == sorted(ds["problem"])
""",
        "datasets",
    ),
    _idiom(
        "eval_loop_set_answer",
        "tests/test_env/test_math.py evaluate: env.answer = gold; step; repeat",
        _MATH_DS
        + """
import gem
env = gem.make("math:GSM8K", dataset=ds)
env.reset()
rewards = []
for gold in ["4", "9", "6"]:
    env.answer = gold
    _, reward, _, _, _ = env.step("\\\\boxed{" + gold + "}")
    rewards.append(reward)
assert rewards == [1, 1, 1], rewards
""",
        "datasets",
    ),
    _idiom(
        "dataset_columns",
        "tests/test_env/test_qa.py evaluate_llm: env.dataset[question_key], len(env.dataset)",
        _MATH_DS
        + """
import gem
env = gem.make("math:GSM8K", dataset=ds)
assert len(env.dataset) == 3
assert sorted(env.dataset["problem"]) == sorted(ds["problem"])
assert env.dataset[0]["answer"] in ds["answer"]
""",
        "datasets",
    ),
    _idiom(
        "get_set_state",
        "gem/envs/math_env.py get_state / set_state",
        _MATH_DS
        + """
import gem
env = gem.make("math:GSM8K", dataset=ds)
env.reset()
state = env.get_state()
assert set(state) >= {"first_obs", "answer"}
env.set_state({"first_obs": "What is 1 + 1?", "answer": "2"})
_, reward, _, _, _ = env.step("\\\\boxed{2}")
assert reward == 1.0
""",
        "datasets",
    ),
    _idiom(
        "spawn_same_state",
        "gem/envs/math_env.py spawn(same_state=True): a copy on the same item",
        _MATH_DS
        + """
import gem
env = gem.make("math:GSM8K", dataset=ds)
env.reset()
child = env.spawn(same_state=True)
gold = env.answer
assert child.answer == gold
_, reward, _, _, _ = child.step("\\\\boxed{" + str(gold) + "}")
assert reward == 1.0
""",
        "datasets",
    ),
    _idiom(
        "qa_env_tagged_answer",
        "gem/envs/qa_env.py: <answer>...</answer> graded by exact match against a list",
        _QA_DS
        + """
import gem
env = gem.make("qa:NaturalQuestions", dataset=ds)
obs, _ = env.reset()
gold = "Paris" if "France" in obs else "Shakespeare"
_, reward, terminated, _, info = env.step(f"<answer>{gold}</answer>")
assert reward == 1.0 and terminated and info["correct"]
""",
        "datasets",
    ),
    _idiom(
        "qa_no_answer_zero",
        "gem/envs/qa_env.py: a reply without an answer scores 0.0",
        _QA_DS
        + """
import gem
env = gem.make("qa:NaturalQuestions", dataset=ds)
env.reset()
_, reward, _, _, _ = env.step("I do not know")
assert reward == 0.0
""",
        "datasets",
    ),
    _idiom(
        "code_env_stdio_tests",
        "gem/envs/code_env.py: code graded by the item's stdin/stdout tests",
        """
import json
from datasets import Dataset
import gem
ds = Dataset.from_dict({
    "problem": ["Read two integers and print their sum."],
    "tests": [json.dumps({"inputs": ["1 2\\n", "5 7\\n"], "outputs": ["3\\n", "12\\n"]})],
})
env = gem.make("code:CodeContest", dataset=ds)
env.reset()
good = "```python\\na, b = map(int, input().split())\\nprint(a + b)\\n```"
_, reward, terminated, _, _ = env.step(good)
assert reward == 1.0 and terminated
env.reset()
_, reward, _, _, _ = env.step("```python\\nprint(0)\\n```")
assert reward == 0.0
""",
        "datasets",
    ),
    _idiom(
        "reasoning_gym_env",
        "tests/test_env/test_reasoning_gym.py: gem.make('rg:...', seed=, size=)",
        """
        import gem
        env = gem.make("rg:leg_counting", seed=10, size=int(1e9))
        obs, _ = env.reset()
        assert isinstance(obs, str) and obs
        _, reward, terminated, _, _ = env.step("\\\\boxed{30}")
        assert reward in (0, 1) or isinstance(float(reward), float)
        assert terminated
        """,
        "reasoning_gym",
    ),
    # -- vector envs ------------------------------------------------------------------------------
    _idiom(
        "make_vec_sync",
        "gem/envs/registration.py make_vec(list of ids) -> SyncVectorEnv",
        """
        import numpy as np
        import gem
        venv = gem.make_vec(["game:GuessTheNumber-v0-easy"] * 3)
        assert venv.num_envs == 3 and type(venv).__name__ == "SyncVectorEnv"
        obs, infos = venv.reset()
        assert len(obs) == 3 and all(isinstance(o, str) for o in obs)
        obs, rewards, terminated, truncated, infos = venv.step(["\\\\boxed{5}"] * 3)
        assert isinstance(rewards, np.ndarray) and rewards.shape == (3,)
        assert terminated.shape == (3,) and truncated.shape == (3,)
        """,
    ),
    _idiom(
        "make_vec_vec_kwargs_seeds",
        "examples/train_oat/train_oat.py: make_vec(ids, vec_kwargs=[{'seed': ...}], wrappers=...)",
        _MATH_DS
        + """
import gem
ids = ["math:GSM8K"] * 2
a = gem.make_vec(ids, vec_kwargs=[{"seed": 42 + i} for i in range(2)], dataset=ds)
b = gem.make_vec(ids, vec_kwargs=[{"seed": 42 + i} for i in range(2)], dataset=ds)
assert a.reset()[0] == b.reset()[0]
assert [e.seed for e in a.envs] == [42, 43]
""",
        "datasets",
    ),
    _idiom(
        "vec_reset_seed_offsets",
        "gem/vector/vector_env.py reset(seed=s) seeds env i with s + i",
        """
        import gem
        venv = gem.make_vec(["game:GuessTheNumber-v0-hard"] * 3)
        venv.reset(seed=3)
        single = gem.make("game:GuessTheNumber-v0-hard")
        expected = []
        for i in range(3):
            single.reset(seed=3 + i)
            expected.append(single.game_number)
        assert [e.game_number for e in venv.envs] == expected
        """,
    ),
    _idiom(
        "make_vec_with_wrappers",
        "examples/train_oat/train_oat.py: make_vec(..., wrappers=get_wrapper_fns('concat'))",
        """
        import gem
        from gem.wrappers.wrapper_factory import get_wrapper_fns
        venv = gem.make_vec(["game:GuessTheNumber-v0-hard"] * 2,
                            wrappers=get_wrapper_fns("concat", tokenizer=None))
        venv.reset()
        obs, *_ = venv.step(["\\\\boxed{10}", "\\\\boxed{20}"])
        assert "10" in obs[0] and "20" in obs[1]
        """,
    ),
    _idiom(
        "make_vec_async",
        "gem/envs/registration.py make_vec(async_mode=True) -> AsyncVectorEnv",
        """
        import gem
        ids = ["game:GuessTheNumber-v0-easy", "game:Minesweeper-v0-easy"]
        venv = gem.make_vec(ids, async_mode=True)
        assert type(venv).__name__ == "AsyncVectorEnv"
        obs, _ = venv.reset()
        assert len(obs) == 2
        actions = [venv.envs[i].sample_random_action() for i in range(2)]
        obs, rewards, *_ = venv.step(actions)
        assert len(obs) == 2 and len(rewards) == 2
        """,
    ),
    _idiom(
        "vec_dict_actions",
        "gem/vector/sync_vector_env.py step(Dict[int, action]): act for some envs only",
        """
        import gem
        venv = gem.make_vec(["game:GuessTheNumber-v0-hard"] * 3)
        venv.reset()
        obs, rewards, terminated, truncated, infos = venv.step({0: "\\\\boxed{1}", 2: "\\\\boxed{2}"})
        assert len(obs) == 2 and len(rewards) == 2
        """,
    ),
    _idiom(
        "vec_autoreset",
        "gem/vector/vector_env.py: an env that ends is reset automatically (SAME_STEP)",
        _MATH_DS
        + """
import gem
venv = gem.make_vec(["math:GSM8K"] * 2, dataset=ds)
venv.reset()
for _ in range(3):
    obs, rewards, terminated, truncated, infos = venv.step(["\\\\boxed{4}"] * 2)
    assert all(terminated)
    assert all(o in ds["problem"] for o in obs)  # the next item's question, same step
""",
        "datasets",
    ),
    _idiom(
        "sync_vector_env_direct",
        "gem/vector/sync_vector_env.py SyncVectorEnv(env_ids, env_fns)",
        """
        from functools import partial
        import gem
        from gem.vector.sync_vector_env import SyncVectorEnv
        ids = ["game:GuessTheNumber-v0-easy"] * 2
        venv = SyncVectorEnv(ids, [partial(gem.make, i) for i in ids])
        obs, _ = venv.reset(seed=1)
        assert len(obs) == 2 and venv.num_envs == 2
        """,
    ),
    _idiom(
        "sync_vector_env_positional_mode",
        "gem/vector/vector_env.py VectorEnv(env_ids, env_fns, autoreset_mode) positional",
        """
        from functools import partial
        import gem
        from gem.vector.sync_vector_env import SyncVectorEnv
        from gem.vector.vector_env import AutoresetMode
        ids = ["game:GuessTheNumber-v0-easy"] * 2
        venv = SyncVectorEnv(ids, [partial(gem.make, i) for i in ids], AutoresetMode.SAME_STEP)
        obs, _ = venv.reset()
        assert len(obs) == 2
        """,
    ),
    # -- wrappers ---------------------------------------------------------------------------------
    _idiom(
        "get_wrapper_fns_concat",
        "examples/train_rl2/async_multi_turn.py: for w in get_wrapper_fns('concat'): env = w(env)",
        """
        import gem
        from gem.wrappers.wrapper_factory import get_wrapper_fns
        env = gem.make("game:GuessTheNumber-v0-hard")
        for wrapper in get_wrapper_fns("concat", tokenizer=None):
            env = wrapper(env)
        first, _ = env.reset()
        obs, *_ = env.step("\\\\boxed{10}")
        assert obs.startswith(first.strip()[:40]) and len(obs) > len(first)
        """,
    ),
    _idiom(
        "concat_with_action",
        "gem/wrappers/wrapper_factory.py 'concat_with_action' keeps the actions in the history",
        """
        import gem
        from gem.wrappers.wrapper_factory import WRAPPER_FACTORY
        env = WRAPPER_FACTORY["concat_with_action"](gem.make("game:GuessTheNumber-v0-hard"))
        env.reset()
        obs, *_ = env.step("my guess is \\\\boxed{17}")
        assert "my guess is \\\\boxed{17}" in obs
        """,
    ),
    _idiom(
        "concat_chat_tokenizer",
        "GETTING_STARTED.md: WRAPPER_FACTORY['concat_chat'](env, tokenizer=...)",
        _TOKENIZER
        + """
import gem
from gem.wrappers.wrapper_factory import get_wrapper_fns
env = gem.make("game:GuessTheNumber-v0-hard")
for wrapper in get_wrapper_fns("concat_chat", tokenizer=Tok()):
    env = wrapper(env)
env.reset()
obs, *_ = env.step("\\\\boxed{17}")
assert obs.startswith("<|user|>") and "<|assistant|>\\\\boxed{17}<|end|><|user|>" in obs
assert obs.count("<|assistant|>") == 2  # the generation prompt for the next reply
""",
    ),
    _idiom(
        "concat_chat_needs_tokenizer",
        "gem/wrappers/observation_wrapper.py: a chat template without a tokenizer is refused",
        """
        import gem
        from gem.wrappers.wrapper_factory import WRAPPER_FACTORY
        try:
            WRAPPER_FACTORY["concat_chat"](gem.make("game:GuessTheNumber-v0-hard"))
        except (AssertionError, ValueError):
            pass
        else:
            raise AssertionError("accepted without a tokenizer")
        """,
    ),
    _idiom(
        "observation_wrapper_history_length",
        "gem/wrappers/observation_wrapper.py ObservationWrapper(max_history_length=)",
        """
        import gem
        from gem.wrappers.observation_wrapper import ObservationWrapper
        env = ObservationWrapper(gem.make("game:GuessTheNumber-v0-hard"), include_action=True,
                                 include_chat_template=False, max_history_length=1)
        env.reset()
        env.step("\\\\boxed{11}")
        obs, *_ = env.step("\\\\boxed{12}")
        assert "\\\\boxed{12}" in obs and "\\\\boxed{11}" not in obs
        """,
    ),
    _idiom(
        "episode_tracking_wrapper",
        "gem/wrappers/episode_tracking_wrapper.py info keys",
        """
        import gem
        from gem.wrappers.wrapper_factory import WRAPPER_FACTORY
        env = WRAPPER_FACTORY["episode_tracking"](gem.make("game:GuessTheNumber-v0-hard"))
        _, info = env.reset()
        assert info["step_counter"] == 0 and info["prev_ep_step_counter"] == 0
        _, reward, _, _, info = env.step("\\\\boxed{3}")
        assert info["step_counter"] == 1 and info["cumulative_rewards"] == reward
        """,
    ),
    # -- tools ------------------------------------------------------------------------------------
    _idiom(
        "tool_env_wrapper_python",
        "GETTING_STARTED.md: ToolEnvWrapper(env, tools=[PythonCodeTool()])",
        """
        import gem
        from gem.tools.python_code_tool import PythonCodeTool
        from gem.tools.tool_env_wrapper import ToolEnvWrapper
        env = ToolEnvWrapper(gem.make("game:GuessTheNumber-v0-hard"), tools=[PythonCodeTool()])
        obs, info = env.reset()
        assert "<python>" in obs  # the tool's instructions follow the task
        action = "<think>compare</think><python>print('9.9 > 9.11?', 9.9 > 9.11)</python>"
        obs, reward, terminated, truncated, info = env.step(action)
        assert "9.9 > 9.11? True" in obs
        assert not terminated and not truncated
        assert info["use_tool"] and info["tool_use_counter"] == 1
        """,
    ),
    _idiom(
        "python_tool_execute_action",
        "gem/tools/python_code_tool.py execute_action -> (parsed, error, observation, parsed_action)",
        """
        from gem.tools.python_code_tool import PythonCodeTool
        tool = PythonCodeTool(timeout=5)
        parsed, error, obs, parsed_action = tool.execute_action(
            "Let me run <python>print(6 * 7)</python> and then answer")
        assert parsed and not error
        assert obs.startswith("Code execution result: ") and "42" in obs
        assert parsed_action.endswith("</python>")
        parsed, error, obs, _ = tool.execute_action("no code here")
        assert not parsed
        parsed, error, obs, _ = tool.execute_action("```python\\nraise ValueError('boom')\\n```")
        assert parsed and error and "boom" in obs
        """,
    ),
    _idiom(
        "tool_instruction_string",
        "gem/tools/base_tool.py instruction_string",
        """
        from gem.tools.python_code_tool import PythonCodeTool
        text = PythonCodeTool().instruction_string()
        assert "<python>" in text and "\\\\boxed{}" in text
        """,
    ),
    _idiom(
        "tool_then_answer",
        "tests/test_tool/test_python_code_tool.py: a tool call, then the answer ends the episode",
        _MATH_DS
        + """
import gem
from gem.tools.python_code_tool import PythonCodeTool
from gem.tools.tool_env_wrapper import ToolEnvWrapper
env = ToolEnvWrapper(gem.make("math:GSM8K", dataset=ds, eval=True), tools=[PythonCodeTool()])
env.reset()
env.set_state({"first_obs": "What is 2 + 2?", "answer": "4"})
obs, reward, terminated, _, _ = env.step("<python>print(2 + 2)</python>")
assert "4" in obs and not terminated
obs, reward, terminated, _, info = env.step("The answer is \\\\boxed{4}")
assert reward == 1.0 and terminated and not info["use_tool"]
""",
        "datasets",
    ),
    _idiom(
        "max_tool_uses",
        "gem/tools/tool_env_wrapper.py max_tool_uses: then the call goes to the env",
        """
        import gem
        from gem.tools.python_code_tool import PythonCodeTool
        from gem.tools.tool_env_wrapper import ToolEnvWrapper
        env = ToolEnvWrapper(gem.make("game:GuessTheNumber-v0-hard"), tools=[PythonCodeTool()],
                             max_tool_uses=1)
        env.reset()
        obs, _, _, _, info = env.step("<python>print(1)</python>")
        assert info["use_tool"] and "maximum number of tool use" in obs
        _, _, _, _, info = env.step("<python>print(2)</python>")
        assert not info["use_tool"]
        """,
    ),
    _idiom(
        "wrapper_factory_python_tool",
        "gem/wrappers/wrapper_factory.py: get_wrapper_fns('python_tool,concat_chat', tokenizer=)",
        _TOKENIZER
        + """
import gem
from gem.wrappers.wrapper_factory import get_wrapper_fns
env = gem.make("game:GuessTheNumber-v0-hard")
for wrapper in get_wrapper_fns("python_tool,concat_chat", tokenizer=Tok()):
    env = wrapper(env)
env.reset()
obs, reward, *_ = env.step("<python>print(20 + 22)</python>")
assert "42" in obs and reward == 0.05 + 0.25
""",
    ),
    # -- multi-agent ------------------------------------------------------------------------------
    _idiom(
        "multiagent_sequential",
        "gem/envs/multiagent: subclass MultiAgentEnv with an AgentSelector; step({agent: action})",
        _MA_ENV
        + """
env = Echo()
obs, infos = env.reset()
assert set(obs) == {"a", "b"}
assert env.agent_selector.get_active_agents() == ["a"]
env.step({"a": "hi"})
assert env.agent_selector.get_active_agents() == ["b"]
try:
    env.step({"a": "out of turn"})
except ValueError:
    pass
else:
    raise AssertionError("an inactive agent's action was accepted")
""",
    ),
    _idiom(
        "multiagent_parallel_and_messages",
        "gem/envs/multiagent: parallel selector, cumulative rewards, shared memory",
        _MA_ENV
        + """
env = Echo(mode="parallel")
env.reset()
obs, rew, term, trunc, infos = env.step({"a": "x", "b": "y"})
assert rew == {"a": 1.0, "b": 1.0}
assert env.get_state("a")[1] == 1.0  # accumulated reward
env.send_message("a", "b", "hello")
env.broadcast_message("b", "hi all")
assert len(env.shared_memory) == 2
""",
    ),
    # -- utilities --------------------------------------------------------------------------------
    _idiom(
        "utils_parsing_and_grading",
        "gem/utils/parsing.py, qa_em.py, constants.py",
        """
        from gem.utils.constants import TERMINAL_STATE
        from gem.utils.parsing import extract_last_boxed_answer
        from gem.utils.qa_em import em_check
        assert extract_last_boxed_answer("a \\\\boxed{1} then \\\\boxed{42}") == "42"
        assert em_check("the Eiffel Tower", ["Eiffel Tower"])
        assert isinstance(TERMINAL_STATE, str)
        """,
    ),
    _idiom(
        "debug_run_and_print_episode",
        "tests/test_env/test_game.py: gem.utils.debug.run_and_print_episode",
        """
        import contextlib, io
        import gem
        from gem.utils.debug import run_and_print_episode
        env = gem.make("game:GuessTheNumber-v0-easy")
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            run_and_print_episode(env, lambda _: env.sample_random_action())
        assert "Step" in buf.getvalue() or "step" in buf.getvalue().lower()
        """,
    ),
]


@dataclass(frozen=True)
class Outcome:
    """What running one idiom gave: ``pass``, ``fail`` (with the error) or ``skip`` (why)."""

    idiom: Idiom
    status: str
    detail: str = ""


def missing_modules(idiom: Idiom) -> list[str]:
    """The modules an idiom needs that this interpreter cannot import."""
    return [m for m in idiom.needs if importlib.util.find_spec(m) is None]


def run_idiom(idiom: Idiom, *, quiet: bool = True) -> Outcome:
    """Run one idiom's snippet in a fresh namespace (stdout swallowed when ``quiet``)."""
    missing = missing_modules(idiom)
    if missing:
        return Outcome(idiom, "skip", f"needs {', '.join(missing)}")
    namespace: dict[str, object] = {"__name__": f"gem_idiom_{idiom.name}"}
    code = compile(idiom.code, f"<idiom {idiom.name}>", "exec")
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out) if quiet else contextlib.nullcontext():
            exec(code, namespace)
    except BaseException as exc:  # an idiom's failure is a result, not a crash
        if isinstance(exc, KeyboardInterrupt):
            raise
        tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
        lines = [line for line in "".join(tb).splitlines() if line.strip()]
        return Outcome(idiom, "fail", "\n".join(lines[-6:]))
    return Outcome(idiom, "pass")
