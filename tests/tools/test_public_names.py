"""The names users import: ``gemgym.tools.PythonTool`` and friends, loaded lazily."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("mcp", "bm25s", "gemgym.tools.mcp", "gemgym.tools.search", "gemgym.tools.python")


def _run(code: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    return out.stdout.strip()


def test_tool_classes_are_importable_from_gemgym_tools() -> None:
    from gemgym.tools import MCPTool, PythonTool, SearchTool
    from gemgym.tools.mcp import MCPTool as MCPTool2
    from gemgym.tools.python import PythonTool as PythonTool2
    from gemgym.tools.search import SearchTool as SearchTool2

    assert (PythonTool, SearchTool, MCPTool) == (PythonTool2, SearchTool2, MCPTool2)


def test_tool_wrapper_is_importable_from_gemgym_wrappers() -> None:
    from gemgym.wrappers import ToolEnvWrapper
    from gemgym.wrappers.tools import ToolEnvWrapper as ToolEnvWrapper2

    assert ToolEnvWrapper is ToolEnvWrapper2


def test_unknown_names_are_attribute_errors() -> None:
    import gemgym.tools
    import gemgym.wrappers

    with pytest.raises(AttributeError, match="NoSuchTool"):
        gemgym.tools.NoSuchTool  # noqa: B018
    with pytest.raises(AttributeError, match="NoSuchWrapper"):
        gemgym.wrappers.NoSuchWrapper  # noqa: B018
    assert {"PythonTool", "SearchTool", "MCPTool"} <= set(dir(gemgym.tools))
    assert "ToolEnvWrapper" in dir(gemgym.wrappers)


def test_importing_the_packages_loads_no_tool_module() -> None:
    code = (
        "import sys, gemgym, gemgym.tools, gemgym.wrappers\n"
        "from gemgym.tools import Tool\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules) or '-')\n"
    )
    assert _run(code) == "-"


def test_python_tool_import_does_not_pull_mcp_or_bm25s() -> None:
    code = (
        "import sys\n"
        "from gemgym.tools import PythonTool, SearchTool\n"
        "from gemgym.wrappers import ToolEnvWrapper\n"
        "print(','.join(m for m in ('mcp', 'bm25s') if m in sys.modules) or '-')\n"
    )
    assert _run(code) == "-"


def test_import_time_of_gemgym_tools() -> None:
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import gemgym.tools, gemgym.wrappers"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    imported = {line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines()}
    assert not imported & {"mcp", "bm25s", "gemgym.tools.mcp", "gemgym.sandbox"}
