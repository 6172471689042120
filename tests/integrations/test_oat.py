"""Oat: gemgym's actor and learner with Oat 0.2.4's own classes, on the CPU.

Oat is installed for real (``--no-deps --ignore-requires-python``: it declares Python < 3.11;
``scripts/install-oat``). What cannot be installed beside gemgym has a stand-in
(``_oat_standins.py``): Oat's launcher and shared-memory transport (imported, never called
here) and, without vLLM, the inference engine, whose place gemgym's transformers backend takes.
Oat's own code that runs: the actor's ``init`` (sampling settings, engine construction,
tokenizer), ``PPOMultiTurnActor.step`` (episode metrics, serialisation), the multi-turn
collector's metrics, the learner's ``process_feedback_data`` (discounted returns as
advantages), its ``MultiTurnTransitionDataset`` and completion masks (what PPO trains on),
``DeepspeedStrategy.setup_dataloader``, ``all_reduce`` and ``broadcast``, the learner's
``_pre_evaluate``/``_post_evaluate`` over a one-process gloo group, and Oat's PPO update
(``learning_step``) on the collected episodes, with plain torch in place of the DeepSpeed engine
(``TorchStrategy``: ``loss.backward()``, ``optimizer.step()``). DeepSpeed engines, NCCL weight
sync and Oat's launcher are not run: ``benchmarks/gpu_oat.sh`` on a GPU.
"""

from __future__ import annotations

import concurrent.futures
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest

from helpers.extras import needs_module, reason

from . import _oat_standins

needs_module("deepspeed", "oat")
pytest.importorskip(
    "oat.types", reason=reason("oat", "then Oat itself: scripts/install-oat, docs/integrations.md")
)
pytestmark = pytest.mark.oat

import torch  # noqa: E402

with _oat_standins.installed(engine=True) as STANDINS:
    from oat.algorithms.ppo_multiturn import (
        MultiTurnFeedbackCollector,
        MultiTurnTransitionDataset,
        PPOMultiTurnActor,
        PPOMultiTurnLearner,
    )
    from oat.types import Transition
    from oat.utils.deepspeed import DeepspeedStrategy

    from gemgym.integrations.oat import (
        EVAL_SEED,
        GemgymOatActor,
        GemgymOatArgs,
        GemgymOatLearner,
        oat_transitions,
    )

import gemgym  # noqa: E402
from gemgym.errors import GemGymError  # noqa: E402
from gemgym.integrations.common import env_factory  # noqa: E402
from gemgym.llm.record import TokenEpisode  # noqa: E402
from gemgym.llm.testing import build_tiny_chat_model  # noqa: E402
from gemgym.llm.transformers_backend import TransformersBackend  # noqa: E402
from helpers.net import free_port  # noqa: E402

from .conftest import VarietyEnv  # noqa: E402

VARIETY = "oat-test:Variety-v0"
gemgym.register(VARIETY, VarietyEnv, override=True)
GAMMA = 0.9


class TransformersActor(GemgymOatActor):
    """The adapter as is, sampling through gemgym's transformers backend instead of vLLM."""

    def make_backend(self) -> Any:
        return TransformersBackend(self.args.pretrain, self.tokenizer)  # CUDA when there is one


