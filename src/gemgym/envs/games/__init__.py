"""Multi-turn text games (GEM's ``game:*`` ids). One module per game."""
