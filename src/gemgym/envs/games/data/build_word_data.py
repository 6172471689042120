"""Rebuild the word lists and crossword clues in this folder (run by hand, never at import).

Sources (both permissively licensed, both Debian packages; see README.md)::

    apt-get download wamerican wamerican-small wordnet-base
    for f in *.deb; do dpkg-deb -x "$f" ex; done
    python build_word_data.py ex/usr/share

* SCOWL word lists (Debian ``wamerican`` = SCOWL size 50, ``wamerican-small`` = size 35).
* WordNet 3.0 (Debian ``wordnet-base``): lemmas, sense-tag counts (how common a word is) and
  glosses (the crossword clues).

The output is deterministic: the same inputs give byte-identical files.
"""

from __future__ import annotations

import gzip
import re
import sys
from pathlib import Path

_ALPHA = re.compile(r"^[a-z]+$")
HERE = Path(__file__).resolve().parent


def _read_words(path: Path) -> set[str]:
    return {w for w in path.read_text(encoding="latin-1").split() if _ALPHA.match(w)}


def _wordnet(root: Path) -> tuple[dict[str, int], dict[str, str]]:
    """Lemma -> summed sense-tag count, and lemma -> gloss of its most frequent sense."""
    counts: dict[str, int] = {}
    first_offset: dict[str, tuple[int, str, str]] = {}
    for pos in ("noun", "verb", "adj", "adv"):
        for line in (root / f"index.{pos}").read_text(encoding="latin-1").splitlines():
            if line.startswith(" "):
                continue
            parts = line.split()
            lemma = parts[0]
            if not _ALPHA.match(lemma):
                continue
            synset_cnt, p_cnt = int(parts[2]), int(parts[3])
            tagged = int(parts[5 + p_cnt])
            offsets = parts[6 + p_cnt : 6 + p_cnt + synset_cnt]
            counts[lemma] = counts.get(lemma, 0) + tagged
            best = first_offset.get(lemma)
            if offsets and (best is None or tagged > best[0]):
                first_offset[lemma] = (tagged, pos, offsets[0])
    glosses: dict[str, str] = {}
    data: dict[str, dict[str, str]] = {}
    for pos in ("noun", "verb", "adj", "adv"):
        table: dict[str, str] = {}
        for line in (root / f"data.{pos}").read_text(encoding="latin-1").splitlines():
            if line.startswith(" "):
                continue
            offset, _, gloss = line.partition(" | ")
            table[offset.split()[0]] = gloss
        data[pos] = table
    for lemma, (_, pos, off) in first_offset.items():
        gloss = data[pos].get(off, "")
        definition = gloss.split(";")[0].strip().strip('"').strip()
        if definition:
            glosses[lemma] = definition
    return counts, glosses


def _clue_ok(word: str, clue: str) -> bool:
    low = clue.lower()
    return 10 <= len(clue) <= 90 and word[:4] not in low and "\t" not in clue and clue.isascii()


def main(share: Path) -> None:
    big = _read_words(share / "dict" / "american-english")
    small = _read_words(share / "dict" / "american-english-small")
    counts, glosses = _wordnet(share / "wordnet")
    lemmas = set(counts)

    common = sorted(
        w for w in small & lemmas if 3 <= len(w) <= 8 and counts[w] >= 5 and len(set(w)) > 1
    )
    rare = sorted(
        w for w in (big & lemmas) - set(common) if 5 <= len(w) <= 9 and 1 <= counts[w] <= 4
    )
    valid = sorted(w for w in big | set(common) if 3 <= len(w) <= 6)

    (HERE / "words_common.txt").write_text("\n".join(common) + "\n", encoding="ascii")
    (HERE / "words_rare.txt").write_text("\n".join(rare) + "\n", encoding="ascii")
    raw = ("\n".join(valid) + "\n").encode("ascii")
    (HERE / "words_valid.txt.gz").write_bytes(gzip.compress(raw, compresslevel=9, mtime=0))

    rows = []
    for w in common:
        if 3 <= len(w) <= 8 and w in glosses and _clue_ok(w, glosses[w]):
            rows.append(f"{w}\t0\t{glosses[w]}")
    hard = [w for w in rare if w in glosses and _clue_ok(w, glosses[w])]
    rows.extend(f"{w}\t1\t{glosses[w]}" for w in hard[:: max(1, len(hard) // 1200)])
    (HERE / "crossword_clues.tsv").write_text("\n".join(rows) + "\n", encoding="ascii")
    print(f"common {len(common)}, rare {len(rare)}, valid {len(valid)}, clues {len(rows)}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("/usr/share"))
