"""Built-in multi-agent text games (``ma:*`` ids); one module per game, each a
:class:`~gemgym.multiagent.game.TextGame` registered beside its code."""
