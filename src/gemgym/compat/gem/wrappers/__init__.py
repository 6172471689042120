"""``gem.wrappers``: GEM's wrappers over gemgym's history and statistics wrappers."""
