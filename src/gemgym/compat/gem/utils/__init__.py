"""``gem.utils``: GEM's helpers, backed by gemgym's."""