class Futures:
    """What launchpad's courier gives the learner: ``actor.futures.method(...)`` -> future."""

    def __init__(self, actor: Any) -> None:
        self._actor = actor

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._actor, name)

        def call(*args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
            fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
            fut.set_result(method(*args, **kwargs))
            return fut

        return call


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_chat_model(tmp_path_factory.mktemp("oat") / "tiny", "chatml")


def make_args(model: Path, **overrides: Any) -> GemgymOatArgs:
    fields: dict[str, Any] = {
        "pretrain": str(model),
        "env": f"guess,{VARIETY}",
        "num_envs": 3,
        "max_turns": 3,
        "rollout_batch_size_per_device": 10,
        "generate_max_length": 12,
        "eval_generate_max_length": 12,
        "max_model_len": 2048,
        "gamma": GAMMA,
        "oracle": "",
        "eval_episodes": 2,
        "max_train": 40,
    }
    fields.update(overrides)
    return GemgymOatArgs(**fields)


def make_actor(model: Path, tmp_path: Path, **overrides: Any) -> TransformersActor:
    actor = TransformersActor(None, {"model": str(model)}, make_args(model, **overrides))
    actor.init(0, str(tmp_path))
    actor.ipc_client = _oat_standins.MemoryIPC()  # Oat's plasma transport, in memory
    return actor


def replay(env_id: str, seed: int | None, actions: list[str]) -> list[float]:
    env = env_factory(env_id)()
    env.reset(seed=seed)
    rewards = [float(env.step(a)[1]) for a in actions]
    env.close()
    return rewards


def discounted(rewards: list[float], gamma: float) -> list[float]:
    out, g = [0.0] * len(rewards), 0.0
    for i in reversed(range(len(rewards))):
        g = rewards[i] + gamma * g
        out[i] = g
    return out


def test_the_actor_collects_oat_transitions_from_mixed_envs(model: Path, tmp_path: Path) -> None:
    actor = make_actor(model, tmp_path)
    assert isinstance(actor, PPOMultiTurnActor)
    assert actor.llm.kwargs["worker_extension_cls"] == "oat.utils.distributed.WorkerWrap"
    assert actor.sampling_params.logprobs == 1  # Oat's RewardActor asks for log-probs

    handle = actor.step()  # Oat's own step: collect_experience, metrics, serialisation
    feedback: list[list[Transition]] = actor.ipc_client.deserialize_ipc(handle)
    tokens = actor.last_episodes
    assert sum(len(ep) for ep in feedback) >= 10
    assert len(feedback) == len(tokens)
    assert {e.env_id for e in tokens} == {"guess", VARIETY}
    assert max(len(e.turns) for e in tokens) == 3  # multi-turn episodes

    for episode, token_ep in zip(feedback, tokens, strict=True):
        assert all(isinstance(t, Transition) for t in episode)
        # the env's rewards: replaying the replies in a fresh env gives them again
        assert [t.rewards for t in episode] == replay(
            token_ep.env_id, token_ep.seed, [t.response for t in episode]
        )
        assert [t.done for t in episode] == [False] * (len(episode) - 1) + [True]
        full = token_ep.input_ids
        for t, turn in zip(episode, token_ep.turns, strict=True):
            n = len(t.prompt_ids)
            # the prompt is everything before the action; the response the sampled ids
            assert full[: n + len(t.response_ids)] == list(t.prompt_ids) + list(t.response_ids)
            assert t.response_ids == turn.action_ids and len(t.response_logprobs) == len(
                t.response_ids
            )
            assert t.response_logprobs == turn.logprobs
            assert t.prompt == actor.tokenizer.decode(t.prompt_ids)
        # Oat's step put its episode metrics on every transition
        assert set(episode[0].info) >= {"actor/mean_episode_return", "actor/guess/return"}

    # Oat's multi-turn collector computes its metrics over these episodes
    metrics = MultiTurnFeedbackCollector.get_metrics(SimpleNamespace(), 1.0, feedback)  # type: ignore[arg-type]
    assert metrics["actor/num_transitions"] == sum(len(ep) for ep in feedback)

    # a second collection plays new initial states
    actor.collect_experience()
    assert {e.seed for e in actor.last_episodes}.isdisjoint({e.seed for e in tokens})
    actor.close_envs()


class _BreaksEnv(VarietyEnv):
    """A :class:`VarietyEnv` whose second step raises in the episodes numbered (by reset) in
    :attr:`fail` (``-1``: every episode)."""

    resets: ClassVar[int] = 0
    fail: ClassVar[set[int]] = set()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        self.k = _BreaksEnv.resets
        _BreaksEnv.resets += 1
        return super().reset(seed=seed, options=options)

    def step(self, action: str) -> Any:
        if (self.k in _BreaksEnv.fail or -1 in _BreaksEnv.fail) and self.t >= 1:
            raise RuntimeError("the env broke")
        return super().step(action)


BREAKS = "oat-test:Breaks-v0"
gemgym.register(BREAKS, _BreaksEnv, override=True)


@pytest.fixture(autouse=True)
def _heal_breaksenv() -> Any:
    """The registered env is healthy again after each test (the conformance checker plays every
    registered id, this one too, in the same session)."""
    yield
    _BreaksEnv.fail = set()


@pytest.mark.parametrize("keep", [False, True])
def test_failed_episodes_are_left_out_of_the_transitions(
    model: Path, tmp_path: Path, keep: bool
) -> None:
    _BreaksEnv.resets, _BreaksEnv.fail = 0, {1}
    actor = make_actor(
        model, tmp_path, env=BREAKS, num_envs=3, rollout_batch_size_per_device=1, keep_errors=keep
    )
    try:
        finished, info = actor.collect_experience()
    finally:
        actor.close_envs()
    failed = [e for e in actor.last_episodes if e.failed]
    assert len(actor.last_episodes) == len(finished) == (3 if keep else 2)
    assert info["actor/gemgym_failed_episodes"] == (0.0 if keep else 1.0)
    if keep:  # kept with its partial return: one turn played before its env broke
        (bad,) = failed
        assert bad.error_stage == "step" and len(bad.turns) == 1
        assert len(finished[actor.last_episodes.index(bad)]) == 1
    else:
        assert failed == []


def test_a_round_whose_every_episode_failed_stops_with_the_first_error(
    model: Path, tmp_path: Path
) -> None:
    _BreaksEnv.resets, _BreaksEnv.fail = 0, {-1}
    actor = make_actor(model, tmp_path, env=BREAKS, rollout_batch_size_per_device=1)
    try:
        with pytest.raises(GemGymError, match=r"every episode .* failed \(3\); the first at step"):
            actor.collect_experience()
    finally:
        actor.close_envs()


def test_oats_learner_turns_them_into_ppo_data(model: Path, tmp_path: Path) -> None:
    actor = make_actor(model, tmp_path)
    feedback = actor.ipc_client.deserialize_ipc(actor.step())
    rewards = [[t.rewards for t in ep] for ep in feedback]
    actor.close_envs()

    learner = GemgymOatLearner.__new__(GemgymOatLearner)  # Oat's _init needs GPUs
    assert isinstance(learner, PPOMultiTurnLearner)
    learner.args = actor.args
    learner.critic = None
    learner.pi_buffer, learner.all_buffer, learner.query_step = [], [], 0
    learner.process_feedback_data(feedback)  # Oat: discounted returns as advantages

    flat = [t for ep in feedback for t in ep]
    want = [r for ep in rewards for r in discounted(ep, GAMMA)]
    if len(flat) > actor.args.rollout_batch_size_per_device:  # Oat subsamples to the batch
        assert len(learner.pi_buffer) == actor.args.rollout_batch_size_per_device
    by_id = {id(t): w for t, w in zip(flat, want, strict=True)}
    for t in learner.pi_buffer:
        assert t.info["advantages"] == pytest.approx(by_id[id(t)], abs=1e-5)
        assert t.info["returns"] == pytest.approx(by_id[id(t)], abs=1e-5)

    strategy = DeepspeedStrategy(args=actor.args)
    strategy.is_rank_0 = lambda: True  # type: ignore[method-assign]
    dataset = MultiTurnTransitionDataset(learner.pi_buffer, actor.tokenizer, strategy)
    batch = dataset.collate_fn([dataset[i] for i in range(len(dataset))])
    masks = PPOMultiTurnLearner.get_completion_mask(
        learner, batch["attention_mask"], batch["prompt_ids_lens"]
    )
    for i, t in enumerate(learner.pi_buffer):
        trained = batch["input_ids"][i][masks[i]].tolist()
        assert trained == list(t.response_ids)  # PPO trains on the sampled tokens only
        assert len(batch["action_logprobs"][i]) == len(t.response_ids)
        assert batch["advantages"][i] == t.info["advantages"]


@pytest.fixture
def gloo(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))
    torch.distributed.init_process_group("gloo", rank=0, world_size=1)
    # DeepspeedStrategy.broadcast moves CPU tensors to the current CUDA device first
    monkeypatch.setattr(torch.cuda, "current_device", lambda: "cpu")
    yield torch.distributed
    torch.distributed.destroy_process_group()


