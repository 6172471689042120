r"""The Python tool: the model runs code in the sandbox and sees its output.

Action format (GEM's): ``<python>CODE</python>`` or a fenced block ````` ```python\nCODE\n``` `````;
when an action holds several, the block that *ends* first is the call, and text after it is
dropped from ``parsed_action`` (GEM's rule). The observation is GEM's:
``"Code execution result: " + stdout`` (``+ "\n" + stderr`` when there is any).

Differences from GEM's ``PythonCodeTool``: code runs in :mod:`gemgym.sandbox` (bubblewrap by
default, fail closed) rather than behind a substring blacklist; the ``timeout`` given is the one
enforced (GEM always used 10 s); no hidden re-run with ~40 lines of imports prepended; and an
optional persistent interpreter (``persistent=True``): earlier successful cells of the episode
are replayed silently before each new cell, so names defined earlier exist (side effects such as
random draws are replayed too, and replay time counts toward the timeout).
"""

from __future__ import annotations

import re
from typing import Any

from gemgym.errors import ConfigError, SandboxError, ToolError
from gemgym.sandbox import Sandbox, shared_sandbox
from gemgym.tools.base import (
    DEFAULT_MAX_OUTPUT_CHARS,
    Tool,
    ToolCall,
    ToolResult,
    check_max_output_chars,
    truncate_output,
)

__all__ = ["PythonTool", "parse_python_block"]

_TAG_RE = re.compile(r"<python>(.*?)</python>", re.DOTALL)
_FENCE_RE = re.compile(r"```python[ \t]*\n(.*?)```", re.DOTALL)
RESULT_PREFIX = "Code execution result: "


def _tag_block(action: str) -> tuple[str, int] | None:
    """``_TAG_RE.search`` in one pass (the regex is quadratic on many unclosed openers)."""
    start = action.find("<python>")
    if start < 0:
        return None
    close = action.find("</python>", start + 8)
    if close < 0:
        return None
    return action[start + 8 : close], close + 9


def _fence_block(action: str) -> tuple[str, int] | None:
    """``_FENCE_RE.search`` in one pass (the regex is quadratic on many unclosed openers)."""
    start = action.find("```python")
    while start >= 0:
        body = start + 9
        while body < len(action) and action[body] in " \t":
            body += 1
        if action.startswith("\n", body):
            close = action.find("```", body + 1)
            if close < 0:
                return None  # no later opener can close either
            return action[body + 1 : close], close + 3
        start = action.find("```python", start + 1)
    return None


def parse_python_block(action: str) -> tuple[str, int] | None:
    """``(code, end)`` of the first complete Python block in ``action`` (earliest end wins).

    The same blocks as ``<python>(.*?)</python>`` and ````` ```python[ \t]*\n(.*?)``` `````,
    found in time linear in the reply's length.
    """
    if not isinstance(action, str):
        return None
    found = [b for b in (_tag_block(action), _fence_block(action)) if b is not None]
    if not found:
        return None
    return min(found, key=lambda b: b[1])


