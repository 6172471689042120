"""Tools that turn single-turn tasks into multi-turn tool use.

A :class:`~gemgym.tools.base.Tool` parses a call out of the model's action, executes it and
returns an observation; :class:`gemgym.wrappers.ToolEnvWrapper` puts tools around any env::

    from gemgym.tools import PythonTool
    from gemgym.wrappers import ToolEnvWrapper

    env = gemgym.make("math:GSM8K", wrappers=[lambda e: ToolEnvWrapper(e, [PythonTool()])])

The concrete tools (:class:`PythonTool`, :class:`SearchTool`, :class:`MCPTool`) live in their
own modules and load on first use, so importing this package imports neither the sandbox, nor
a retrieval index, nor the ``mcp`` package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gemgym._lazy import lazy_exports
from gemgym.tools.base import (
    DEFAULT_MAX_OUTPUT_CHARS as DEFAULT_MAX_OUTPUT_CHARS,
    Tool as Tool,
    ToolCall as ToolCall,
    ToolResult as ToolResult,
    truncate_output as truncate_output,
)

if TYPE_CHECKING:
    from gemgym.tools.mcp import (
        MCPTool as MCPTool,
    )
    from gemgym.tools.python import (
        PythonTool as PythonTool,
    )
    from gemgym.tools.search import (
        SearchTool as SearchTool,
    )


__getattr__, __dir__ = lazy_exports(globals())
