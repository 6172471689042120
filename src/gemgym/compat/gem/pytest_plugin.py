"""``pytest -p gemgym.compat.gem.pytest_plugin``: GEM's tests import ``gem`` from gemgym.

Loading the plugin turns the import switch on before collection (unless a real ``gem-llm`` is
installed: then it is used and the report header says so).
"""

from __future__ import annotations

from gemgym.compat.gem._finder import install, real_gem_location

_ON = install(quiet=True)


def pytest_report_header() -> str:
    """One header line: which ``gem`` the tests import."""
    if _ON:
        return "gem: gemgym.compat.gem (the gemgym GEM compatibility layer)"
    return f"gem: the installed gem package at {real_gem_location()} (switch not used)"
