"""WebShop: the pages and their transitions, the observation modes, the reward, the loader of
WebShop's files, the expert and the random agent, the ids and the CLI."""

from __future__ import annotations

import gzip
import json
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import gemgym
from gemgym.agents import OracleAgent, RandomAgent
from gemgym.envs.webshop import _catalogue
from gemgym.envs.webshop._catalogue import (
    SHIPPED_DIR,
    CatalogueSource,
    Goal,
    Product,
    iter_json_items,
    iter_json_records,
    load_catalogue,
    parse_pricing,
)
from gemgym.envs.webshop._reward import (
    normalize_color,
    option_matches,
    title_nouns,
    token_set_ratio,
    type_reward,
    webshop_reward,
)
from gemgym.envs.webshop.env import WebShopEnv, parse_webshop_action
from gemgym.errors import ConfigError, DatasetError, UnknownParameterError
from gemgym.experience import rollout, summarize
from gemgym.testing import check_env
from helpers.extras import needs_module, needs_package

needs_module("bm25s", "search")

IDS = [f"webshop:{s}-{m}" for s in ("train", "test") for m in ("html", "text", "text_rich")]
ROOT = Path(__file__).resolve().parents[1]


def box(action: str) -> str:
    return f"I think this is right. \\boxed{{{action}}}"


def play_expert(env: WebShopEnv) -> tuple[float, int, dict[str, Any]]:
    info: dict[str, Any] = {}
    for turn in range(1, 16):
        _, reward, terminated, truncated, info = env.step(env.expert_action())
        if terminated or truncated:
            return reward, turn, info
    raise AssertionError("the expert did not finish")


def to_goal_item(env: WebShopEnv) -> None:
    """Play the expert until the goal product's page is open."""
    for _ in range(10):
        env.step(env.expert_action())
        if env._session.kind == "item":
            return
    raise AssertionError("the expert did not reach the item page")


# -- ids ---------------------------------------------------------------------------------------
def test_gem_ids_and_kwargs_are_registered() -> None:
    assert gemgym.list_envs("webshop:*") == sorted(IDS)
    spec = gemgym.spec("webshop:test-text_rich")
    assert spec.kwargs == {
        "observation_mode": "text_rich",
        "split": "test",
        "max_turns": 15,
        "error_tolerance": 15,
        "format_error_reward": -0.1,
    }


@pytest.mark.parametrize("env_id", IDS)
def test_check_env(env_id: str) -> None:
    check_env(env_id, check_bad=env_id.endswith("test-text"))


def test_unknown_and_bad_kwargs_are_errors() -> None:
    with pytest.raises(UnknownParameterError):
        gemgym.make("webshop:test-text", colour="red")
    with pytest.raises(ConfigError, match="observation_mode"):
        WebShopEnv(observation_mode="url")
    with pytest.raises(ConfigError, match="split"):
        WebShopEnv(split="validation")
    env = WebShopEnv(split="test")
    with pytest.raises(ConfigError, match="goal_index"):
        env.reset(options={"goal_index": 10_000})


