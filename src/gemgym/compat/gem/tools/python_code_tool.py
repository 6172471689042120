"""``gem.tools.python_code_tool``: GEM's ``PythonCodeTool`` on gemgym's :class:`PythonTool`.

Code runs in gemgym's isolating sandbox with the given ``timeout`` (GEM ran a bare
subprocess behind a substring blacklist and always waited 10 s). ``sandbox_type`` is accepted
and ignored (both of GEM's values get the sandbox).
"""

from __future__ import annotations

from typing import Any

from gemgym.compat.gem.tools.base_tool import GemgymTool

__all__ = ["PythonCodeTool"]


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

    def _make_tool(self) -> Any:
        from gemgym.tools import PythonTool

        return PythonTool(timeout=self.timeout, keep_error_last_line=self.keep_error_last_line)
