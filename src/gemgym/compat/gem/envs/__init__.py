"""``gem.envs``: GEM's env classes and registry (every gemgym env id is registered)."""

from gemgym.compat.gem.envs.registration import ENV_REGISTRY, make, make_vec, print_envs, register

__all__ = ["ENV_REGISTRY", "make", "make_vec", "print_envs", "register"]
