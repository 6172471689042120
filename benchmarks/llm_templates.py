"""Where incremental rendering differs from ``apply_chat_template(whole conversation)``.

Run ``.venv/bin/python benchmarks/llm_templates.py`` (CPU, about half a minute).

For every template family of :mod:`gemgym.llm.testing` (ChatML, Qwen2.5, Qwen3, Llama 3) it
rolls out 3-turn episodes (``CountingEnv`` of ``tests/helpers/envs.py``) and compares the ids the model
was conditioned on (:class:`~gemgym.llm.ChatRenderer`: sampled ids verbatim, observations
rendered by the template) with the template's rendering of the whole conversation
(:func:`~gemgym.llm.compare_with_full_render`):

* ``sampled``: ids sampled by a random-initialised model (temperature 1); the column
  ``retok`` is the share of turns whose sampled ids are not what the tokenizer makes of their
  own decoded text (what re-tokenising would change);
* ``plain``, ``think``, ``trailing ws``: replies written as text and encoded by the tokenizer
  (``The answer is \\boxed{5}.``; ``<think>...</think>`` reasoning then the answer; the answer
  followed by a newline), so only the template's own rules can make a difference.

``equal`` is the share of episodes whose two id sequences are identical, ``turns`` the share of
action turns whose ids differ after re-rendering.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from _testkit import CountingEnv

from gemgym.llm import (
    BackendCapabilities,
    ChatRenderer,
    Generation,
    GenerationRequest,
    SamplingParams,
    TransformersBackend,
    build_tiny_chat_model,
    compare_with_full_render,
    rollout_tokens,
)
from gemgym.llm.testing import TEMPLATE_FAMILIES

EPISODES = 32
STYLES = {
    "plain": "The answer is \\boxed{5}.",
    "think": "<think>\nIt is more than 4.\n</think>\n\nThe answer is \\boxed{5}.",
    "trailing ws": "The answer is \\boxed{5}.\n",
}


class Texts:
    """A backend that replies with a fixed text, encoded by the tokenizer."""

    def __init__(self, tok: Any, text: str) -> None:
        self.tokenizer, self.text = tok, text
        self.name = "text"
        self.capabilities = BackendCapabilities(logprobs=False)

    async def generate(self, request: GenerationRequest) -> Generation:
        ids = self.tokenizer(self.text, add_special_tokens=False)["input_ids"]
        return Generation([*ids, self.tokenizer.eos_token_id], None, self.text, "stop")

    async def aclose(self) -> None:
        pass


def measure(tok: Any, backend: Any, system: str | None) -> tuple[float, float, float]:
    """``(share of equal episodes, share of changed turns, share of re-tokenised turns)``."""
    eps = rollout_tokens(
        CountingEnv(episode_length=3),
        backend,
        tok,
        episodes=EPISODES,
        batch_size=16,
        seed=0,
        system_prompt=system,
        sampling=SamplingParams(max_tokens=16, seed=0),
    )
    r = ChatRenderer(tok, system_prompt=system)
    diffs = [compare_with_full_render(e, r) for e in eps]
    turns = sum(len(e.turns) for e in eps)
    retok = sum(
        tok(t.action_text, add_special_tokens=False)["input_ids"]
        != [i for i in t.action_ids if i not in tok.all_special_ids]
        for e in eps
        for t in e.turns
    )
    return (
        sum(d.equal for d in diffs) / len(eps),
        sum(d.changed_turns for d in diffs) / turns,
        retok / turns,
    )


def main() -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(1)
    print(f"{'family':<8} {'system':<7} {'reply':<12} {'equal':>6} {'turns':>6} {'retok':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        for family in TEMPLATE_FAMILIES:
            path = build_tiny_chat_model(Path(tmp) / family, family)
            tok = AutoTokenizer.from_pretrained(path)
            model = AutoModelForCausalLM.from_pretrained(path)
            for system in (None, "Be brief."):
                rows: list[tuple[str, Any]] = [
                    ("sampled", TransformersBackend(model, tok, device="cpu"))
                ]
                rows += [(k, Texts(tok, v)) for k, v in STYLES.items()]
                for label, backend in rows:
                    equal, turns, retok = measure(tok, backend, system)
                    sys_label = "yes" if system else "no"
                    print(
                        f"{family:<8} {sys_label:<7} {label:<12} {equal:>6.0%} {turns:>6.0%} "
                        f"{retok:>6.0%}"
                    )


if __name__ == "__main__":
    main()
