"""The hybrid benchmark's corpus: the cost benchmark's chunks, spread over knowledge bases, with
roles that make known shares of them visible, and a vector each (pure but for reading files).

Every chunk is the indexer's own chunk of ``bench.query.corpus``'s Markdown
(``load_document``), then:

* ``knowledge_id``: one of 20 knowledge bases, uniformly (one of them is 5% of the corpus);
* ``access_roles``: its own roles, or ``全员`` where the corpus made it public (the mixed
  queries' principals all hold ``全员``, so they see what they saw in the BM25 benchmark); plus
  ``全部`` on every chunk, and the selectivity roles: ``sel50`` on a seeded random half,
  ``sel10`` on a tenth of those … ``sel0_1`` on 0.1% (nested, so ``sel1`` ⊂ ``sel10``);
* ``embedding``: ``bench.query.vectors``' vector of the same row.

A principal holding only ``sel1`` sees 1% of the tenant's chunks; only ``全部``, all of them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.query import corpus
from indexer.pipeline import IndexOptions, load_document
from indexer.sources import LocalSource

KNOWLEDGE_BASES = [f"kb-{i:02d}" for i in range(20)]
EVERYONE = "全员"
ALL = "全部"
#: Selectivity role → the share of the chunks that carry it.
SELECTIVITY = {ALL: 1.0, "sel50": 0.5, "sel10": 0.1, "sel1": 0.01, "sel0_1": 0.001}


@dataclass(frozen=True)
class Layout:
    """Per chunk row: its knowledge base (index into ``KNOWLEDGE_BASES``) and the uniform draw
    that decides its selectivity roles."""

    kb: np.ndarray
    draw: np.ndarray

    @classmethod
    def of(cls, total: int, seed: int = 25) -> Layout:
        rng = np.random.default_rng(seed)
        kb = rng.integers(0, len(KNOWLEDGE_BASES), total).astype(np.int16)
        return cls(kb=kb, draw=rng.random(total))

    def roles(self, row: int) -> list[str]:
        """The selectivity roles of chunk ``row``."""
        u = float(self.draw[row])
        return [role for role, share in SELECTIVITY.items() if u < share]

    def deletions(self, share: float, seed: int = 26) -> np.ndarray:
        """A seeded ``share`` of the rows, to delete after the index is built (sorted)."""
        if share <= 0:
            return np.empty(0, dtype=np.int64)
        rng = np.random.default_rng(seed)
        return np.sort(rng.choice(len(self.kb), round(share * len(self.kb)), replace=False))

    def visible(
        self, role: str, knowledge_bases: list[str] | None = None, deleted: np.ndarray | None = None
    ) -> np.ndarray:
        """Rows a principal holding only ``role`` sees in ``knowledge_bases`` (all when None),
        but for the ``deleted`` rows."""
        mask = self.draw < SELECTIVITY[role]
        if deleted is not None:
            mask[deleted] = False
        if knowledge_bases is not None:
            wanted = [KNOWLEDGE_BASES.index(k) for k in knowledge_bases]
            mask &= np.isin(self.kb, wanted)
        return np.flatnonzero(mask)


def chunks(folder: Path, total: int) -> Iterator[dict[str, Any]]:
    """The first ``total`` chunks of the Markdown corpus in ``folder``, in a fixed order."""
    source = LocalSource(folder)
    options = IndexOptions(knowledge_id=KNOWLEDGE_BASES[0], alias="unused", tenant=corpus.TENANT)
    count = 0
    for ref in sorted(source.list(), key=lambda r: r.key):
        for chunk in load_document(source, ref, options):
            yield chunk
            count += 1
            if count == total:
                return


def decorate(chunk: dict[str, Any], row: int, layout: Layout, vector: np.ndarray) -> None:
    """Give ``chunk`` (row ``row``) its knowledge base, roles and vector, in place."""
    kb = KNOWLEDGE_BASES[int(layout.kb[row])]
    chunk["knowledge_id"] = chunk["dataset_name"] = kb
    own = chunk.get("access_roles") or [EVERYONE]
    chunk["access_roles"] = sorted({*own, *layout.roles(row)})
    chunk["embedding"] = vector.tolist()


def texts(folder: Path, total: int) -> list[str]:
    """The contents of the first ``total`` chunks: what the real vectors embed."""
    return [c["content"] for c in chunks(folder, total)]