class PythonTool(Tool):
    """Run the model's Python code in a sandbox (see the module docstring).

    Args:
        sandbox: the sandbox to run in; ``None`` uses the process-wide shared sandbox of
            ``backend`` (made on first use; stateless, so sharing it is safe).
        backend: the sandbox backend when ``sandbox`` is ``None`` (``"auto"`` fails closed
            when no isolating backend exists).
        timeout: wall seconds per call.
        persistent: keep names defined by earlier successful calls of the episode.
        keep_error_last_line: on an error, show only the last line of stderr (GEM's option).
        max_output_chars: cut longer observations to this many characters, keeping their start
            and end around a ``[... N characters cut ...]`` line (``None``: no cut beyond the
            sandbox's output limit).
        max_observation_chars: the former name of ``max_output_chars``, still accepted.
    """

    name = "python"
    blocking_io = True

    def __init__(
        self,
        sandbox: Sandbox | None = None,
        backend: str = "auto",
        timeout: float = 5.0,
        persistent: bool = False,
        keep_error_last_line: bool = False,
        max_output_chars: int | None = DEFAULT_MAX_OUTPUT_CHARS,
        max_observation_chars: int | None = None,
    ) -> None:
        if sandbox is not None and not isinstance(sandbox, Sandbox):
            raise ConfigError(f"sandbox must be a gemgym.sandbox.Sandbox, got {sandbox!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise ConfigError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self._sandbox = sandbox
        self.backend = backend
        self.timeout = float(timeout)
        self.persistent = persistent
        self.keep_error_last_line = keep_error_last_line
        max_output_chars = check_max_output_chars(max_output_chars)
        if max_observation_chars is not None:
            alias = check_max_output_chars(max_observation_chars)
            if max_output_chars not in (alias, DEFAULT_MAX_OUTPUT_CHARS):
                raise ConfigError(
                    f"max_output_chars={max_output_chars} and max_observation_chars={alias} "
                    "disagree; give only max_output_chars (max_observation_chars is its old name)"
                )
            max_output_chars = alias
        self.max_output_chars = max_output_chars
        self.history: list[str] = []

    @property
    def max_observation_chars(self) -> int | None:
        """The former name of :attr:`max_output_chars`."""
        return self.max_output_chars

    @max_observation_chars.setter
    def max_observation_chars(self, value: int | None) -> None:
        self.max_output_chars = check_max_output_chars(value)

    @property
    def sandbox(self) -> Sandbox:
        """The sandbox calls run in."""
        if self._sandbox is not None:
            return self._sandbox
        return shared_sandbox(self.backend)

    def warmup(self) -> None:
        """Set up the sandbox now and start its workers, not in the first call."""
        self.sandbox.warm_up()

    def instructions(self) -> str:
        state = (
            " Variables and functions you define stay available in later calls."
            if self.persistent
            else " Each call starts a fresh interpreter."
        )
        return (
            "You can run Python code: write it between <python> and </python> (or in a "
            "```python code block) and stop your reply there. The code runs and you see what "
            "it prints (stdout, then stderr) in the next message; use print() to see values."
            f" Calls time out after {self.timeout:g} seconds.{state}"
        )

    def parse(self, action: str) -> ToolCall | None:
        found = parse_python_block(action)
        if found is None:
            return None
        code, end = found
        return ToolCall(self.name, code, action[:end])

    def execute(self, call: ToolCall) -> ToolResult:
        code = str(call.arguments)
        setup = "\n".join(self.history) if self.persistent and self.history else None
        try:
            result = self.sandbox.run(code, timeout=self.timeout, setup=setup)
        except SandboxError as e:  # the sandbox itself failed (the code's errors are results)
            raise ToolError(f"the Python tool's sandbox failed: {e}") from e
        info: dict[str, Any] = {
            "exit_code": result.exit_code,
            "timed_out": result.timed_out,
            "killed_by": result.killed_by,
            "duration": result.duration,
        }
        if result.error is not None:
            info["sandbox_error"] = result.error
            return ToolResult(f"{RESULT_PREFIX}sandbox error: {result.error}", False, info)
        stderr = result.stderr
        if result.timed_out:
            stderr += f"TimeoutError: execution timed out after {self.timeout:g} seconds"
        elif result.killed_by is not None and result.killed_by != "memory":
            stderr += f"Killed: the {result.killed_by.replace('_', ' ')} limit was exceeded"
        if not result.ok and self.keep_error_last_line and stderr.strip():
            stderr = stderr.strip().splitlines()[-1]
        observation = RESULT_PREFIX + result.stdout
        if stderr:
            observation += "\n" + stderr
        observation = truncate_output(observation, self.max_output_chars)
        if result.ok and self.persistent:
            self.history.append(code)
        return ToolResult(observation, result.ok, info)

    def reset(self) -> None:
        self.history.clear()

    def close(self) -> None:
        """Forget the episode's state (a shared sandbox stays open for other users)."""
        self.history.clear()
