"""A verifiers environment package for gemgym envs: verifiers imports it by the taskset id.

    PYTHONPATH=examples/verifiers vf-eval --env.taskset.id gemgym-env --env.taskset.envs guess ...

(see examples/verifiers/README.md for the whole command, with a local model server).
"""

from gemgym.integrations.verifiers import GemgymEnv, GemgymHarness, GemgymTaskset

__all__ = ["GemgymEnv", "GemgymHarness", "GemgymTaskset"]
