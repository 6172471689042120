"""SearchTool: parsing, GEM's formatting, in-process and HTTP backends, errors as observations."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from gemgym.errors import ConfigError
from gemgym.retrieval import (
    BM25Retriever,
    Document,
    RetrievalServer,
    load_corpus,
    sample_corpus_path,
)
from gemgym.tools.search import SearchTool, format_documents
from helpers.extras import needs_module

DOCS = [
    Document("0", "Paris", "Paris is the capital and largest city of France."),
    Document("1", "Rome", "Rome is the capital city of Italy."),
    Document("2", "Berlin", "Berlin is the capital of Germany."),
    Document("3", "Danube", "The Danube flows through ten countries."),
]


@pytest.fixture(scope="module")
def retriever() -> BM25Retriever:
    return BM25Retriever(DOCS)


@pytest.fixture(scope="module")
def server(retriever: BM25Retriever) -> Iterator[RetrievalServer]:
    with RetrievalServer(retriever) as s:
        yield s


class _Handler(BaseHTTPRequestHandler):
    """A misbehaving retrieval server: slow, or answering garbage."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        if self.path == "/slow":
            time.sleep(1.5)
        body = b'{"unexpected": true}' if self.path != "/fail" else b"boom"
        self.send_response(200 if self.path != "/fail" else 500)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # the client timed out and closed the connection: expected here


@pytest.fixture()
def bad_server() -> Iterator[str]:
    httpd = _QuietServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def test_parse_takes_the_first_search_and_trims_the_action(retriever: BM25Retriever) -> None:
    tool = SearchTool(retriever=retriever)
    action = "<think>hmm</think><search> capital of Italy </search> then <search>x</search>"
    call = tool.parse(action)
    assert call is not None
    assert call.arguments == "capital of Italy"
    assert call.raw == "<think>hmm</think><search> capital of Italy </search>"
    assert tool.parse("<answer>Rome</answer>") is None
    assert tool.parse("<search>unclosed") is None
    multi = tool.parse("<search>a\nb</search>")
    assert multi is not None and multi.arguments == "a\nb"


def test_in_process_search_is_formatted_as_gem(retriever: BM25Retriever) -> None:
    tool = SearchTool(retriever=retriever, topk=2)
    result = tool.execute(tool.parse("<search>capital of Italy</search>"))  # type: ignore[arg-type]
    assert result.ok
    assert result.observation.startswith("\n\n<information>Doc 1(Title: Rome) Rome is the capital")
    assert result.observation.endswith("</information>\n\n")
    assert "Doc 2(Title: " in result.observation and "Doc 3" not in result.observation
    assert result.info["num_documents"] == 2


def test_format_documents_reads_contents_or_title_and_text() -> None:
    docs = [{"contents": '"A"\nfirst'}, {"title": "B", "text": "second\nline"}]
    assert format_documents(docs) == 'Doc 1(Title: "A") first\nDoc 2(Title: B) second\nline\n'


def test_search_through_the_server_matches_in_process(
    retriever: BM25Retriever, server: RetrievalServer
) -> None:
    remote = SearchTool(server.url, topk=3)
    local = SearchTool(retriever=retriever, topk=3)
    for query in ["capital of France", "Danube countries", "capital"]:
        call = remote.parse(f"<search>{query}</search>")
        assert call is not None
        r1, r2 = remote.execute(call), local.execute(call)
        assert r1.ok and r2.ok
        assert r1.observation == r2.observation


def test_msgpack_encoding_as_gem_sends_it(server: RetrievalServer) -> None:
    needs_module("msgpack", "search")
    tool = SearchTool(server.url, encoding="msgpack")
    result = tool.execute(tool.parse("<search>Danube</search>"))  # type: ignore[arg-type]
    assert result.ok and "Doc 1(Title: Danube)" in result.observation
    with pytest.raises(ConfigError, match="encoding"):
        SearchTool(server.url, encoding="xml")  # type: ignore[arg-type]


def test_url_without_path_gets_retrieve(server: RetrievalServer) -> None:
    tool = SearchTool(f"http://127.0.0.1:{server.port}")
    assert tool.url == server.url
    result = tool.execute(tool.parse("<search>Berlin</search>"))  # type: ignore[arg-type]
    assert result.ok and "Title: Berlin" in result.observation