def test_import_is_light() -> None:
    code = (
        "import sys, gemgym; gemgym.list_envs('webshop:*'); "
        "import gemgym.envs.webshop.env; print('bm25s' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# -- the pages -----------------------------------------------------------------------------------
def test_a_walk_through_every_page() -> None:
    env = WebShopEnv(split="test")
    obs, info = env.reset(options={"goal_index": 0})
    goal = env.goal
    assert goal is not None
    assert obs == "Search"
    assert env.admissible_actions() == ["search[<your query>]"]
    assert info["suffix"].startswith(f"Instruction: {goal.instruction_text}\nYour admissible")
    assert f"Your task is to: {goal.instruction_text}." in info["prefix"]

    product = env.catalogue.products[goal.asin]
    obs, reward, te, tr, info = env.step(box(f"search[{product.query}]"))
    assert (reward, te, tr, info["page"]) == (0.0, False, False, "results")
    results = env._session.results
    assert 10 < len(results) <= 50
    assert obs.startswith(
        f"Back to Search [SEP] Page 1 (Total results: {len(results)}) [SEP] Next >"
    )
    first = env.catalogue.products[results[0]]
    assert f"{first.asin} [SEP] {first.name} [SEP] {first.price_tag}" in obs
    assert env.admissible_actions()[:2] == ["click[back to search]", "click[next >]"]
    assert len(env.admissible_actions()) == 2 + 10

    obs, *_ = env.step(box("click[next >]"))
    assert obs.startswith("Back to Search [SEP] Page 2") and "< Prev [SEP] Next >" in obs
    assert results[10] in obs and results[0] not in obs
    obs, *_ = env.step(box("click[< prev]"))
    assert obs.startswith("Back to Search [SEP] Page 1") and "< Prev" not in obs

    asin = results[0]
    item = env.catalogue.products[asin]
    obs, reward, *_ = env.step(box(f"click[{asin.lower()}]"))
    assert env._session.kind == "item" and reward == 0.0
    assert obs.startswith("Back to Search [SEP] < Prev [SEP] ")
    assert obs.endswith(
        f"{item.name} [SEP] Price: {item.price_tag} [SEP] Rating: N.A. [SEP] Description "
        "[SEP] Features [SEP] Reviews [SEP] Buy Now"
    )
    actions = env.admissible_actions()
    assert actions[:6] == [
        "click[back to search]",
        "click[< prev]",
        "click[description]",
        "click[features]",
        "click[reviews]",
        "click[buy now]",
    ]
    assert actions[6:] == [f"click[{v}]" for vs in item.options.values() for v in vs]
    name, values = next(iter(item.options.items()))
    assert f"click[{values[-1]}]" in actions
    env.step(box(f"click[{values[-1]}]"))
    assert env._session.chosen == {name: values[-1]}

    obs, *_ = env.step(box("click[Description]"))  # names are case-insensitive
    assert obs == f"Back to Search [SEP] < Prev [SEP] {item.description}"
    obs, *_ = env.step(box("click[< prev]"))
    assert env._session.kind == "item" and env._session.chosen == {name: values[-1]}
    obs, *_ = env.step(box("click[features]"))
    assert obs.endswith(" [SEP] ".join(item.bullet_points))
    env.step(box("click[< prev]"))
    env.step(box("click[< prev]"))  # item -> the results page it came from
    assert env._session.kind == "results" and env._session.chosen == {}
    obs, *_ = env.step(box("click[back to search]"))
    assert obs == "Search" and env._session.visited == set()

    env.step(box(f"search[{product.query}]"))
    env.step(box(f"click[{asin}]"))
    obs, reward, te, tr, info = env.step(box("click[buy now]"))
    assert te and not tr and info["page"] == "done"
    assert info["purchased"] == asin and info["goal_asin"] == goal.asin
    assert 0.0 <= reward <= 1.0 and info["success"] == (reward == 1.0)
    assert set(info["reward_info"]) >= {"r_type", "r_att", "r_option", "r_price"}
    assert "Your score (min 0.0, max 1.0)" in obs


def test_attributes_page_with_show_attrs() -> None:
    env = WebShopEnv(split="test", show_attrs=True)
    env.reset(options={"goal_index": 0})
    to_goal_item(env)
    assert "click[attributes]" in env.admissible_actions()
    obs, *_ = env.step(box("click[attributes]"))
    product = env.catalogue.products[env._session.asin or ""]
    assert obs.startswith("Back to Search [SEP] < Prev [SEP] " + " [SEP] ".join(product.attributes))
    assert obs.endswith(product.product_category)


def test_search_works_from_any_page_as_in_gem() -> None:
    env = WebShopEnv(split="test")
    env.reset(seed=0)
    env.step(box("search[shampoo]"))
    env.step(box(f"click[{env._session.results[0]}]"))
    obs, reward, *_ = env.step(box("search[hdmi cable]"))
    assert reward == 0.0 and env._session.kind == "results" and "Hdmi Cable" in obs.title()


# -- bad actions -----------------------------------------------------------------------------------
def test_bad_actions_cost_the_format_penalty_and_leave_the_page() -> None:
    env = WebShopEnv(split="test", error_tolerance=3)
    first, _ = env.reset(seed=0)
    cases = [
        ("search for shoes", {"format_error": True}),
        (box("click[buy now]"), {"invalid_action": True}),  # not on the search page
        (None, {"format_error": True, "non_text_action": "NoneType"}),
    ]
    for action, expected in cases:
        obs, reward, te, tr, info = env.step(action)  # type: ignore[arg-type]
        assert obs == first and reward == -0.1 and not te and not tr
        assert expected.items() <= info.items()
    obs, reward, te, tr, info = env.step("\\boxed{dance[now]}")  # the 4th > error_tolerance
    assert reward == -0.1 and te and not tr and info["success"] is False


def test_the_turn_limit_truncates() -> None:
    env = WebShopEnv(split="test", max_turns=3)
    env.reset(seed=0)
    results = [env.step(box("search[shampoo]"))[2:4] for _ in range(3)]
    assert results == [(False, False), (False, False), (False, True)]
    env.reset(seed=0)
    *_, info = [env.step(box("search[x]")) for _ in range(3)][-1]
    assert info["turn_limit"] is True and info["success"] is False


@pytest.mark.parametrize(
    ("reply", "parsed"),
    [
        ("\\boxed{search[Red Running Shoes]}", ("search", "red running shoes")),
        (
            "\\boxed{click[a]} then \\boxed{click[< Prev]}",
            ("click[a]} then \\boxed{click", "< prev"),  # GEM's greedy regex
        ),
        ("\\boxed{click[a]}\nfinally \\boxed{click[Buy Now]}", ("click", "buy now")),
        ("\\boxed{click[x]}\n\\boxed{}", ("click", "x")),
        ("\\boxed{click}", ("click", None)),
        ("\\boxed{click[]}", ("click[]", None)),
        ("no box here", (None, None)),
        ("\\boxed{" * 5000, (None, None)),
    ],
)
def test_parse_action_follows_gem(reply: str, parsed: tuple[str | None, str | None]) -> None:
    assert parse_webshop_action(reply) == parsed


# -- observation modes ---------------------------------------------------------------------------
def test_text_rich_marks_chosen_options_and_visited_products() -> None:
    env = WebShopEnv(observation_mode="text_rich", split="test")
    obs, _ = env.reset(options={"goal_index": 3})
    assert obs == "WebShop\n[button] Search [button_]\n"
    to_goal_item(env)
    asin = env.goal.asin if env.goal else ""
    product = env.catalogue.products[asin]
    name, values = next(iter(product.options.items()))
    obs, *_ = env.step(box(f"click[{values[0]}]"))
    assert obs.startswith(f"You have clicked {values[0]}.\n[button] Back to Search [button_]\n")
    assert f"  [clicked button] {values[0]} [clicked button_]\n" in obs
    assert f"  [button] {values[1]} [button_]\n" in obs
    assert f"\n{product.name}\n" in obs and "[button] Buy Now [button_]\n" in obs
    obs, *_ = env.step(box("click[< prev]"))
    assert f"\n[clicked button] {asin} [clicked button_]\n" in obs


def test_html_is_a_self_contained_page(tmp_path: Path) -> None:
    env = WebShopEnv(observation_mode="html", split="test")
    obs, _ = env.reset(options={"goal_index": 0})
    assert obs.startswith("<!DOCTYPE html>") and 'id="search_input"' in obs
    to_goal_item(env)
    obs, *_ = env.step(env.expert_action())  # chooses an option
    for forbidden in ("<script", "<link", "src=", "http://"):
        assert forbidden not in obs
    assert 'class="btn' in obs and 'type="radio"' in obs and " checked>" in obs
    assert '<div id="instruction-text"><h4>Instruction:<br>' in obs
    page = tmp_path / "item.html"
    page.write_text(obs, encoding="utf-8")
    assert page.read_text(encoding="utf-8").rstrip().endswith("</html>")


def test_html_escapes_what_it_shows() -> None:
    env = WebShopEnv(observation_mode="html", split="test")
    obs, _ = env.reset(options={"goal_index": 0, "instruction_text": "<b>bold</b> & more"})
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; more" in obs and "<b>" not in obs


# -- episodes, seeds, copies -----------------------------------------------------------------------
def test_same_seed_same_goal_and_copies_behave_the_same() -> None:
    a, b = WebShopEnv(split="train"), WebShopEnv(split="train")
    assert a.reset(seed=7)[1] == b.reset(seed=7)[1]
    assert a.goal == b.goal
    goals = {(a.reset(seed=s), a.goal_index)[1] for s in range(20)}
    assert len(goals) > 10
    a.reset(seed=3)
    a.step(a.expert_action())
    copy = pickle.loads(pickle.dumps(a))
    assert copy.catalogue is a.catalogue  # loaded once per process
    assert copy.step(a.expert_action()) == a.step(a.expert_action())


def test_the_expert_buys_right_on_every_shipped_instruction() -> None:
    for split in ("test", "train"):
        env = WebShopEnv(split=split)
        for i in range(env.num_goals):
            env.reset(options={"goal_index": i})
            reward, turns, info = play_expert(env)
            assert reward == 1.0 and info["success"], (split, i, env.instruction_text)
            assert turns <= 10


def test_the_expert_pages_and_searches_again_when_it_must() -> None:
    env = WebShopEnv(split="test")
    paged = False
    for i in range(env.num_goals):  # a goal its type's query ranks below the first page
        env.reset(options={"goal_index": i})
        goal = env.goal
        assert goal is not None
        env.step(box(f"search[{env.catalogue.products[goal.asin].query}]"))
        if goal.asin in env._session.results[10:]:
            assert env.expert_action() == "\\boxed{click[next >]}"
            assert play_expert(env)[0] == 1.0
            paged = True
            break
    assert paged
    # a search that cannot find it: back to search, then the product's own name
    env.reset(options={"goal_index": 0})
    env.step(box("search[zzzz qqqq]"))
    assert env.expert_action() == "\\boxed{click[back to search]}"
    env.step(env.expert_action())
    env.step(env.expert_action())  # the instruction (not tried yet)
    assert play_expert(env)[0] == 1.0
    env.reset(options={"goal_index": 0})
    goal = env.goal
    assert goal is not None
    env._searched.append(env.expert_action()[len("\\boxed{search[") : -2])
    name = env.catalogue.products[goal.asin].name.lower()
    assert env.expert_action() == f"\\boxed{{search[{name}]}}"


def test_random_is_far_below_the_expert() -> None:
    random_eps = list(rollout("webshop:test-text", RandomAgent(), episodes=50))
    oracle_eps = list(rollout("webshop:test-text", OracleAgent(), episodes=50))
    rand, oracle = summarize(random_eps), summarize(oracle_eps)
    assert oracle["success_rate"] == 1.0 and oracle["mean_return"] == 1.0
    assert rand["success_rate"] <= 0.1 and rand["mean_return"] < 0.3


CLI_ARGS = ("--agent", "oracle", "--episodes", "50", "--quiet")


def test_cli_run_oracle_succeeds_every_time() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "gemgym", "run", "webshop:test-text", *CLI_ARGS],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "100.0%" in out.stdout