def test_the_learner_evaluates_on_the_envs_and_needs_no_dataset(
    model: Path, tmp_path: Path, gloo: Any
) -> None:
    actor = make_actor(model, tmp_path, eval_env=f"guess,{VARIETY}")
    learner = GemgymOatLearner.__new__(GemgymOatLearner)
    learner.args = actor.args
    learner.actors = [SimpleNamespace(futures=Futures(actor))]
    learner.strategy = DeepspeedStrategy(args=actor.args)
    learner.args.learner_gpus_per_group = 1
    learner._same_actor_group = gloo.new_group([0])
    learner.pi_beta_lags_behind = False

    learner.prepare_data(learner.strategy, actor.tokenizer)
    assert len(learner.prompts_dataloader) == 40 // 10  # max_train / rollout batch
    assert next(iter(learner.prompts_dataloader))[0] == ("",) * 10

    first = learner.evaluate(None, steps=0)
    again = learner.evaluate(None, steps=1)
    for name in ("guess", VARIETY):
        assert first[f"eval/{name}/episodes"] == 2
        assert first[f"eval/{name}/turns"] >= 1
    assert {k: v for k, v in first.items() if k != "eval/elapse"} == {
        k: v for k, v in again.items() if k != "eval/elapse"
    }  # the same eval states, greedy decoding: the same results
    assert actor.args.eval_temperature == 0
    assert not actor.eval_mode  # Oat's notify_eval_done ran
    eps = actor.play("eval", actor.eval_env_factories, 2, EVAL_SEED, evaluation=True)
    assert [e.seed for e in eps["guess"]] == [EVAL_SEED, EVAL_SEED + 1]
    actor.close_envs()


