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


def test_wrappers_by_name() -> None:
    import pytest

    from gemgym.errors import ConfigError
    from gemgym.wrappers import ChatHistory, ConcatHistory, EpisodeStatistics
    from gemgym.wrappers.factory import WRAPPER_NAMES, get_wrapper_fns

    env = gem.make(
        "game:GuessTheNumber-v0-easy",
        wrappers=get_wrapper_fns("episode_tracking,concat_with_action"),
    )
    assert isinstance(env, ConcatHistory) and isinstance(env.env, EpisodeStatistics)
    env.reset(seed=0)
    obs, *_ = env.step(r"my move \boxed{3}")
    assert r"my move \boxed{3}" in obs
    with pytest.raises(ConfigError, match="Did you mean 'concat'"):
        get_wrapper_fns("conact")
    with pytest.raises(ConfigError, match="tokenizer"):
        get_wrapper_fns("concat_chat")

    class Tok:
        def apply_chat_template(self, conversation, *, tokenize=True, add_generation_prompt=False):  # type: ignore[no-untyped-def]
            return "|".join(m["content"][:5] for m in conversation)

    (chat,) = get_wrapper_fns("concat_chat", tokenizer=Tok())
    wrapped = chat(gem.make("game:GuessTheNumber-v0-easy"))
    assert isinstance(wrapped, ChatHistory)
    assert wrapped.reset(seed=0)[0] == "You a"
    assert "python_tool" in WRAPPER_NAMES and "search_tool" in WRAPPER_NAMES


def test_python_tool_by_name_does_not_share_tools() -> None:
    from gemgym.wrappers.factory import get_wrapper_fns

    (fn,) = get_wrapper_fns("python_tool")
    a = fn(gem.make("math:GSM8K", dataset="sample"))
    b = fn(gem.make("math:GSM8K", dataset="sample"))
    try:
        assert a.get_wrapper_attr("tools")[0] is not b.get_wrapper_attr("tools")[0]
    finally:
        a.close()
        b.close()