# -- the reward -------------------------------------------------------------------------------------
def _product(**kw: Any) -> Product:
    base: dict[str, Any] = dict(
        asin="B000000001",
        name="Mens Trail Running Shoes Breathable Sneakers",
        description="",
        bullet_points=(),
        pricing=(35.0,),
        price_tag="$35.0",
        price=35.0,
        options={"color": ("grey", "black"), "size": ("xl", "l")},
        attributes=("tea tree", "essential oil", "natural ingredients"),
        category="beauty",
        query="query 1",
        product_category="a › b › c",
    )
    return Product(**{**base, **kw})


def _goal(**kw: Any) -> Goal:
    base: dict[str, Any] = dict(
        asin="B000000001",
        category="beauty",
        query="query 1",
        name="Mens Trail Running Shoes Breathable Sneakers",
        product_category="a › b › c",
        instruction_text="",
        attributes=("tea tree", "essential oils", "natural ingredients"),
        price_upper=40.0,
        goal_options=("grey", "xl"),
    )
    return Goal(**{**base, **kw})


def test_reward_is_the_papers_formula() -> None:
    # everything matches: (3 attributes + 2 options + price) / (3 + 2 + 1) * r_type 1
    reward, parts = webshop_reward(_product(), _goal(), 35.0, {"color": "grey", "size": "xl"})
    assert reward == 1.0 and parts["attribute_matches"] == 3 and parts["option_matches"] == 2
    # attributes found in the features and description instead of the attribute list
    product = _product(
        attributes=(),
        bullet_points=("This shampoo has essential oils and smells like lemons",),
        description="Best shampoo on the market, made with natural ingredients",
    )
    reward, parts = webshop_reward(product, _goal(), 35.0, {"color": "grey", "size": "xl"})
    assert reward == pytest.approx(5 / 6) and parts["r_att"] == pytest.approx(2 / 3)
    # a third goal option not chosen: (2 + 2 + 1) / (3 + 3 + 1)
    goal = _goal(goal_options=("grey", "xl", "pack of 12"))
    reward, parts = webshop_reward(product, goal, 35.0, {"color": "grey", "size": "xl"})
    assert reward == pytest.approx(5 / 7) and parts["r_option"] == pytest.approx(2 / 3)
    # too expensive: the price term is lost
    reward, parts = webshop_reward(_product(), _goal(), 45.0, {"color": "grey", "size": "xl"})
    assert reward == pytest.approx(5 / 6) and parts["r_price"] is False
    # another type, few title nouns shared, no query or category match: r_type 0.5
    other = _product(
        name="Trail Running Jacket Windbreaker Hood Zipper Pockets Mesh Lining",
        query="query 2",
        product_category="a › d › e",
    )
    kind = type_reward(other, _goal())
    assert kind.title_score == pytest.approx(2 / 5) and kind.r_type == 1.0  # > 20 % nouns
    other = _product(
        name="Garden Hose Nozzle With Trail Running Shoes Holder",
        query="query 2",
        product_category="x › y",
        attributes=(),
    )
    kind = type_reward(other, _goal(name="Running Shoes Sneakers Trainers Laces Insoles Socks"))
    assert kind.title_score == pytest.approx(2 / 7) and kind.r_type == 1.0
    kind = type_reward(other, _goal(name="Sneakers Trainers Laces Insoles Socks Running"))
    assert kind.title_score == pytest.approx(1 / 6) and kind.r_type == 0.5
    reward, parts = webshop_reward(
        other,
        _goal(name="Sneakers Trainers Laces Insoles Socks Running"),
        35.0,
        {"color": "grey", "size": "xl"},
    )
    assert reward == pytest.approx(3 / 6 * 0.5)
    # nothing in common: r_type 0 and the reward 0
    stranger = _product(name="Kitchen Cabinet Knob", query="q", product_category="k")
    assert webshop_reward(stranger, _goal(), 35.0, {})[0] == 0.0


