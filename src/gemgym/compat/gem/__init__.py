"""GEM's API on gemgym: run code written for GEM (``gem-llm``, axon-rl/gem) unchanged.

``import gemgym.compat.gem as gem`` gives GEM's top-level API; the import switch makes ``import
gem`` and ``from gem.x import y`` resolve to this package in an unmodified script or test::

    python -m gemgym.compat.gem your_gem_script.py --its --args
    python -m gemgym.compat.gem -m tests.test_env.test_game
    gemgym gem-run your_gem_script.py
    pytest -p gemgym.compat.gem.pytest_plugin tests/
    # or in Python, before importing gem:  gemgym.compat.gem.install()

The switch never shadows a real ``gem`` package (``pip install gem-llm``): when one is
importable it is used and the switch says so. The module tree mirrors GEM's (``gem.envs...``,
``gem.wrappers.wrapper_factory``, ``gem.tools...``, ``gem.utils.debug``, ...). GEM's leniencies
(unknown keyword arguments ignored with one warning each, positional ``reset(seed)``, steps after
the end, GEM-style envs whose ``reset`` takes no ``options``) live only here; gemgym's own API
stays strict. What differs from GEM on purpose, and why: docs/gem-compat.md.
"""

from __future__ import annotations

from gemgym.compat.gem._adapt import GemCompatWarning
from gemgym.compat.gem._finder import install, real_gem_location, uninstall
from gemgym.compat.gem.core import Env
from gemgym.compat.gem.envs.registration import make, make_vec, print_envs, register

__version__ = "0.1.0"

__all__ = [
    "Env",
    "GemCompatWarning",
    "install",
    "make",
    "make_vec",
    "print_envs",
    "real_gem_location",
    "register",
    "uninstall",
]
