"""Compatibility layers for code written against other libraries.

:mod:`gemgym.compat.gem` runs code written for GEM (``gem-llm``, axon-rl/gem) on gemgym: see
docs/gem-compat.md. Nothing here is imported by ``import gemgym``.
"""
