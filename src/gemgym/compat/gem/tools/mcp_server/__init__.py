"""``gem.tools.mcp_server``: GEM's sample MCP servers."""
