"""WikiGame: the rules and GEM's rewards, the page set and its draws, the BFS expert, and the
backends: in-process, a real ``kiwix-serve`` on loopback over the ZIM gemgym's script builds, and
a loopback fake of the MediaWiki API."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import pickle
import shutil
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest

import gemgym
from gemgym.agents import OracleAgent, RandomAgent
from gemgym.envs.games.wikigame import (
    FORMAT_ERROR_REWARD,
    INTERNAL_STEP_REWARD,
    INVALID_ACTION_REWARD,
    SUCCESS_REWARD,
    WikiGameEnv,
)
from gemgym.errors import ConfigError, EnvLostError, UnknownParameterError
from gemgym.testing import check_env
from gemgym.wiki.backends import InProcessBackend, KiwixBackend, MediaWikiBackend
from gemgym.wiki.pages import WikiPage, load_pages, parse_html, render_html
from helpers.extras import needs_module

IDS = ("game:WikiGame-v0-easy", "game:WikiGame-v0-hard")
REPO = Path(__file__).resolve().parents[2]
PAGES = load_pages()


def _env(**kwargs: Any) -> WikiGameEnv:
    env = gemgym.make("game:WikiGame-v0-easy", **kwargs).unwrapped
    assert isinstance(env, WikiGameEnv)
    return env


def _pair(distance: int) -> tuple[str, str]:
    """A start with links and a target ``distance`` links away."""
    for start in PAGES.titles:
        dist = PAGES.distances_from(start)
        for target, d in dist.items():
            if d == distance and PAGES[target].links:
                return start, target
    raise AssertionError(f"no pair {distance} apart")


def _dead_end() -> tuple[str, str]:
    """A page without links, and a page with links that links to it."""
    for title in PAGES.titles:
        page = PAGES[title]
        for link in page.links:
            if not PAGES[link].links:
                return title, link
    raise AssertionError("no dead end")


# -- the page set --------------------------------------------------------------------------------
def test_the_shipped_page_set() -> None:
    assert len(PAGES) == 382 and sum(len(p.links) for p in PAGES.values()) == 3295
    for page in PAGES.values():
        assert page.text and page.title not in page.links
        assert all(t in PAGES for t in page.links)
    assert "os.path" in PAGES["os"].links and "json" in PAGES
    dist = PAGES.distances_from("json")
    assert dist["json"] == 0 and all(dist[t] == 1 for t in PAGES["json"].links)
    back = PAGES.distances_to("json")
    assert all(back[t] == 1 for t in PAGES.titles if "json" in PAGES[t].links)


def test_html_round_trip() -> None:
    for page in list(PAGES.values())[:40]:
        assert parse_html(render_html(page, PAGES)) == (page.title, page.text, page.links)
    odd = WikiPage('A <b> & "c"', "x < y & z", ("Extending/Embedding FAQ",))
    assert parse_html(render_html(odd)) == (odd.title, odd.text, odd.links)
    assert parse_html("<html><p>no heading</p></html>") is None


def test_a_page_set_of_ones_own(tmp_path: Path) -> None:
    file = tmp_path / "p.jsonl"
    rows = [
        {"title": "A", "text": "a", "links": ["B", "Nowhere"]},
        {"title": "B", "text": "b", "links": ["C"]},
        {"title": "C", "text": "c", "links": ["A"]},
    ]
    file.write_text("\n".join(json.dumps(r) for r in rows))
    env = _env(min_distance=2, max_distance=2, trawler_kwargs={"pages": str(file)})
    _, info = env.reset(seed=0)
    assert info["shortest_distance"] == 2
    assert env.backend.get_page("A") == WikiPage("A", "a", ("B",))  # dangling links dropped


# -- rules and rewards ---------------------------------------------------------------------------
def test_reaching_the_target() -> None:
    env = _env()
    start, target = _pair(1)
    obs, info = env.reset(seed=0, options={"start": start, "target": target})
    assert f"You started at '{start}'" in obs and info["shortest_distance"] == 1
    assert f"\\boxed{{{target}}}" in info["suffix"]
    obs, reward, terminated, truncated, info = env.step(f"I go to \\boxed{{{target}}}")
    assert (reward, terminated, truncated) == (SUCCESS_REWARD, True, False)
    assert info["success"] and "Congratulations" in obs and env.current_page is not None
    assert env.current_page.title == target
    # GEM's helper for a fixed pair
    assert (
        env._reset_fixed_page(start, target)[0]
        == env.reset(options={"start": start, "target": target})[0]
    )
    assert env.trawler is env.backend


def test_moves_invalid_titles_and_format_errors() -> None:
    env = _env()
    start, target = _pair(3)
    env.reset(options={"start": start, "target": target})
    nxt = PAGES[start].links[0]
    obs, reward, terminated, truncated, info = env.step(f"\\boxed{{{nxt}}}")
    assert (reward, terminated, truncated) == (INTERNAL_STEP_REWARD, False, False)
    assert f"you navigated to the '{nxt}' page" in obs and env.current_page.title == nxt  # type: ignore[union-attr]
    # not a neighbouring page: -0.2, the game goes on, a hint when a link contains the guess
    here = env.current_page
    assert here is not None
    link = here.links[0]
    obs, reward, terminated, _, info = env.step(f"\\boxed{{{link[: max(1, len(link) - 1)]}}}x")
    assert reward == INVALID_ACTION_REWARD and not terminated and info["invalid_action"]
    assert "Did you mean" in obs and env.current_page is here
    obs, reward, *_ = env.step("\\boxed{No Such Page At All}")
    assert reward == INVALID_ACTION_REWARD and "neither could it be construed" in obs
    # no \boxed{} (or an empty one): GEM's format error, -0.2, and the game goes on
    for reply in ("just text", "\\boxed{}", "\\boxed{  }"):
        _, reward, terminated, truncated, info = env.step(reply)
        assert (reward, terminated, truncated) == (FORMAT_ERROR_REWARD, False, False)
        assert info["format_error"]
    # a non-str reply is the empty reply (gemgym's one rule)
    _, reward, terminated, _, info = env.step(None)  # type: ignore[arg-type]
    assert (
        reward == FORMAT_ERROR_REWARD and not terminated and info["non_text_action"] == "NoneType"
    )


def test_titles_with_underscores_and_long_guesses() -> None:
    env = _env()
    start = next(t for t in PAGES.titles if any(" " in link for link in PAGES[t].links))
    spaced = next(link for link in PAGES[start].links if " " in link)
    env.reset(options={"start": start, "target": "json" if start != "json" else "os"})
    obs, reward, *_ = env.step("\\boxed{" + spaced.replace(" ", "_") + "}")
    assert env.current_page.title == spaced or reward == SUCCESS_REWARD  # type: ignore[union-attr]
    obs, reward, *_ = env.step("\\boxed{" + "y" * 100_000 + "}")
    assert reward == INVALID_ACTION_REWARD and len(obs) < 1_000


def test_backtracking_by_variant() -> None:
    start, target = _pair(4)
    first = PAGES[start].links[0]
    second = next(t for t in PAGES[first].links if t != target) if PAGES[first].links else None
    assert second is not None
    back = "\\boxed{<PREV_PAGE>}"
    # noregrets (default) and eidetic: never
    for variant in ("noregrets", "eidetic"):
        env = _env(variant=variant)
        env.reset(options={"start": start, "target": target})
        env.step(f"\\boxed{{{first}}}")
        obs, reward, terminated, _, _ = env.step(back)
        assert reward == INVALID_ACTION_REWARD and not terminated and "not allowed" in obs
    # oneback: once in a row
    env = _env(variant="oneback")
    env.reset(options={"start": start, "target": target})
    assert "no previous page" in env.step(back)[0]
    env.step(f"\\boxed{{{first}}}")
    env.step(f"\\boxed{{{second}}}")
    obs, reward, *_ = env.step(back)
    assert reward == INTERNAL_STEP_REWARD and env.current_page.title == first  # type: ignore[union-attr]
    obs, reward, *_ = env.step(back)
    assert reward == INVALID_ACTION_REWARD and "already backtracked" in obs
    # freenav: as often as there is history
    env = _env(variant="freenav")
    env.reset(options={"start": start, "target": target})
    env.step(f"\\boxed{{{first}}}")
    env.step(f"\\boxed{{{second}}}")
    assert env.step(back)[1] == INTERNAL_STEP_REWARD
    assert env.step(back)[1] == INTERNAL_STEP_REWARD and env.current_page.title == start  # type: ignore[union-attr]


def test_eidetic_remembers_every_link_seen() -> None:
    start, target = _pair(4)
    first = PAGES[start].links[0]
    remembered = next(t for t in PAGES[start].links if t not in PAGES[first].links and t != first)
    env = _env(variant="eidetic")
    env.reset(options={"start": start, "target": target})
    env.step(f"\\boxed{{{first}}}")
    assert f"\\boxed{{{remembered}}}" in env.get_task_suffix()
    _, reward, *_ = env.step(f"\\boxed{{{remembered}}}")
    assert reward in (INTERNAL_STEP_REWARD, SUCCESS_REWARD)


def test_dead_ends() -> None:
    before, dead = _dead_end()
    target = next(t for t in PAGES.titles if t not in (before, dead))
    env = _env()
    env.reset(options={"start": before, "target": target})
    obs, reward, terminated, _, info = env.step(f"\\boxed{{{dead}}}")
    assert (reward, terminated, info["success"]) == (0.0, True, False) and "dead-end" in obs
    env = _env(variant="oneback")
    env.reset(options={"start": before, "target": target})
    obs, reward, terminated, _, _ = env.step(f"\\boxed{{{dead}}}")
    assert reward == 2 * INTERNAL_STEP_REWARD and not terminated
    assert env.current_page.title == before and env.turn_count == 2  # type: ignore[union-attr]


def test_the_turn_limit() -> None:
    start, target = _pair(5)
    env = _env(max_turns=2, min_distance=None, max_distance=None)
    env.reset(options={"start": start, "target": target})
    first = PAGES[start].links[0]
    assert env.step(f"\\boxed{{{first}}}")[1] == INTERNAL_STEP_REWARD
    nxt = next(t for t in PAGES[first].links if PAGES[t].links and t != target)
    obs, reward, terminated, truncated, info = env.step(f"\\boxed{{{nxt}}}")
    assert (reward, terminated, truncated) == (0.0, False, True)  # GEM's fail reward
    assert info["turn_limit"] and not info["success"] and "maximum number of turns" in obs
    # a format error at the last turn keeps its own reward (GEM)
    env.reset(options={"start": start, "target": target})
    env.step("no box")
    _, reward, terminated, truncated, info = env.step("no box")
    assert (reward, terminated, truncated) == (FORMAT_ERROR_REWARD, False, True)


def test_summaries_by_unit() -> None:
    start, target = _pair(2)
    text = PAGES[start].text
    for unit, n, want in (
        ("characters", 30, text[:30]),
        ("words", 5, " ".join(text.split()[:5])),
    ):
        env = _env(page_summary_length=(n, unit))
        _, info = env.reset(options={"start": start, "target": target})
        assert f"Here is a summary of the page:\n{want}...\n" in info["suffix"]
    env = _env(page_summary_length=(1, "sentences"))
    _, info = env.reset(options={"start": start, "target": target})
    assert "Here is a summary of the page:\n" in info["suffix"]


def test_config_errors() -> None:
    with pytest.raises(UnknownParameterError, match="max_turn"):
        gemgym.make("game:WikiGame-v0-easy", max_turn=3)
    with pytest.raises(ConfigError, match="variant"):
        _env(variant="teleport")
    with pytest.raises(ConfigError, match="backend"):
        _env(backend="wikiwand")
    with pytest.raises(UnknownParameterError, match="zimfil"):
        _env(backend="kiwix", trawler_kwargs={"zimfil": "x"})
    with pytest.raises(ConfigError, match="page_summary_length"):
        _env(page_summary_length=(10, "pages"))
    with pytest.raises(ConfigError, match="max_distance"):
        _env(min_distance=4, max_distance=2)
    with pytest.raises(ConfigError, match="no start page"):
        _env(min_distance=40, max_distance=50).reset(seed=0)
    env = _env()
    with pytest.raises(ConfigError, match="no page titled"):
        env.reset(options={"start": "json", "target": "Nope"})


# -- draws, the expert, the random agent ---------------------------------------------------------
@pytest.mark.parametrize(("env_id", "lo", "hi"), [(IDS[0], 2, 3), (IDS[1], 4, 6)])
def test_pairs_are_drawn_per_seed_within_the_distance_range(env_id: str, lo: int, hi: int) -> None:
    a, b = gemgym.make(env_id), gemgym.make(env_id)
    pairs = set()
    for seed in range(50):
        obs, info = a.reset(seed=seed)
        assert b.reset(seed=seed) == (obs, info)
        assert lo <= info["shortest_distance"] <= hi
        assert PAGES.distances_from(info["start"])[info["target"]] == info["shortest_distance"]
        pairs.add((info["start"], info["target"]))
    assert len(pairs) == 50


@pytest.mark.parametrize("env_id", IDS)
def test_the_expert_wins_every_episode_and_random_play_rarely(env_id: str) -> None:
    expert = list(gemgym.rollout(env_id, OracleAgent(), episodes=50, seed=0))
    assert all(e.success for e in expert)
    rand = list(gemgym.rollout(env_id, RandomAgent(), episodes=50, seed=0))
    assert sum(e.success for e in rand) <= 10
    mean = sum(e.total_return for e in expert) / 50
    assert mean > 0.7 and mean > sum(e.total_return for e in rand) / 50 + 1.0


@pytest.mark.parametrize("env_id", IDS)
def test_check_env(env_id: str) -> None:
    check_env(env_id, check_bad=True)


def test_copies_play_on() -> None:
    env = _env()
    env.reset(seed=3)
    env.step(env.expert_action())
    clone = pickle.loads(pickle.dumps(env))
    assert clone.step(clone.expert_action())[:4] == env.step(env.expert_action())[:4]
    assert clone.backend.pages is env.backend.pages or len(clone.backend.pages or ()) == 382


def test_in_process_backend() -> None:
    backend = InProcessBackend()
    assert backend.pages is PAGES and backend.get_page("json") is PAGES["json"]
    assert backend.get_page("Nope") is None
    import random

    assert backend.random_title(random.Random(0)) in PAGES


# -- kiwix-serve on loopback over the ZIM built by scripts/build_wiki_zim.py ----------------------
def _need_kiwix() -> None:
    needs_module("libzim", "wiki")
    if shutil.which("kiwix-serve") is None:
        pytest.skip("kiwix-serve is not installed (Debian: apt-get install kiwix-tools)")


@pytest.fixture(scope="module")
def zim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _need_kiwix()
    out = tmp_path_factory.mktemp("zim") / "gemgym_pydocs.zim"
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts/build_wiki_zim.py"), str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert f"sha256 {hashlib.sha256(out.read_bytes()).hexdigest()}" in done.stdout
    return out


def test_the_zim_is_deterministic(zim: Path, tmp_path: Path) -> None:
    from libzim.reader import Archive

    from gemgym.wiki.kiwix import build_zim

    again = build_zim(tmp_path / "again.zim")
    assert again.read_bytes() == zim.read_bytes()
    archive = Archive(str(zim))
    assert archive.check() and archive.article_count == 382
    assert archive.get_entry_by_path(PAGES["os.path"].path).title == "os.path"


@pytest.mark.timeout(120)
def test_kiwix_serve_serves_every_page_as_in_process(zim: Path) -> None:
    from gemgym.wiki.kiwix import KiwixServer

    with KiwixServer(zim) as server:
        backend = KiwixBackend(url=server.url, zimfile=server.book, query_use_cache=False)
        for page in PAGES.values():
            assert backend.get_page(page.title) == page
        assert backend.get_page("No such page") is None
        # the env over this server plays exactly the in-process episodes
        remote = _env(backend="kiwix", trawler_kwargs={"url": server.url})
        local = _env()
        for seed in range(10):
            assert remote.reset(seed=seed) == local.reset(seed=seed)
            done = False
            while not done:
                action = local.expert_action()
                step = remote.step(action)
                assert step == local.step(action)
                done = step[2] or step[3]
            assert step[4]["success"]
        # gemgym's book comes with its map (the shipped pages); another book's is unknown
        assert KiwixBackend(url=server.url).pages is PAGES
        assert KiwixBackend(url=server.url, zimfile="wikipedia_en_all").pages is None
    down = KiwixBackend(url=server.url, max_query_attempts=1, timeout_s=1)
    with pytest.raises(EnvLostError, match="did not answer"):
        down.get_page("json")


@pytest.mark.timeout(120)
def test_the_env_starts_and_stops_its_own_kiwix_serve(
    zim: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from gemgym.wiki import kiwix

    monkeypatch.setenv("GEMGYM_WIKI_DIR", str(tmp_path))
    target = kiwix.default_zim_path()
    target.parent.mkdir(parents=True)
    shutil.copy(zim, target)  # as if built on an earlier run
    env = gemgym.make("game:WikiGame-v0-hard", backend="kiwix")
    other = gemgym.make("game:WikiGame-v0-hard", backend="kiwix")
    server = env.unwrapped.backend.server
    assert server is not None and server.running and other.unwrapped.backend.server is server
    ep = list(gemgym.rollout(env, OracleAgent(), episodes=5, seed=0))
    assert all(e.success for e in ep)
    check_env(other)  # copies (pickle) get a server of their own process: the shared one
    assert server.running
    env.close()
    assert not server.running


# -- the MediaWiki backend, against a loopback fake of api.php ----------------------------------
class _FakeMediaWiki(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
        assert q["action"] == "query" and q["format"] == "json"
        if q.get("list") == "random":
            body: dict[str, Any] = {"query": {"random": [{"title": "json"}]}}
        elif q.get("list") == "search":
            body = {"query": {"search": [{"title": "json"}]}}
        else:
            page = PAGES.get(q["titles"])
            if page is None:
                body = {"query": {"pages": [{"title": q["titles"], "missing": True}]}}
            else:
                body = {
                    "query": {
                        "pages": [
                            {
                                "title": page.title,
                                "extract": page.text,
                                "links": [{"ns": 0, "title": t} for t in page.links],
                            }
                        ]
                    }
                }
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def fake_mediawiki() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeMediaWiki)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/w/api.php"
    finally:
        server.shutdown()
        server.server_close()


def test_mediawiki_backend(fake_mediawiki: str) -> None:
    backend = MediaWikiBackend(url=fake_mediawiki, query_delay_ms=0)
    assert backend.get_page("os") == WikiPage("os", PAGES["os"].text, PAGES["os"].links)
    assert backend.get_page("Jsn typo") == backend.get_page("json")  # search fallback
    env = _env(backend="mw", trawler_kwargs={"url": fake_mediawiki, "query_delay_ms": 0})
    start, target = _pair(2)
    env.reset(options={"start": start, "target": target})
    assert env.step(f"\\boxed{{{PAGES[start].links[0]}}}")[1] in (-0.05, 0.0, 1.0)
    with pytest.raises(NotImplementedError, match="link graph"):
        env.expert_action()


# -- the command line ----------------------------------------------------------------------------
def _gemgym(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gemgym", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_gemgym_run_oracle_and_random() -> None:
    out = _gemgym("run", IDS[0], "--agent", "oracle", "--episodes", "50")
    assert out.returncode == 0, out.stderr
    assert "100.0%" in out.stdout
    out = _gemgym("run", IDS[0], "--agent", "random", "--episodes", "50")
    assert out.returncode == 0 and "100.0%" not in out.stdout


@pytest.mark.timeout(120)
def test_gemgym_serve_wiki(zim: Path, tmp_path: Path) -> None:
    built = tmp_path / "cli.zim"
    out = _gemgym("serve-wiki", "--build", str(built))
    assert out.returncode == 0, out.stderr
    assert built.read_bytes() == zim.read_bytes()
    started = time.monotonic()
    out = _gemgym("serve-wiki", "--zim", str(zim), "--port", "0", "--duration", "1")
    assert out.returncode == 0, out.stderr
    assert "serving" in out.stdout and "book 'gemgym_pydocs'" in out.stdout
    assert time.monotonic() - started < 60
    bad = _gemgym("serve-wiki", "--port", "70000")
    assert bad.returncode == 2 and "--port" in bad.stderr
    public = _gemgym("serve-wiki", "--zim", str(zim), "--host", "0.0.0.0", "--port", "0")
    assert public.returncode == 2 and "--insecure" in public.stderr, public.stderr


def test_the_shipped_file_is_well_formed() -> None:
    rows = [
        json.loads(line)
        for line in (files("gemgym") / "wiki/data/pydocs_pages.jsonl").read_text().splitlines()
    ]
    assert [r["title"] for r in rows] == list(PAGES.titles)
    assert all(set(r) == {"title", "path", "source", "text", "links"} for r in rows)
    assert all(r["source"].endswith(".html") and len(r["text"]) <= 1000 for r in rows)
    assert len({r["path"] for r in rows}) == len(rows) and not any("/" in r["path"] for r in rows)
    assert rows[0]["source"].startswith("library/") and rows[-1]["source"] == "glossary.html"
