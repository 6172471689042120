"""``gem.tools.python_code_tool``: GEM's ``PythonCodeTool`` on gemgym's :class:`PythonTool`.

GEM's text: its instructions, its parsing (the first ``<python>...</python>`` or fenced python
block; the parsed action is the reply up to its end) and its result (``"Code execution result: "``,
stdout, then stderr after a newline, leading blanks stripped, a newline at the end). The code
runs in gemgym's isolating sandbox with the given ``timeout`` (GEM ran a bare subprocess behind
a substring blacklist and always waited 10 s); ``sandbox_type`` is accepted and ignored (both of
GEM's values get the sandbox).
"""

from __future__ import annotations

import re
from typing import Any

from gemgym.compat.gem.tools.base_tool import GemgymTool

__all__ = ["INSTRUCTIONS", "PythonCodeTool"]

INSTRUCTIONS = (
    "Solve the above problem step by step. You now have the ability to selectively write "
    "executable Python code to enhance your reasoning process. The Python code will be executed "
    'by an external sandbox, and the output (after "Code execution result: ") is returned to '
    "aid your reasoning and help you arrive at the final answer. The Python code should be "
    "complete scripts, including necessary imports, wrapped within <python>...</python> tags or "
    "using ```python...``` code block. Return your final answer within \\boxed{}."
)
"""GEM's instructions for the Python tool, word for word."""

_PATTERNS = (
    re.compile(r"<python>(.*?)</python>", re.DOTALL),
    re.compile(r"```\n?python(.*?)```", re.DOTALL),
)


class PythonCodeTool(GemgymTool):
    """``<python>...</python>`` or a fenced python block, run in a sandbox."""

    tool_type = "python_code"

    def __init__(
        self,
        timeout: float = 5,
        sandbox_type: str = "none",
        keep_error_last_line: bool = False,
        num_workers: int = 1,
        **kwargs: Any,
    ) -> None:
        from gemgym.compat.gem._adapt import warn_ignored

        super().__init__(num_workers)
        for name in kwargs:
            warn_ignored("PythonCodeTool()", name)
        self.timeout = timeout
        self.sandbox_type = sandbox_type
        self.keep_error_last_line = keep_error_last_line

    def instruction_string(self) -> str:
        return INSTRUCTIONS

    def _parse_action(self, action: str) -> tuple[str | None, str, bool]:
        """GEM's parse: ``(code, parsed action, found)`` for the block that ends first."""
        code: str | None = None
        parsed_action = action
        found = False
        end = len(action)
        for pattern in _PATTERNS:
            match = pattern.search(action)
            if match:
                found = True
                if match.end() <= end:
                    code = match.group(1).strip()
                    parsed_action = action[: match.end()]
                    end = match.end()
        return code, parsed_action, found

    def execute_action(self, action: Any) -> tuple[bool, bool, str, str]:
        if not isinstance(action, str):  # GEM's tools took any object; nothing to parse
            return False, True, "", str(action)
        code, parsed_action, found = self._parse_action(action)
        if not found or code is None:
            return False, True, "", parsed_action
        result = self.tool.sandbox.run(code, timeout=float(self.timeout))
        if result.error is not None:
            stdout, stderr = "", f"sandbox error: {result.error}"
        elif result.timed_out:
            stdout, stderr = result.stdout, f"Execution timed out after {self.timeout} seconds."
        else:
            stdout, stderr = result.stdout, result.stderr.strip()
        if stderr and self.keep_error_last_line:
            stderr = stderr.split("\n")[-1]
        text = f"{stdout}\n{stderr}" if stderr else stdout
        observation = "Code execution result: " + text.lstrip(" \n") + "\n"
        return True, not result.ok, observation, parsed_action

    def _make_tool(self) -> Any:
        from gemgym.tools import PythonTool

        return PythonTool(timeout=self.timeout, keep_error_last_line=self.keep_error_last_line)
