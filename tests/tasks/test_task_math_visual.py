"""math:Geometry3K: multimodal observations with the shipped diagrams."""

from __future__ import annotations

from importlib.resources import files

import gemgym
from gemgym.core import MultimodalObservation
from gemgym.envs.math_visual import MathVisualEnv


def test_observation_carries_the_diagram_and_gold_scores_one() -> None:
    env = gemgym.make("math:Geometry3K", dataset="sample").unwrapped
    assert isinstance(env, MathVisualEnv)
    for i in range(len(env)):
        obs, _ = env.reset(options={"index": i})
        assert isinstance(obs, MultimodalObservation) and obs.text
        assert len(obs.images) == 1 and obs.images[0].data.startswith(b"\x89PNG")
        assert obs.to_openai_content()[1]["image_url"]["url"].startswith("data:image/png;base64,")
        assert env.step(env.expert_action())[1] == 1.0
        env.reset(options={"index": i})
        assert env.step(r"\boxed{999}")[1] == 0.0


def test_each_reset_advances_one_item_and_image_bytes_work() -> None:
    env = gemgym.make("math:Geometry3K", dataset="sample")
    seen = [env.reset(seed=1)[1]["index"]] + [env.reset()[1]["index"] for _ in range(2)]
    assert sorted(seen) == [0, 1, 2]  # GEM skipped every other item
    png = (files("gemgym") / "envs/data/images/geometry/rectangle.png").read_bytes()  # shipped
    rows = [{"problem": "area?", "answer": "15", "images": [png]}]
    obs, _ = MathVisualEnv(dataset=rows).reset(seed=0)
    assert obs.images[0].data == png
