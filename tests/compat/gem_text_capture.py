"""The text a model sees from GEM, per family, with fixed seeds and actions.

Run with a real GEM (``pip install gem-llm`` in a side venv, or a checkout on ``PYTHONPATH``)::

    python tests/compat/gem_text_capture.py tests/compat/data/gem_text.json [SCENARIO ...]

to capture GEM's strings (named scenarios only: those are captured and merged into the file);
``test_gem_text.py`` runs :func:`capture` through gemgym's layer and compares each scenario
with the captured strings. Every scenario is offline: dataset envs get an in-memory
``datasets.Dataset``, the search tool a loopback server started here, WikiGame a loopback
MediaWiki API (``api.php``, ``formatversion=2``) over :data:`WIKI_PAGES` (GEM's ``mw`` backend
needs ``pip install pywikiapi beautifulsoup4``).
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

GAMES = {
    "game:GuessTheNumber-v0-easy": [r"\boxed{5}", "no box", r"\boxed{3}"],
    "game:Mastermind-v0-easy": [r"\boxed{1 2 3 4}", "nothing", r"\boxed{2 2 2 2}"],
    "game:Minesweeper-v0-easy": [r"\boxed{3 3}", r"\boxed{0 0}"],
    "game:Wordle-v0-easy": [r"\boxed{crane}", r"\boxed{xx}"],
    "game:Hangman-v0-easy": [r"\boxed{e}", r"\boxed{a}", "no"],
    "game:Sudoku-v0-easy": [r"\boxed{1 1 1}", "no"],
    "game:Game2048-v0-easy": [r"\boxed{up}", r"\boxed{left}"],
    "game:TowerofHanoi-v0-easy": [r"\boxed{A C}", r"\boxed{Z Q}"],
    "game:FifteenPuzzle-v0-easy": [r"\boxed{up}", r"\boxed{down}"],
    "game:Sokoban-v0-easy": [r"\boxed{up}", r"\boxed{left}"],
    "game:Crosswords-v0-easy": [r"\boxed{1 across cat}", "no"],
    "game:WordSearch-v0-easy": [r"\boxed{0 0 0 1}", "no"],
}

QA_ROWS = [
    {"problem": "Which river flows through Budapest?", "answer": ["Danube"]},
    {"problem": "Who wrote Pride and Prejudice?", "answer": ["Jane Austen"]},
    {"problem": "What is the capital of Australia?", "answer": ["Canberra"]},
]
MATH_ROWS = [
    {"problem": "What is 2 + 3?", "answer": "5"},
    {"problem": "What is 7 * 6?", "answer": "42"},
    {"problem": "What is 10 - 4?", "answer": "6"},
]


WIKI_PAGES: dict[str, tuple[str, list[str]]] = {
    "Danube": (
        "The Danube is the second-longest river in Europe. It flows through Budapest.",
        ["Budapest", "Black Sea", "Vienna"],
    ),
    "Budapest": (
        "Budapest is the capital and most populous city of Hungary. It lies on the Danube.",
        ["Hungary", "Danube", "Parliament"],
    ),
    "Hungary": (
        "Hungary is a landlocked country in Central Europe. Its capital is Budapest.",
        ["Budapest", "Black Sea", "Europe"],
    ),
    "Vienna": ("Vienna is the capital of Austria.", ["Danube", "Europe"]),
    "Europe": ("Europe is a continent in the Northern Hemisphere.", ["Hungary", "Vienna"]),
    "Parliament": ("The Hungarian Parliament Building stands in Budapest.", []),
    "Black Sea": (
        "The Black Sea is a marginal sea of the Atlantic Ocean. The Danube flows into it.",
        ["Danube", "Europe"],
    ),
}
"""WikiGame's loopback wiki: title -> (extract, links); ``Parliament`` is a dead end."""


class _Handler(BaseHTTPRequestHandler):
    def answer(self, body: bytes, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return None


@contextmanager
def _serve(handler: type[BaseHTTPRequestHandler], path: str) -> Iterator[str]:
    """A loopback server thread with ``handler``; the URL of ``path``."""
    server = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}{path}"
    finally:
        server.shutdown()
        server.server_close()


class _Wiki(_Handler):
    randoms = 0

    def do_GET(self) -> None:
        from urllib.parse import parse_qsl, urlsplit

        q = dict(parse_qsl(urlsplit(self.path).query))
        titles = list(WIKI_PAGES)
        if q.get("list") == "random":
            _Wiki.randoms += 1
            body: dict[str, Any] = {"random": [{"title": titles[_Wiki.randoms % len(titles)]}]}
        elif q.get("list") == "search":
            hits = [t for t in titles if t.lower() == q.get("srsearch", "").lower()]
            body = {"search": [{"title": t} for t in hits]}
        elif q.get("titles") in WIKI_PAGES:
            title = q["titles"]
            text, links = WIKI_PAGES[title]
            page = {
                "pageid": titles.index(title) + 1,
                "ns": 0,
                "title": title,
                "extract": text,
                "links": [{"ns": 0, "title": t} for t in links],
            }
            body = {"pages": [page]}
        else:
            body = {"pages": [{"ns": 0, "title": q.get("titles", ""), "missing": True}]}
        data = json.dumps({"batchcomplete": True, "query": body}).encode()
        self.answer(data, "application/json; charset=utf-8")