def test_option_and_fuzzy_matching() -> None:
    assert option_matches(["pack of 12", "grey", "xl"], ["grey", "xl", "pack of 12"]) == 3
    assert option_matches(["pack of 12", "blue", "xl"], ["grey", "xl", "pack of 12"]) == 2
    assert option_matches(["pack of 12", "powder snow", "xl"], ["cool powder snow"]) == 1
    assert option_matches(["jet black"], ["black"]) == 1  # colours normalised
    assert option_matches([], ["black"]) == 0
    assert normalize_color("dark brown") == "brown" and normalize_color("16 oz") == "16 oz"
    assert token_set_ratio("essential oils", "essential oil") == 96
    assert token_set_ratio("Tea-Tree!", "tea tree") == 100
    assert token_set_ratio("", "tea") == 0
    assert title_nouns("Mens D.O.N. Issue 2 Basketball Shoes - Off White") == [
        "mens",
        "d.o.n",
        "issue",
        "basketball",
        "shoes",
    ]


def test_token_set_ratio_equals_thefuzz() -> None:
    fuzz = needs_package("rapidfuzz.fuzz", "rapidfuzz")
    utils = needs_package("rapidfuzz.utils", "rapidfuzz")
    words = ["black", "red", "xl", "pack", "of", "12", "tea", "tree", "oil", "oils", "essential"]
    words += ["natural", "size", "10", "wide", "3", "x"]
    import random

    rng = random.Random(0)
    for _ in range(2000):
        a = " ".join(rng.choices(words, k=rng.randint(0, 5)))
        b = " ".join(rng.choices(words, k=rng.randint(0, 5)))
        ref = round(fuzz.token_set_ratio(a, b, processor=utils.default_process))
        assert token_set_ratio(a, b) == ref, (a, b)


