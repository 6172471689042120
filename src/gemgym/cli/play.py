"""``gemgym play ID``: play an env yourself; type your reply, an empty line sends it.

Single-line replies are sent at once; end a multi-line reply with an empty line.
Type ``:quit`` to stop, ``:hint`` for the expert's move (when the env has one).
"""

from __future__ import annotations

import argparse
import sys

from gemgym.registry import make


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``gemgym play``."""
    p.add_argument("env_id", help="e.g. game:GuessTheNumber-v0-easy")
    p.add_argument("--seed", type=int, default=None, help="seed of the episode")


def run(args: argparse.Namespace) -> int:
    """Play episodes until the user quits or input ends."""
    env = make(args.env_id)
    seed = args.seed
    try:
        while True:
            obs, info = env.reset(seed=seed)
            seed = None if seed is None else seed + 1
            print(obs)
            if info.get("suffix"):
                print(info["suffix"])
            total = 0.0
            while True:
                try:
                    line = input("> ")
                except EOFError:
                    print()
                    return 0
                if line.strip() == ":quit":
                    return 0
                if line.strip() == ":hint":
                    try:
                        print(f"hint: {env.expert_action()}")
                    except NotImplementedError:
                        print("this env has no expert")
                    continue
                obs, reward, terminated, truncated, info = env.step(line)
                total += reward
                print(obs)
                print(f"[reward {reward:+.3f}, return {total:+.3f}]")
                if terminated or truncated:
                    outcome = "solved" if info.get("success") else "over"
                    print(f"Episode {outcome}. Return {total:+.3f}. New episode (Ctrl-D quits).")
                    break
                if info.get("suffix"):
                    print(info["suffix"])
    finally:
        env.close()
        sys.stdout.flush()