def test_search_url_environment_variable(
    server: RetrievalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SEARCH_URL", server.url)
    assert SearchTool().url == server.url
    monkeypatch.delenv("SEARCH_URL")
    with pytest.raises(ConfigError, match="serve-retriever"):
        SearchTool()


def test_no_match_and_empty_query(retriever: BM25Retriever) -> None:
    tool = SearchTool(retriever=retriever)
    nothing = tool.execute(tool.parse("<search>zebra</search>"))  # type: ignore[arg-type]
    assert nothing.ok and "No documents matched" in nothing.observation
    empty = tool.execute(tool.parse("<search>  </search>"))  # type: ignore[arg-type]
    assert not empty.ok and "[SearchTool Error: empty query" in empty.observation


def test_unreachable_server_is_an_error_observation() -> None:
    tool = SearchTool("http://127.0.0.1:9/retrieve", timeout=2)
    result = tool.execute(tool.parse("<search>x</search>"))  # type: ignore[arg-type]
    assert not result.ok
    assert result.observation.startswith("\n\n<information>[SearchTool Error: cannot reach")


@pytest.mark.flaky(reruns=2)  # wall-clock bound: a busy machine can miss it once
def test_timeout_is_an_error_observation(bad_server: str) -> None:
    tool = SearchTool(f"{bad_server}/slow", timeout=0.3)
    start = time.perf_counter()
    result = tool.execute(tool.parse("<search>x</search>"))  # type: ignore[arg-type]
    assert time.perf_counter() - start < 1.4  # the server would answer after 1.5 s
    assert not result.ok and "timed out after 0.3 s" in result.observation


@pytest.mark.parametrize(
    ("path", "message"), [("/fail", "server answered 500"), ("/odd", "unexpected")]
)
def test_bad_answers_are_error_observations(bad_server: str, path: str, message: str) -> None:
    tool = SearchTool(f"{bad_server}{path}")
    result = tool.execute(tool.parse("<search>x</search>"))  # type: ignore[arg-type]
    assert not result.ok and message in result.observation


@pytest.mark.parametrize(
    "kwargs",
    [
        {"url": "ftp://host/x"},
        {"url": "localhost:8000"},
        {"url": "http://h/retrieve", "retriever": "bm25"},  # built in the test (gemgym[search])
        {"url": "http://h/retrieve", "topk": 0},
        {"url": "http://h/retrieve", "timeout": 0},
    ],
)
def test_bad_configuration_raises_config_error(kwargs: dict[str, Any]) -> None:
    if kwargs.get("retriever") == "bm25":
        kwargs = {**kwargs, "retriever": BM25Retriever(DOCS)}
    with pytest.raises(ConfigError):
        SearchTool(**kwargs)


def test_concurrent_async_searches_share_one_server(server: RetrievalServer) -> None:
    tool = SearchTool(server.url)
    calls = [tool.parse(f"<search>{q}</search>") for q in ["Paris", "Rome", "Berlin", "Danube"] * 4]

    async def run_all() -> list[Any]:
        return await asyncio.gather(*(tool.aexecute(c) for c in calls))  # type: ignore[arg-type]

    results = asyncio.run(run_all())
    assert all(r.ok for r in results)
    for call, result in zip(calls, results, strict=True):
        assert f"Doc 1(Title: {call.arguments})" in result.observation  # type: ignore[union-attr]


def test_spawned_envs_share_the_in_process_index(retriever: BM25Retriever) -> None:
    import gemgym
    from gemgym.wrappers.tools import ToolEnvWrapper

    env = ToolEnvWrapper(
        gemgym.make("game:GuessTheNumber-v0-easy"), [SearchTool(retriever=retriever)]
    )
    env.reset(seed=0)
    twin = env.spawn(same_state=True)
    tool = twin.get_wrapper_attr("tools")[0]
    assert isinstance(tool, SearchTool) and tool.retriever is retriever
    obs, *_ = twin.step("<search>Rome</search>")
    assert "Doc 1(Title: Rome)" in obs


def test_instructions_follow_gem() -> None:
    text = SearchTool(retriever=BM25Retriever(DOCS)).instructions()
    assert "<search> your query </search>" in text and "<answer>" in text


def test_sample_corpus_answers_through_the_tool() -> None:
    tool = SearchTool(retriever=BM25Retriever(load_corpus(sample_corpus_path())))
    result = tool.execute(tool.parse("<search>heap queue algorithm</search>"))  # type: ignore[arg-type]
    assert "Doc 1(Title: heapq)" in result.observation


def test_qa_env_with_search_runs_end_to_end_offline() -> None:
    """qa:* on the shipped QA items, the search tool on the shipped corpus behind the server."""
    import re

    import gemgym
    from gemgym.retrieval import build_retriever, sample_qa_path
    from gemgym.wrappers.tools import ToolEnvWrapper

    with RetrievalServer(build_retriever()) as srv:
        env = ToolEnvWrapper(
            gemgym.make("qa:NaturalQuestions", dataset=str(sample_qa_path())),
            [SearchTool(srv.url)],
            tool_reward=0.1,
        )
        solved = 0
        for i in range(40):
            obs, _ = env.reset(seed=0, options={"index": i})
            assert "<search> your query </search>" in obs
            question = obs.split("\n")[0]
            obs, reward, terminated, truncated, info = env.step(
                f"<think>I should look it up.</think><search>{question}</search>"
            )
            assert info["use_tool"] and info["tool_type"] == "search"
            assert reward == 0.0 and not terminated and not truncated  # paid if solved
            m = re.search(r"Doc 1\(Title: ([\w.]+)\)", obs)
            assert m is not None, obs
            module = m.group(1).split(".")[0]
            _, reward, terminated, truncated, info = env.step(f"<answer>{module}</answer>")
            assert terminated and not truncated
            assert info["tool_reward"] == (0.1 if reward > 0 else 0.0)
            solved += reward == pytest.approx(1.1)
        env.close()
    # a search-then-copy-the-first-title agent solves nearly every item
    assert solved >= 36
