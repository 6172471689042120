"""Document retrieval for the search tool: corpora, BM25 and dense indexes, an HTTP server.

* :mod:`~gemgym.retrieval.corpus` — :class:`Document`, :func:`load_corpus` (JSONL), the shipped
  sample corpus and QA items (:func:`sample_corpus_path`, :func:`sample_qa_path`).
* :mod:`~gemgym.retrieval.index` — :class:`Retriever` with :class:`BM25Retriever` (extra
  ``search``) and :class:`DenseRetriever` (extra ``dense``); :func:`build_retriever` picks one.
* :mod:`~gemgym.retrieval.server` — :class:`RetrievalServer`, the Search-R1 / GEM retrieval
  protocol over HTTP (``gemgym serve-retriever``).

Nothing heavy is imported here: ``bm25s``, ``faiss`` and ``sentence_transformers`` load when an
index is built.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gemgym.retrieval.corpus import (
    Document,
    load_corpus,
    load_qa,
    sample_corpus_path,
    sample_qa_path,
    write_corpus,
)
from gemgym.retrieval.index import BM25Retriever, DenseRetriever, Hit, Retriever
from gemgym.retrieval.server import RetrievalServer

__all__ = [
    "BM25Retriever",
    "DenseRetriever",
    "Document",
    "Hit",
    "RetrievalServer",
    "Retriever",
    "build_retriever",
    "load_corpus",
    "load_qa",
    "sample_corpus_path",
    "sample_qa_path",
    "write_corpus",
]


def build_retriever(
    corpus: str | Path | Sequence[Document] | None = None,
    *,
    dense: bool = False,
    model_path: str | Path | None = None,
) -> Retriever:
    """An index over ``corpus`` (a JSONL path or documents; ``None``: the shipped sample).

    BM25 by default; ``dense=True`` (or a ``model_path``) builds a :class:`DenseRetriever`.
    """
    if corpus is None:
        corpus = sample_corpus_path()
    docs = load_corpus(corpus) if isinstance(corpus, str | Path) else list(corpus)
    if dense or model_path is not None:
        return DenseRetriever(docs, model_path=model_path)
    return BM25Retriever(docs)