def wiki_server() -> AbstractContextManager[str]:
    """A loopback MediaWiki API over :data:`WIKI_PAGES`; its ``api.php`` URL."""
    return _serve(_Wiki, "/w/api.php")


class Tokenizer:
    """A chat template that shows roles and message boundaries."""

    def apply_chat_template(
        self,
        conversation: list[dict[str, str]],
        tokenize: bool = False,
        add_generation_prompt: bool = False,
        **_: Any,
    ) -> str:
        text = "".join(f"<|{m['role']}|>\n{m['content']}<|end|>\n" for m in conversation)
        return text + ("<|assistant|>\n" if add_generation_prompt else "")


class _Search(_Handler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        docs = [
            {"document": {"contents": "Danube\nThe Danube flows through Budapest."}},
            {"document": {"contents": "Budapest\nBudapest is the capital of Hungary."}},
        ]
        try:
            import msgspec

            body = msgspec.msgpack.encode({"result": docs})
        except ImportError:
            import msgpack  # type: ignore[import-untyped]

            body = msgpack.packb({"result": docs})
        self.answer(body, "application/msgpack")


def search_server() -> AbstractContextManager[str]:
    """A loopback retrieval server speaking GEM's wire format; its URL."""
    return _serve(_Search, "/retrieve")


def _play(env: Any, actions: list[str], seed: int) -> list[str]:
    obs, info = env.reset(seed=seed)
    seen = [obs, str(info.get("suffix", ""))]
    for action in actions:
        obs, _, terminated, truncated, info = env.step(action)
        seen += [obs, str(info.get("suffix", ""))]
        if terminated or truncated:
            break
    return seen


def echo_env() -> Any:
    """A GEM-style env with fixed text: what the wrappers add is all that varies."""
    from gem.core import Env

    class Echo(Env):
        def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
            super().reset(seed)
            self.turn = 0
            return "Guess a number between 1 and 9.\n", {"suffix": "Enter your next guess."}

        def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
            self.turn += 1
            done = "7" in action
            obs = "Correct!" if done else f"At turn {self.turn}, {action[-9:]!r} is wrong."
            return obs, float(done), done, False, {"suffix": "Enter your next guess."}

    return Echo()


def _wrapped(name: str) -> Any:
    from gem.wrappers.wrapper_factory import get_wrapper_fns

    env = echo_env()
    for fn in get_wrapper_fns(name, tokenizer=Tokenizer()):
        env = fn(env)
    return env


def scenarios() -> dict[str, Callable[[], list[str]]]:
    """Each scenario: a function returning the strings the model sees, in order."""
    import gem

    out: dict[str, Callable[[], list[str]]] = {}
    for env_id, actions in GAMES.items():
        out[f"{env_id} rules"] = lambda e=env_id: [gem.make(e).reset(seed=3)[0]]
        out[f"{env_id} steps"] = lambda e=env_id, a=actions: _play(gem.make(e), a, 3)[2:]
    history_actions = [r"first \boxed{5}", r"\boxed{9}", r"\boxed{7}"]
    for wrapper in ("concat", "concat_with_action", "concat_chat", "concat_chat_on_reset"):
        out[f"history {wrapper}"] = lambda w=wrapper: _play(_wrapped(w), history_actions, 5)
    out["python tool"] = _python_tool
    out["python tool concat_chat"] = _python_tool_chat
    out["search tool"] = _search_tool
    out["qa prompt"] = _qa
    out["math prompt"] = _math
    out["math order"] = _math_order
    out["qa order seed 7"] = _qa_order
    out["vector seeds"] = _vector_seeds
    out["wikigame mw noregrets"] = lambda: _wikigame("noregrets", WIKI_NOREGRETS)
    out["wikigame mw oneback"] = lambda: _wikigame("oneback", WIKI_ONEBACK)
    return out


WIKI_NOREGRETS = [
    r"\boxed{Nowhere}",
    "no box",
    r"\boxed{Vienna}",
    r"\boxed{<PREV_PAGE>}",
    r"\boxed{Europe}",
    r"\boxed{Hungary}",
    r"\boxed{Black Sea}",
]
WIKI_ONEBACK = [
    r"\boxed{Budapest}",
    r"\boxed{Parliament}",
    r"\boxed{<PREV_PAGE>}",
    r"\boxed{<PREV_PAGE>}",
    r"\boxed{Hungary}",
    r"\boxed{Black Sea}",
]


def _wikigame(variant: str, actions: list[str]) -> list[str]:
    """GEM's WikiGame over the MediaWiki backend: a fixed start and target, then ``actions``;
    each step's observation, reward and flags, and suffix."""
    import gem

    with wiki_server() as url:
        env = gem.make(
            "game:WikiGame-v0-easy",
            backend="mw",
            trawler_kwargs={"url": url, "query_delay_ms": 0},
            page_summary_length=(8, "words"),
            variant=variant,
        )
        obs, info = env._reset_fixed_page("Danube", "Black Sea")
        seen = [obs, str(info["suffix"])]
        for action in actions:
            obs, reward, terminated, truncated, info = env.step(action)
            seen += [obs, f"{reward:+.2f} {terminated} {truncated}", str(info["suffix"])]
            if terminated or truncated:
                break
        return seen


def _questions(env: Any, seeds: list[int | None]) -> list[str]:
    return [env.reset(seed=s)[0] for s in seeds]


def _math_order() -> list[str]:
    import gem
    from datasets import Dataset

    rows = [{"problem": f"What is {i} + 1?", "answer": str(i + 1)} for i in range(7)]
    env = gem.make("math:GSM8K", dataset=Dataset.from_list(rows), use_mp=False)
    return _questions(env, [None] * 9 + [11, None, None])


def _qa_order() -> list[str]:
    import gem
    from datasets import Dataset

    env = gem.make("qa:HotpotQA", dataset=Dataset.from_list(QA_ROWS), seed=7)
    return _questions(env, [None, None, None, None, 2, None])


def _vector_seeds() -> list[str]:
    import gem
    from datasets import Dataset

    rows = [{"problem": f"Item {i}", "answer": str(i)} for i in range(50)]
    vec = gem.make_vec(["math:GSM8K"] * 3, dataset=Dataset.from_list(rows), use_mp=False, seed=5)
    first = list(vec.reset()[0])
    return first + list(vec.reset(seed=3)[0]) + list(vec.reset()[0])


def _python_tool() -> list[str]:
    from gem.tools.python_code_tool import PythonCodeTool
    from gem.tools.tool_env_wrapper import ToolEnvWrapper

    env = ToolEnvWrapper(
        echo_env(),
        tools=[PythonCodeTool(timeout=10, keep_error_last_line=True)],
        max_tool_uses=3,
    )
    return _play(
        env,
        [
            "Let me compute.\n<python>print(6 * 7)</python> and more text",
            "```python\nprint('a')\nprint('b')\n```",
            "<python>print(1)\nraise ValueError('bad value')</python>",
            r"\boxed{7}",
        ],
        seed=4,
    )


def _python_tool_chat() -> list[str]:
    from gem.tools.python_code_tool import PythonCodeTool
    from gem.tools.tool_env_wrapper import ToolEnvWrapper
    from gem.wrappers.observation_wrapper import ObservationWrapper

    env = ObservationWrapper(
        ToolEnvWrapper(echo_env(), tools=[PythonCodeTool()]),
        include_action=True,
        include_chat_template=True,
        tokenizer=Tokenizer(),
    )
    return _play(env, ["think <python>print(2 ** 5)</python> tail", r"\boxed{32}"], seed=4)


def _search_tool() -> list[str]:
    from gem.tools.search_tool import SearchTool
    from gem.tools.tool_env_wrapper import ToolEnvWrapper
    from gem.wrappers.observation_wrapper import ObservationWrapper

    with search_server() as url:
        env = ObservationWrapper(
            ToolEnvWrapper(echo_env(), tools=[SearchTool(search_url=url)]),
            include_action=True,
            include_chat_template=False,
        )
        return _play(
            env, ["<think>hm</think><search> budapest river </search> rest", r"\boxed{4}"], 4
        )


def _qa() -> list[str]:
    import gem
    from datasets import Dataset

    env = gem.make("qa:HotpotQA", dataset=Dataset.from_list(QA_ROWS))
    seen = [env.reset()[0] for _ in range(3)]
    return sorted(seen)  # the texts; the order is a separate question


def _math() -> list[str]:
    import gem
    from datasets import Dataset

    env = gem.make("math:GSM8K", dataset=Dataset.from_list(MATH_ROWS), use_mp=False)
    return sorted(env.reset()[0] for _ in range(3))


def capture(names: list[str] | None = None) -> dict[str, list[str] | str]:
    """Every scenario's strings, or those of ``names`` (``"error: ..."`` when one raised)."""
    result: dict[str, list[str] | str] = {}
    for name, fn in scenarios().items():
        if names and name not in names:
            continue
        try:
            result[name] = fn()
        except Exception as e:  # recorded: a scenario GEM itself cannot run
            result[name] = f"error: {type(e).__name__}: {e}"
    return result


if __name__ == "__main__":
    data = capture(sys.argv[2:])
    if len(sys.argv) > 2:  # these scenarios only, merged into the file
        try:
            with open(sys.argv[1], encoding="utf-8") as f:
                data = {**json.load(f), **data}
        except FileNotFoundError:
            pass
    text = json.dumps(data, indent=1, ensure_ascii=False, sort_keys=True) + "\n"
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