# -- the loader ------------------------------------------------------------------------------------
def _raw(asin: str, name: str, query: str, pricing: str, **extra: Any) -> dict[str, Any]:
    return {
        "asin": asin,
        "name": name,
        "full_description": f"{name}. A fine product.",
        "small_description": [f"{name} feature one", "feature two"],
        "pricing": pricing,
        "images": [f"https://example.com/{asin}.jpg"],
        "customization_options": {
            "Color": [{"value": "Navy/White", "image": None}, {"value": "Black", "image": None}],
            "Size": [{"value": "Large", "image": None}, {"value": "X-Large", "image": None}],
        },
        "category": "fashion",
        "query": query,
        "product_category": "Clothing › Men › Shirts",
        **extra,
    }


def write_webshop_files(root: Path, gz: bool = False, jsonl: bool = False) -> None:
    products = [
        _raw("B000000AAA", "Cotton Polo Shirt", " Men's Polo Shirt ", "$19.99"),
        _raw("B000000BBB", "Linen Beach Shirt", "men's beach shirt", "$15.00 - $25.00"),
        _raw("B000000CCC", "Wool Winter Sweater", "men's sweater", ""),
        _raw("B000000AAA", "duplicate", "dup", "$1.00"),  # skipped: asin seen
        _raw("nan", "no asin", "x", "$1.00"),  # skipped: WebShop's rule
        _raw("B0000000000000", "asin too long", "x", "$1.00"),  # skipped
    ]
    attributes = {
        "B000000AAA": {
            "attributes": ["machine wash", "short sleeve"],
            "instruction": "i need a polo shirt that is machine wash",
            "instruction_attributes": ["machine wash"],
        },
        "B000000BBB": {
            "attributes": ["quick dry"],
            "instruction": "i want a quick dry beach shirt",
            "instruction_attributes": ["quick dry"],
        },
        "B999999999": {"attributes": ["not in the products"]},
    }
    human = {
        "B000000AAA": [
            {
                "asin": "B000000AAA",
                "instruction": "i'm looking for a machine wash polo shirt in black, large.",
                "instruction_attributes": ["machine wash"],
                "instruction_options": ["black", "large"],
            },
            {"instruction": "no attributes: skipped", "instruction_attributes": []},
        ],
        "B000000BBB": [
            {
                "instruction": "a quick dry beach shirt, navy, x-large",
                "instruction_attributes": ["quick dry"],
                "instruction_options": ["navy | white", "x-large"],
            }
        ],
    }

    def dump(name: str, value: Any, lines: bool = False) -> None:
        text = (
            "\n".join(json.dumps(v) for v in value) + "\n" if lines else json.dumps(value, indent=2)
        )
        path = root / (name + (".gz" if gz else ""))
        if gz:
            path.write_bytes(gzip.compress(text.encode()))
        else:
            path.write_text(text)

    if jsonl:
        dump("items_shuffle_1000.jsonl", products, lines=True)
    else:
        dump("items_shuffle.json", products)
    dump("items_ins_v2.json", attributes)
    dump("items_human_ins.json", human)