class TorchStrategy(DeepspeedStrategy):
    """Oat's strategy with plain torch in place of the DeepSpeed engine (which needs GPUs):
    the same calls, ``loss.backward()`` and ``optimizer.step()``; Oat's ``all_reduce`` and
    ``broadcast`` run as they are over the gloo group."""

    grad_acc_step = 1

    def backward(self, loss: Any, model: Any, optimizer: Any, **_: Any) -> None:
        loss.backward()

    def optimizer_step(self, optimizer: Any, model: Any, scheduler: Any, **_: Any) -> None:
        optimizer.step()
        optimizer.zero_grad()

    def get_gradient_norm(self, model: Any, **_: Any) -> Any:
        return torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))


def test_oats_ppo_update_trains_on_the_collected_episodes(
    model: Path, tmp_path: Path, gloo: Any
) -> None:
    import functools

    from oat.utils.ops import masked_sum
    from transformers import AutoModelForCausalLM

    # the plain-logits path (the fused LM head needs Oat's DeepSpeed-wrapped model); beta 0: no
    # reference model; ReBN: whitened per-turn discounted returns
    actor = make_actor(model, tmp_path, use_fused_lm_head=False, beta=0.0, whiten_adv=True)
    feedback = actor.ipc_client.deserialize_ipc(actor.step())
    actor.close_envs()

    learner = GemgymOatLearner.__new__(GemgymOatLearner)
    learner.args = actor.args
    learner.critic = None
    learner.ref_model = None
    learner.pi_buffer, learner.all_buffer, learner.query_step = [], [], 0
    learner.strategy = TorchStrategy(args=actor.args)
    learner.masked_aggregator = functools.partial(  # what PPOLearner._init sets for drgrpo
        masked_sum, constant_normalizer=actor.args.generate_max_length
    )
    torch.manual_seed(0)
    learner.model = AutoModelForCausalLM.from_pretrained(str(model))
    learner.optimizer = torch.optim.SGD(learner.model.parameters(), lr=0.5)
    learner.scheduler = None
    before = [p.detach().clone() for p in learner.model.parameters()]

    learner.process_feedback_data(feedback)
    dataset = MultiTurnTransitionDataset(learner.pi_buffer, actor.tokenizer, learner.strategy)
    batch = dataset.collate_fn([dataset[i] for i in range(len(dataset))])
    learner.model.train()
    infos = learner.learning_step(batch)  # Oat's multi-turn PPO step, unchanged

    assert torch.isfinite(infos["pg_loss"]) and float(infos["policy_grad_norm"]) > 0
    # the log-probs the actor sampled with are the learner's for the same tokens: the prompt and
    # response ids line up (an off-by-one would show here as a large divergence)
    assert abs(float(infos["kl_sample_train_v1"])) < 1e-5
    assert abs(float(infos["sampler_learner_prob_diff_max"])) < 1e-5
    assert abs(float(infos["adv_mean"])) < 1e-4  # whitened
    changed = sum(
        not torch.equal(a, b) for a, b in zip(before, learner.model.parameters(), strict=True)
    )
    assert changed > 0


def test_transitions_of_a_recorded_episode() -> None:
    from gemgym.llm.record import TokenTurn

    ep = TokenEpisode(
        "env",
        0,
        1,
        "hi",
        model="m",
        prompt_ids=[1, 2, 3],
        prompt_messages=[{"role": "user", "content": "hi"}],
    )
    ep.turns = [
        TokenTurn(
            "hi",
            "a",
            0.5,
            action_ids=[4, 5],
            logprobs=[-0.1, -0.2],
            finish_reason="stop",
            next_ids=[6],
            next_observation="o",
        ),
        TokenTurn(
            "o",
            "b",
            1.0,
            True,
            info={"format_error": True},
            action_ids=[7],
            logprobs=[-0.3],
            finish_reason="length",
        ),
    ]
    ep.finish_reason = "env_end"
    tok = SimpleNamespace(decode=lambda ids: " ".join(map(str, ids)))
    a, b = oat_transitions(ep, tok)
    assert (a.prompt_ids, a.response_ids, a.obs, a.done) == ([1, 2, 3], [4, 5], "hi", False)
    assert (b.prompt_ids, b.response_ids, b.obs, b.done) == ([1, 2, 3, 4, 5, 6], [7], "o", True)
    assert b.response_is_truncated and not b.action_is_formatted and a.action_is_formatted
    assert b.prompt == "1 2 3 4 5 6"


