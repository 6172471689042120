"""Small MCP servers shipped with gemgym, for examples and tests (extra ``mcp``).

* :mod:`gemgym.tools.mcp_servers.example` — a calculator, a clock and a notebook::

      python -m gemgym.tools.mcp_servers.example                   # stdio
      python -m gemgym.tools.mcp_servers.example --http --port 8765  # streamable HTTP at /mcp
"""
