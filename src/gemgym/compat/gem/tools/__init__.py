"""``gem.tools``: GEM's tool API (``BaseTool.execute_action``) over gemgym's tools."""