def test_the_stand_ins_are_only_for_what_cannot_be_installed() -> None:
    import sys

    assert set(STANDINS) <= {"launchpad", "pyarrow.plasma", "vllm"}
    assert not set(STANDINS) & set(sys.modules)  # gone again after the imports
    if "launchpad" in STANDINS:
        import oat.utils.ipc

        with pytest.raises(RuntimeError, match="never to be used"):
            oat.utils.ipc.lp.stop()
    import oat.types

    # Oat itself is the installed package, not a stand-in
    assert Transition is oat.types.Transition and Path(oat.types.__file__).is_file()


@pytest.mark.vllm
@pytest.mark.skipif(
    not os.environ.get("GEMGYM_VLLM_PYTHON"),
    reason="set GEMGYM_VLLM_PYTHON to a Python with vLLM and Oat to run the actor on vLLM",
)
def test_the_actor_samples_with_oats_own_vllm_engine(tmp_path: Path) -> None:
    import json
    import subprocess

    from helpers.envs import CountingEnv

    python = os.environ["GEMGYM_VLLM_PYTHON"]
    has_oat = subprocess.run([python, "-c", "import oat.types"], capture_output=True)
    if has_oat.returncode != 0:
        pytest.skip("GEMGYM_VLLM_PYTHON has no Oat: PYTHON=... scripts/install-oat")
    # head size 64: vLLM's CPU attention supports it
    model = build_tiny_chat_model(tmp_path / "tiny", "chatml", hidden_size=128, num_heads=2)
    out = tmp_path / "out.json"
    src = str(Path(__file__).parents[2] / "src")
    run = subprocess.run(
        [
            python,
            str(Path(__file__).with_name("_oat_vllm_actor.py")),
            str(model),
            str(tmp_path),
            str(out),
        ],
        env={**os.environ, "PYTHONPATH": src, "VLLM_LOGGING_LEVEL": "WARNING"},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(out.read_text())
    assert got["standins"] == ["launchpad", "pyarrow.plasma"]  # the engine is vLLM itself
    episodes = got["episodes"]
    assert {e["env"] for e in episodes} == {"guess", "oat-test:Counting-v0"}
    assert sum(len(e["transitions"]) for e in episodes) >= 12
    gemgym.register("oat-test:Counting-v0", lambda: CountingEnv(episode_length=3), override=True)
    for e in episodes:
        assert e["rewards"] == replay(e["env"], e["seed"], e["replies"])
        for t in e["transitions"]:
            n = len(t["prompt_ids"])
            assert (
                e["input_ids"][: n + len(t["response_ids"])] == t["prompt_ids"] + t["response_ids"]
            )
            assert len(t["logprobs"]) == len(t["response_ids"]) > 0
            assert all(lp <= 0 for lp in t["logprobs"])
        assert [t["done"] for t in e["transitions"]][-1]
    assert "actor/mean_episode_return" in got["info_keys"]


@pytest.mark.filterwarnings("ignore::UserWarning")  # tyro on Oat's own `str = None` fields
def test_the_readme_commands_parse_with_oats_own_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    import shlex
    import sys

    from oat.args import default_args_validation, get_default_args
    from oat.types import RLAlgo

    readme = Path(__file__).parents[2] / "examples" / "oat" / "README.md"
    commands = [
        line
        for line in readme.read_text().splitlines()
        if line.startswith("python examples/oat/train.py")
    ]
    assert len(commands) == 4
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)  # Oat checks --gpus against it
    envs = []
    for command in commands:
        argv = shlex.split(command)[1:]
        monkeypatch.setattr(sys, "argv", argv)
        args = get_default_args(GemgymOatArgs)
        args.algo = "PPO"  # as train.py sets it
        args = default_args_validation(args)
        assert isinstance(args, GemgymOatArgs) and args.algo == RLAlgo.PPO
        assert args.whiten_adv and args.gamma == 0.9 and args.train_batch_size_per_device == 1
        envs.append(args.env)
    assert envs == ["guess", "math", "qa", "guess,math,qa"]