@pytest.mark.parametrize(("gz", "jsonl"), [(False, False), (True, False), (False, True)])
def test_the_loader_reads_webshops_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gz: bool, jsonl: bool
) -> None:
    monkeypatch.setattr(_catalogue, "_CHUNK", 7)  # values cross chunk boundaries
    write_webshop_files(tmp_path, gz=gz, jsonl=jsonl)
    source = CatalogueSource.from_dir(tmp_path)
    cat = load_catalogue(source)
    assert list(cat.products) == ["B000000AAA", "B000000BBB", "B000000CCC"]
    polo = cat.products["B000000AAA"]
    assert polo.name == "Cotton Polo Shirt" and polo.query == "men's polo shirt"
    assert polo.options == {"color": ("navy | white", "black"), "size": ("large", "x-large")}
    assert polo.attributes == ("machine wash", "short sleeve")
    assert polo.pricing == (19.99,) and polo.price == 19.99 and polo.price_tag == "$19.99"
    beach = cat.products["B000000BBB"]
    assert beach.price_tag == "$15.0 to $25.0" and 15.0 <= beach.price <= 25.0
    sweater = cat.products["B000000CCC"]
    assert sweater.pricing == (100.0,) and sweater.attributes == ("DUMMY_ATTR",)
    assert sweater.bullet_points == ("Wool Winter Sweater feature one", "feature two")
    assert len(cat.goals) == 2
    polo_goal = next(g for g in cat.goals if g.asin == "B000000AAA")
    assert polo_goal.instruction_text.startswith(
        "i'm looking for a machine wash polo shirt in black, large, and price lower than "
    )
    assert polo_goal.price_upper in (30.0, 40.0, 50.0) and polo_goal.goal_options == (
        "black",
        "large",
    )
    assert load_catalogue(source) is cat
    env = WebShopEnv(data_dir=tmp_path, split="all")
    for i in range(env.num_goals):
        env.reset(options={"goal_index": i})
        reward, _, _ = play_expert(env)
        assert reward == 1.0


