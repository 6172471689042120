"""Token-level LLM rollouts: episodes/s and the share of wall time spent outside the model.

Run ``.venv/bin/python benchmarks/llm_rollout.py`` (CPU, a ~40k-parameter random-initialised
chat model built on the fly; about a minute) or ``benchmarks/llm_rollout.py --gpu`` on a machine
with CUDA (a random-initialised model of about 0.46B parameters: Qwen2 architecture, hidden size
1024, 24 layers; bfloat16).

For each env (``game:GuessTheNumber-v0-easy``, ``game:Sudoku-v0-easy``, ``math:GSM8K`` with the
Python tool) it plays ``--episodes`` episodes with :func:`gemgym.llm.rollout_tokens` and the
:class:`~gemgym.llm.TransformersBackend`, ``--batch-size`` episodes in flight (math with the
tool: once for each of ``--math-in-flight``, default 16 and 48, with at least twice as many
episodes as in flight), and reports:

* ``ep/s``: episodes per second of wall time;
* ``turns/ep``, ``tools/ep``: turns and tool calls per episode;
* ``batch``: mean requests per model batch;
* ``model s``: seconds the model was busy (its batches: forward passes and sampling), the
  baseline measured in the same run;
* ``outside``: ``1 - model s / wall s``, the share of wall time in which the model had nothing
  to do because every episode was in its env, its tool, its rendering or bookkeeping (the goal:
  under 5 % on CPU with the tiny model, under 1 % on a GPU);
* ``render``: the share of wall time the event loop spent rendering and tokenising observations
  (it overlaps the model, which runs in its own thread);
* ``env s``: seconds in env resets and steps (tools included), summed over the episodes (they
  overlap each other and the model);
* ``wait s``: seconds episodes waited for the model (queue and batch), summed over episodes;
* ``idle ms``: the model's idle time before its first batch (the first resets and prompts), between
  batches, and after its last one (the last steps and grading), around ``rollout_tokens``.

``wall s``, ``render``, ``env s`` and ``wait s`` come from the engine's
:class:`~gemgym.episodes.EngineStats`.

A random model's replies are not valid moves, and a game ends at the first invalid move; so that
episodes last several turns and call tools, a fresh copy of the model is first fine-tuned, for
each env, for ``--warmup-steps`` steps on scripted replies of the right format (``\\boxed{7}`` for the number
game, ``\\boxed{r c d}`` for Sudoku, a ``<python>`` call then a boxed answer for math), which are
rolled out through the same engine with a scripted backend. Each env's vector env is built and
reset once before its clock starts (env construction, dataset loading and sandbox start-up are
not counted).
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from gemgym.llm import (
    BackendCapabilities,
    Generation,
    GenerationRequest,
    RolloutStats,
    SamplingParams,
    TokenEpisode,
    TransformersBackend,
    build_tiny_chat_model,
    rollout_tokens,
)
from gemgym.vector import make_vector_env
from gemgym.wrappers.tools import python_tool_wrapper

ENVS: list[tuple[str, str, dict[str, Any]]] = [
    ("guess", "game:GuessTheNumber-v0-easy", {}),
    ("sudoku", "game:Sudoku-v0-easy", {}),
    ("math+python", "math:GSM8K", {"dataset": "sample"}),
]
STOP = ("</python>",)


def scripted_reply(name: str, turn: int, rng: random.Random) -> str:
    """A reply of the right format (the warm-up data)."""
    if name == "guess":
        return f"\\boxed{{{rng.randint(1, 10)}}}"
    if name == "sudoku":
        return f"\\boxed{{{rng.randint(1, 4)} {rng.randint(1, 4)} {rng.randint(1, 4)}}}"
    if turn == 0:
        return f"<python>print({rng.randint(1, 99)} * {rng.randint(1, 99)})</python>"
    return f"\\boxed{{{rng.randint(1, 999)}}}"


class Scripted:
    """The warm-up data generator: a backend that replies with :func:`scripted_reply`."""

    def __init__(self, tok: Any, name: str, seed: int) -> None:
        self.tokenizer, self.env_name, self.seed = tok, name, seed
        self.name = "scripted"
        self.capabilities = BackendCapabilities(logprobs=False)

    async def generate(self, request: GenerationRequest) -> Generation:
        turn = int(request.request_id.split("-")[1])
        # one stream per request, so the data do not depend on the order replies are asked for
        rng = random.Random(f"{self.seed}-{request.request_id}")
        text = scripted_reply(self.env_name, turn, rng)
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return Generation([*ids, self.tokenizer.eos_token_id], None, text, "stop")

    async def aclose(self) -> None:
        pass


def env_kwargs(name: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    if name == "math+python":
        return {**kwargs, "wrappers": [python_tool_wrapper(timeout=5, max_tool_uses=2)]}
    return dict(kwargs)


def warm_up(
    model: Any, tok: Any, env: tuple[str, str, dict[str, Any]], steps: int, device: str
) -> float:
    """Fine-tune on scripted episodes of one env (masked cross-entropy); returns the last loss."""
    import torch

    name, env_id, kwargs = env
    data: list[TokenEpisode] = rollout_tokens(
        env_id,
        Scripted(tok, name, 0),
        episodes=48,
        batch_size=8,
        seed=1000,
        max_turns=3,
        **env_kwargs(name, kwargs),
    )
    # whole episodes (a model trained on short windows does not carry over to long prompts)
    windows = [(e.input_ids, e.loss_mask) for e in data]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2 if device == "cpu" else 3e-4)
    rng = random.Random(0)
    model.train()
    loss_value = float("nan")
    for _ in range(steps):
        batch = rng.sample(windows, 8)
        length = max(len(w) for w, _ in batch)
        ids_t = torch.full((len(batch), length), tok.pad_token_id, dtype=torch.long)
        mask_t = torch.zeros((len(batch), length))
        for i, (w, m) in enumerate(batch):
            ids_t[i, : len(w)] = torch.tensor(w)
            mask_t[i, : len(w)] = torch.tensor(m, dtype=torch.float)
        ids_t, mask_t = ids_t.to(device), mask_t.to(device)
        logits = model(input_ids=ids_t).logits[:, :-1].float()
        nll = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), ids_t[:, 1:].reshape(-1), reduction="none"
        )
        m_flat = mask_t[:, 1:].reshape(-1)
        loss = (nll * m_flat).sum() / m_flat.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss_value = float(loss.detach())
    model.eval()
    return loss_value


class CountingBatches(TransformersBackend):
    """The transformers backend, counting its batches and timing the first and the last."""

    batches = 0
    first_start = 0.0
    last_end = 0.0

    def _generate_batch(self, requests: Any) -> list[Generation]:
        self.batches += 1
        if not self.first_start:
            self.first_start = time.perf_counter()
        try:
            return super()._generate_batch(requests)
        finally:
            self.last_end = time.perf_counter()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--gpu", action="store_true", help="the ~0.5B model on CUDA")
    p.add_argument("--device", default=None, help="override the device (e.g. cpu for a smoke run)")
    p.add_argument("--episodes", type=int, default=None)
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--max-tokens", type=int, default=None)
    p.add_argument("--warmup-steps", type=int, default=None)
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    p.add_argument("--vector-backend", default="sync")
    p.add_argument("--envs", default=",".join(n for n, _, _ in ENVS))
    p.add_argument("--repeats", type=int, default=1, help="runs of each row; the median is kept")
    p.add_argument(
        "--math-in-flight", default="16,48", help="episodes in flight for math (comma-separated)"
    )
    args = p.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(args.threads)
    device = args.device or ("cuda" if args.gpu else "cpu")
    episodes = args.episodes or (512 if args.gpu else 64)
    batch_size = args.batch_size or (128 if args.gpu else 16)
    max_tokens = args.max_tokens or (64 if args.gpu else 24)
    steps = args.warmup_steps if args.warmup_steps is not None else (100 if args.gpu else 60)
    size = (
        {"hidden_size": 1024, "num_layers": 24, "num_heads": 16, "intermediate_size": 4864}
        if args.gpu
        else {}
    )
    print(f"episodes={episodes} batch_size={batch_size} max_tokens={max_tokens} T=1.0")
    header = f"{'env':<12} {'flight':>6} {'ep/s':>8} {'turns/ep':>8} {'tools/ep':>8} {'batch':>6} "
    header += f"{'wall s':>7} {'model s':>7} {'outside':>8} {'render':>7} {'env s':>7} "
    header += f"{'wait s':>7} {'idle ms':>15}  finish"
    wanted = set(args.envs.split(","))
    rows: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = build_tiny_chat_model(Path(tmp) / "model", "qwen2", **size)
        tok = AutoTokenizer.from_pretrained(path)
        for env in ENVS:
            name, env_id, kwargs = env
            if name not in wanted:
                continue
            model = AutoModelForCausalLM.from_pretrained(path).to(device)
            t0 = time.perf_counter()
            loss = warm_up(model, tok, env, steps, device)
            n_params = sum(q.numel() for q in model.parameters())
            print(
                f"{name}: {n_params / 1e6:.2f}M parameters on {device}; warm-up {steps} steps "
                f"in {time.perf_counter() - t0:.1f}s (loss {loss:.3f})"
            )
            if args.gpu:
                model.to(torch.bfloat16)
            in_flight = [batch_size]
            if name == "math+python":
                in_flight = [int(k) for k in args.math_in_flight.split(",")]
            for n in in_flight:
                runs = sorted(
                    run(
                        name,
                        env_id,
                        kwargs,
                        model,
                        tok,
                        device,
                        args,
                        max(episodes, 2 * n),
                        n,
                        max_tokens,
                    )
                    for _ in range(args.repeats)
                )
                rows.append(runs[len(runs) // 2][1])  # the median run by its share outside
    print(header)
    for row in rows:
        print(row)


def run(
    name: str,
    env_id: str,
    kwargs: dict[str, Any],
    model: Any,
    tok: Any,
    device: str,
    args: argparse.Namespace,
    episodes: int,
    batch_size: int,
    max_tokens: int,
) -> tuple[float, str]:
    """Roll out one env (its vector env is built and reset once before the clock starts);
    returns the share of wall time outside the model and the row."""
    kw = env_kwargs(name, kwargs)
    wrappers = kw.pop("wrappers", None)
    venv = make_vector_env(
        [env_id] * batch_size,
        [kw] * batch_size,
        wrappers=wrappers,
        backend=args.vector_backend,
        autoreset_mode="disabled",
    )
    venv.reset(seed=10_000)
    backend = CountingBatches(model, tok, device=device, max_batch_size=batch_size)
    stats = RolloutStats()
    with venv:
        t0 = time.perf_counter()
        eps = rollout_tokens(
            venv,
            backend,
            episodes=episodes,
            seed=0,
            sampling=SamplingParams(temperature=1.0, max_tokens=max_tokens, stop=STOP, seed=0),
            max_turns=8,
            stats=stats,
        )
        t1 = time.perf_counter()
    # the model's idle time: before its first batch, between batches, after its last one
    head, tail = backend.first_start - t0, t1 - backend.last_end
    middle = (t1 - t0) - backend.model_seconds - head - tail
    turns = sum(len(e.turns) for e in eps) / len(eps)
    tools = sum(t.next_role == "tool" for e in eps for t in e.turns) / len(eps)
    finish: dict[str, int] = {}
    for e in eps:
        key = e.finish_reason if e.truncation is None else f"{e.finish_reason}:{e.truncation}"
        finish[key] = finish.get(key, 0) + 1
    outside = 1 - backend.model_seconds / stats.wall_s
    return outside, (
        f"{name:<12} {batch_size:>6} {len(eps) / stats.wall_s:>8.1f} {turns:>8.2f} {tools:>8.2f} "
        f"{stats.requests / max(backend.batches, 1):>6.1f} {stats.wall_s:>7.2f} "
        f"{backend.model_seconds:>7.2f} {outside:>7.1%} {stats.render_s / stats.wall_s:>7.1%} "
        f"{stats.env_s:>7.2f} {stats.model_s:>7.2f} "
        f"{head * 1e3:>5.0f}/{middle * 1e3:>4.0f}/{tail * 1e3:>4.0f}  {finish}"
    )


if __name__ == "__main__":
    main()
