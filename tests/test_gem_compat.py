"""GEM scripts run with ``import gemgym as gem``."""

from __future__ import annotations

import gemgym as gem


def test_gem_style_make_vec_with_seed_and_async_mode() -> None:
    a = gem.make_vec(["game:GuessTheNumber-v0-hard"] * 3, seed=7, async_mode=True)
    b = gem.make_vec(["game:GuessTheNumber-v0-hard"] * 3, seed=7)
    try:
        assert type(a).__name__ == "ThreadVectorEnv"
        # after the seeded construction, unseeded resets continue the seeded streams
        assert a.reset()[0] == b.reset()[0]
        actions = [r"\boxed{25}"] * 3
        assert a.step(actions)[0] == b.step(actions)[0]
    finally:
        a.close()
        b.close()


def test_gem_entry_points_exist() -> None:
    for name in ("Env", "make", "make_vec", "print_envs", "register"):
        assert hasattr(gem, name)
