"""The hybrid benchmark's index (issue #25): the corpus at one size with its vectors, built
by a bare bulk into the service's own template, merged or thinned by deletes as an index ends
up after use, and what it takes on disk and in memory.
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from elasticsearch import AsyncElasticsearch
from elasticsearch.exceptions import GeneralAvailabilityWarning
from elasticsearch.helpers import async_streaming_bulk

from bench.harness import CACHE
from bench.hybrid.corpus import Layout, chunks, decorate
from bench.query import corpus, vectors
from bench.query.common import fresh_alias, own
from retrieval_svc.embedding.base import EmbeddingModel
from retrieval_svc.embedding.local import LOCAL_MODEL_ID
from retrieval_svc.words import say


class Corpus:
    """The benchmark's chunks at one size: vectors, layout, and chunk id → row."""

    def __init__(self, total: int, sample: np.ndarray, *, check_generated: bool = False) -> None:
        real = len(sample)
        self.total = total
        self.folder = corpus.write_corpus(CACHE, total)
        if check_generated:  # the same size, generated from a tenth of the sample
            self.vectors = vectors.generate(sample[: max(1, real // 10)], total, seed=total)
        else:
            self.vectors = vectors.generate(sample, total, seed=total)
        self.layout = Layout.of(total)
        self.rows: dict[str, int] = {}
        self.deleted = np.empty(0, dtype=np.int64)  # rows deleted after the build

    def actions(self, index: str) -> Any:
        for row, chunk in enumerate(chunks(self.folder, self.total)):
            decorate(chunk, row, self.layout, self.vectors[row])
            self.rows[chunk["chunk_id"]] = row
            yield {"_index": index, "_id": chunk["chunk_id"], "_source": chunk}

    def ids_file(self, tag: str) -> Path:
        return CACHE / "vectors" / f"rows-{tag}-{self.total}.txt"


def hybrid_texts(real: int) -> list[str]:
    """The contents of the first ``real`` chunks (the same in every corpus size)."""
    from bench.hybrid.corpus import texts

    return texts(corpus.write_corpus(CACHE, max(real, 10)), real)


async def build(
    es: AsyncElasticsearch, alias: str, data: Corpus, index_type: str, *, reuse: bool, tag: str
) -> dict[str, Any]:
    """Bulk the corpus into a fresh index (or reuse a kept one); indexing figures."""
    index = own(alias)
    if reuse and await es.indices.exists_alias(name=index) and data.ids_file(tag).exists():
        count = (await es.count(index=index))["count"]
        if count == data.total:
            names = data.ids_file(tag).read_text("utf-8").split()
            data.rows = {name: row for row, name in enumerate(names)}
            print(say("bench_reusing", index=index, count=f"{count:,}"), file=sys.stderr)
            built = data.ids_file(tag).with_suffix(".json")  # the run that built it
            return {
                **(json.loads(built.read_text("utf-8")) if built.exists() else {}),
                "reused": True,
            }
    model = EmbeddingModel(model=LOCAL_MODEL_ID, dims=int(data.vectors.shape[1]))
    await fresh_alias(es, alias, embedding=model, vector_index_type=index_type)
    started, done = time.perf_counter(), 0
    async for ok, item in async_streaming_bulk(
        es,
        data.actions(index),
        chunk_size=500,
        max_chunk_bytes=20 * 1024 * 1024,
        max_retries=8,
        retry_on_status=(429,),
        raise_on_error=False,
    ):
        assert ok, item
        done += 1
        if done % 50_000 == 0:
            rate = done / (time.perf_counter() - started)
            said = say(
                "bench_indexed", done=f"{done:,}", total=f"{data.total:,}", rate=f"{rate:.0f}"
            )
            print(said, file=sys.stderr)
    await es.indices.refresh(index=index)
    bulk_s = time.perf_counter() - started
    names = sorted(data.rows, key=data.rows.__getitem__)
    data.ids_file(tag).write_text("\n".join(names), "utf-8")
    figures = {
        "chunks": done,
        "seconds": round(bulk_s, 1),
        "chunks_per_s": round(done / bulk_s),
        "index_type": index_type,
    }
    data.ids_file(tag).with_suffix(".json").write_text(json.dumps(figures), "utf-8")
    return figures


async def merge(es: AsyncElasticsearch, alias: str) -> float:
    """Force-merge the index to one segment, as an old index ends up; seconds taken."""
    started = time.perf_counter()
    await es.options(request_timeout=7200).indices.forcemerge(index=own(alias), max_num_segments=1)
    await es.indices.refresh(index=own(alias))
    return round(time.perf_counter() - started, 1)


async def delete(es: AsyncElasticsearch, alias: str, data: Corpus, share: float) -> int:
    """Delete a seeded ``share`` of the chunks, as an index is used: until the next merge the
    graph keeps them, marked deleted, and a search must step over them. How many."""
    data.deleted = data.layout.deletions(share)
    names = sorted(data.rows, key=data.rows.__getitem__)
    actions = ({"_op_type": "delete", "_index": own(alias), "_id": names[r]} for r in data.deleted)
    async for ok, item in async_streaming_bulk(es, actions, chunk_size=1000, raise_on_error=False):
        assert ok, item
    await es.indices.refresh(index=own(alias))
    return len(data.deleted)


async def footprint(es: AsyncElasticsearch, alias: str) -> dict[str, Any]:
    """Index size on disk, what its vector structures and stored fields (``_source``, the
    vectors' text among it) take, segments; Elasticsearch's heap and resident
    memory (what is not heap is off-heap: the vector files it maps, and the JVM's own)."""
    stats = await es.indices.stats(index=own(alias), metric="store,segments")
    total = stats["_all"]["primaries"]
    with warnings.catch_warnings():  # (the client's English that the API is a preview: known)
        warnings.simplefilter("ignore", GeneralAvailabilityWarning)
        usage = await es.options(request_timeout=3600).indices.disk_usage(
            index=own(alias), run_expensive_tasks=True
        )
    fields = next(v for k, v in usage.items() if k != "_shards")["all_fields"]
    nodes = await es.nodes.stats(metric="jvm,process")
    node = next(iter(nodes["nodes"].values()))
    info = await es.nodes.info(metric="process")
    pid = next(iter(info["nodes"].values()))["process"]["id"]
    rss = resident_mb(int(pid))
    heap = node["jvm"]["mem"]
    return {
        "store_mb": round(total["store"]["size_in_bytes"] / 2**20, 1),
        "segments": total["segments"]["count"],
        "vectors_mb": round(fields["knn_vectors_in_bytes"] / 2**20, 1),
        "stored_fields_mb": round(fields["stored_fields_in_bytes"] / 2**20, 1),
        "heap_used_mb": round(heap["heap_used_in_bytes"] / 2**20),
        "heap_max_mb": round(heap["heap_max_in_bytes"] / 2**20),
        "es_rss_mb": rss,
        "off_heap_mb": round(rss - heap["heap_committed_in_bytes"] / 2**20) if rss else None,
    }


def resident_mb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024)
    except OSError:
        return None
    return None
