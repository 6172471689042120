"""Corpora: :class:`Document`, JSONL loading, and the shipped sample corpus.

A corpus is a JSONL file with one document per line. Accepted fields:

* ``id`` (optional; defaults to the line number),
* ``title`` and ``text``, or Search-R1's ``contents`` (the title on the first line, the text on
  the following lines; wiki-18 dumps use this form),
* anything else is kept in :attr:`Document.extra` and returned by the retrieval server.

The shipped sample (:func:`sample_corpus_path`, :func:`sample_qa_path`) is built by
:func:`build_stdlib_corpus` from the docstrings of the Python standard library; see
``data/README.md`` for its source and licence.
"""

from __future__ import annotations

import ast
import json
import re
import sysconfig
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from gemgym.errors import DatasetError

__all__ = [
    "Document",
    "build_stdlib_corpus",
    "load_corpus",
    "load_qa",
    "sample_corpus_path",
    "sample_qa_path",
    "write_corpus",
]


@dataclass(frozen=True)
class Document:
    """One retrievable passage.

    Attributes:
        id: a unique id within the corpus.
        title: the title (shown as ``Doc i(Title: ...)`` by the search tool).
        text: the passage.
        extra: other fields of the source record, passed through untouched.
    """

    id: str
    title: str
    text: str
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def contents(self) -> str:
        """Search-R1's ``contents``: the title, a newline, the text."""
        return f"{self.title}\n{self.text}"

    def to_dict(self) -> dict[str, Any]:
        """The document as the retrieval server returns it (``contents`` included)."""
        return {
            **self.extra,
            "id": self.id,
            "title": self.title,
            "text": self.text,
            "contents": self.contents,
        }

    @classmethod
    def from_dict(cls, record: Mapping[str, Any], default_id: str) -> Document:
        """Build a document from a corpus record (``title``/``text`` or ``contents``)."""
        if "text" in record or "title" in record:
            title = str(record.get("title", "") or "")
            text = str(record.get("text", "") or "")
        elif "contents" in record:
            head, _, rest = str(record["contents"]).partition("\n")
            title, text = head.strip().strip('"'), rest
        else:
            raise DatasetError(
                f"corpus record {default_id} has neither 'text'/'title' nor 'contents' "
                f"(fields: {sorted(record)}); give each line a 'text' field"
            )
        extra = {k: v for k, v in record.items() if k not in ("id", "title", "text", "contents")}
        return cls(str(record.get("id", default_id)), title, text, extra)


def _iter_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise DatasetError(f"cannot read {path}: {e}") from e
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise DatasetError(f"{path}:{lineno} is not valid JSON: {e.msg}") from e
        if not isinstance(record, dict):
            raise DatasetError(
                f"{path}:{lineno} must be a JSON object, got {type(record).__name__}"
            )
        yield lineno, record


def load_corpus(path: str | Path) -> list[Document]:
    """Read a JSONL corpus; raises :class:`~gemgym.errors.DatasetError` on a bad file."""
    p = Path(path)
    docs = [Document.from_dict(rec, str(i)) for i, (_, rec) in enumerate(_iter_jsonl(p))]
    if not docs:
        raise DatasetError(f"corpus {p} has no documents")
    seen: set[str] = set()
    for d in docs:
        if d.id in seen:
            raise DatasetError(f"corpus {p} has the id {d.id!r} twice; ids must be unique")
        seen.add(d.id)
    return docs


def write_corpus(documents: Iterable[Document], path: str | Path) -> None:
    """Write documents as a JSONL corpus (``id``, ``title``, ``text`` and the extra fields)."""
    with open(path, "w", encoding="utf-8") as f:
        for d in documents:
            record = {"id": d.id, "title": d.title, "text": d.text, **d.extra}
            f.write(json.dumps(record, ensure_ascii=False) + "\n")


def load_qa(path: str | Path) -> list[dict[str, Any]]:
    """Read a QA JSONL file (``question``, ``answer`` list, optional ``doc_id``)."""
    items = [rec for _, rec in _iter_jsonl(Path(path))]
    for i, rec in enumerate(items):
        if "question" not in rec or "answer" not in rec:
            raise DatasetError(f"QA item {i} of {path} needs 'question' and 'answer'")
    return items


def sample_corpus_path() -> Path:
    """The shipped corpus: ~900 passages from Python standard-library docstrings."""
    return Path(str(resources.files("gemgym.retrieval") / "data" / "stdlib_docs.jsonl"))


def sample_qa_path() -> Path:
    """QA items answered by the shipped corpus (each names its supporting ``doc_id``)."""
    return Path(str(resources.files("gemgym.retrieval") / "data" / "stdlib_qa.jsonl"))


# -- building the shipped corpus ----------------------------------------------------------------

_SKIP = frozenset(
    {
        "test", "idlelib", "lib2to3", "tkinter", "turtledemo", "ensurepip", "distutils",
        "pydoc_data", "site-packages", "this", "antigravity", "lib-dynload",
    }
)  # fmt: skip


def _clip(doc: str, limit: int) -> str:
    """Whitespace-normalised paragraphs of ``doc``, cut at a sentence end near ``limit``."""
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", doc) if p.strip()]
    text = "\n".join(paragraphs)
    if len(text) <= limit:
        return text
    cut = text[:limit]
    end = max(cut.rfind(". "), cut.rfind(".\n"))
    return cut[: end + 1] if end > limit // 3 else cut.rsplit(" ", 1)[0] + " ..."


def build_stdlib_corpus(
    stdlib_dir: str | Path | None = None,
    *,
    min_words: int = 12,
    module_chars: int = 1200,
    member_chars: int = 600,
) -> list[Document]:
    """Passages from the docstrings of the standard library's pure-Python modules.

    One document per module docstring (title: the module name) and one per public top-level
    function or class with a docstring (title: ``module.name``). Sources are parsed with
    :mod:`ast`, never imported, so building has no side effects. Deterministic for a given
    Python version.
    """
    root = Path(stdlib_dir) if stdlib_dir is not None else Path(sysconfig.get_paths()["stdlib"])
    docs: list[Document] = []
    for p in sorted(root.iterdir()):
        name = p.stem if p.suffix == ".py" else p.name
        if name.startswith("_") or name in _SKIP:
            continue
        source = p if p.suffix == ".py" else p / "__init__.py"
        if not source.is_file():
            continue
        tree = ast.parse(source.read_text(encoding="utf-8", errors="replace"))
        entries: list[tuple[str, str | None, int]] = [(name, ast.get_docstring(tree), module_chars)]
        entries += [
            (f"{name}.{node.name}", ast.get_docstring(node), member_chars)
            for node in tree.body
            if isinstance(node, ast.FunctionDef | ast.ClassDef) and not node.name.startswith("_")
        ]
        for title, doc, limit in entries:
            if doc and len(doc.split()) >= min_words:
                docs.append(Document(str(len(docs)), title, _clip(doc, limit)))
    return docs