def test_the_loader_options(tmp_path: Path) -> None:
    write_webshop_files(tmp_path)
    env = WebShopEnv(data_dir=tmp_path, split="all", num_products=1)
    assert list(env.catalogue.products) == ["B000000AAA"] and env.num_goals == 1
    synthetic = WebShopEnv(data_dir=tmp_path, split="all", human_goals=False)
    texts = sorted(g.instruction_text for g in synthetic.catalogue.goals)
    # one goal per combination of options; weighted towards rare attributes
    assert len(texts) == 8
    assert any(
        t.startswith("i need a polo shirt that is machine wash with color: black") for t in texts
    )
    explicit = WebShopEnv(
        products=tmp_path / "items_shuffle.json",
        attributes=tmp_path / "items_ins_v2.json",
        human_instructions=tmp_path / "items_human_ins.json",
        split="all",
    )
    assert explicit.num_goals == 2
    with pytest.raises(ConfigError, match="not a directory"):
        WebShopEnv(data_dir=tmp_path / "missing")
    with pytest.raises(ConfigError, match="not both"):
        WebShopEnv(data_dir=tmp_path, products=tmp_path / "items_shuffle.json")


def test_the_streaming_readers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_catalogue, "_CHUNK", 3)
    path = tmp_path / "a.json"
    path.write_text(' [ {"a": 1, "s": "x]},y"} ,\n{"b": [1, 2]} ] ')
    assert list(iter_json_records(path)) == [{"a": 1, "s": "x]},y"}, {"b": [1, 2]}]
    obj = tmp_path / "o.json"
    obj.write_text('{"k1": {"v": 12345}, "k\\"2": [1], "k3": 123456789}')
    assert list(iter_json_items(obj)) == [("k1", {"v": 12345}), ('k"2', [1]), ("k3", 123456789)]
    bad = tmp_path / "bad.json"
    bad.write_text('[{"a": 1}, {"b": ')
    with pytest.raises(DatasetError, match=r"bad\.json"):
        list(iter_json_records(bad))


def test_parse_pricing() -> None:
    assert parse_pricing("$12.99") == ((12.99,), "$12.99")
    assert parse_pricing("$1,299.00 - $1,499.50") == ((1299.0, 1499.5), "$1299.0 to $1499.5")
    assert parse_pricing(None) == ((100.0,), "$100.0")


# -- the shipped catalogue ---------------------------------------------------------------------------
def test_the_shipped_catalogue_is_what_the_script_writes(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "make_webshop_catalogue.py"),
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    names = ["items_shuffle.json.gz", "items_ins_v2.json.gz", "items_human_ins.json.gz"]
    for name in names:
        assert (tmp_path / name).read_bytes() == (SHIPPED_DIR / name).read_bytes(), name
    assert sum((SHIPPED_DIR / n).stat().st_size for n in names) < 300_000
    env = WebShopEnv(split="test")
    assert len(env.catalogue) == 400 and len(env.catalogue.goals) == 600
    assert env.num_goals == 120
    assert len({p.category for p in env.catalogue.products.values()}) == 5


def test_the_docs_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/webshop.md's examples run in order (those that need WebShop's data are marked)."""
    import re

    text = (ROOT / "docs" / "webshop.md").read_text(encoding="utf-8")
    blocks = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "+SKIP" not in b]
    assert len(blocks) == 2
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__doc_example__"}
    for i, code in enumerate(blocks):
        exec(compile(code, f"<docs/webshop.md example {i}>", "exec"), namespace)
    assert (tmp_path / "webshop_search.html").read_text(encoding="utf-8").startswith("<!DOCTYPE")
