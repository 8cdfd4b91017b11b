"""kNN recall that survives a merge (issue #25 §0): a clustered corpus with real vectors from
the bundled model, written in several runs and merged to one segment as an index is after
some use; the service's vector search must find ≥ 95% of the exact (numpy) top 10 over the
knowledge base its filter selects, with other knowledge bases' vectors mixed in.

The corpus: CMRC 2018's 3,219 questions (tight clusters: about four questions ask about each
paragraph) as one knowledge base, and the first 100 characters of its 848 paragraphs as the
other, which the searches filter on. Before ``RSVC_KNN_OVERSAMPLE``, int8 quantization made
the neighbours of a cluster ties: recall@10 was 0.945–0.962 here (0.93 on other samples of
this corpus), whatever ``num_candidates``; with it, 1.0. The issue's target is 0.95; this
corpus is gentler than the issue's (0.72 there), so the test asks for 0.98, which
quantization without rescoring does not reach here.

Selective permissions (issue #25 §2, at this small scale): a third knowledge base holds the
paragraph heads again, each restricted to roles (``sel10``: every other one, ``sel1``: one in
twenty, else a role nobody here holds), so a principal holding one of them sees about 9% or
1% of the index through the filter. The ACL sits inside ``knn.filter``; the answers must be
the exact top 10 over what that principal may see, and nothing else.

Deletes (issue #25 §0, "every index state"): a fourth knowledge base holds the heads once
more, and a third of it is deleted after the merge, so the one segment's graph still holds
them, marked deleted, as an index holds them until its next merge.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import numpy as np
import pytest
from elasticsearch import AsyncElasticsearch
from elasticsearch.helpers import async_bulk

from retrieval_svc.embedding import embedder_config, make_embedder
from retrieval_svc.key_entry import IdentityMode
from retrieval_svc.search.index import ensure_index
from retrieval_svc.settings import IndexSettings
from retrieval_svc.tenancy import tenant_alias
from tests.support import (
    CMRC,
    ES_URL,
    app_client,
    auth,
    key_entry,
    make_settings,
    postcheck_drops,
)
from tests.support.corpus import TENANT

pytestmark = pytest.mark.anyio
QUERIES = 60


@pytest.fixture(scope="module")
def cmrc() -> dict[str, Any]:
    if not CMRC.is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(f"no CMRC 2018 data at {CMRC}: CI must run the recall test")
        pytest.skip(f"no CMRC 2018 data at {CMRC} (set RSVC_EVAL_CMRC)")
    data: dict[str, Any] = json.loads(CMRC.read_text("utf-8"))
    return data


@pytest.fixture(scope="module")
async def merged(cmrc: dict[str, Any]) -> AsyncIterator[tuple[str, np.ndarray, list[str]]]:
    """A merged index of the two knowledge bases; the alias, the passages' vectors, and the
    questions to ask."""
    questions = [q["question"] for a in cmrc["data"] for p in a["paragraphs"] for q in p["qas"]]
    heads = [p["context"][:100] for a in cmrc["data"] for p in a["paragraphs"]]
    alias = f"rsvc-test-recall-{uuid.uuid4().hex[:8]}"
    es = AsyncElasticsearch(ES_URL, request_timeout=600)
    async with httpx.AsyncClient() as http:
        embedder = make_embedder(embedder_config(IndexSettings(embedder="local")), http)
        assert embedder is not None
        try:
            model = await embedder.describe()
            asked = await embedder.embed_passages(questions)
            passages = await embedder.embed_passages(heads)
        finally:
            await embedder.aclose()
    await ensure_index(es, alias, model, tenant=TENANT)
    own = tenant_alias(alias, TENANT)
    docs = [("asked", i, t, v) for i, (t, v) in enumerate(zip(questions, asked, strict=True))]
    docs += [("passages", i, t, v) for i, (t, v) in enumerate(zip(heads, passages, strict=True))]
    docs += [("restricted", i, t, v) for i, (t, v) in enumerate(zip(heads, passages, strict=True))]
    docs += [("deleted", i, t, v) for i, (t, v) in enumerate(zip(heads, passages, strict=True))]
    try:
        for run in range(4):  # written in several runs, as an index is used
            actions = [
                {
                    "_index": own,
                    "_id": f"{kb}-{i}",
                    "_source": {
                        "chunk_id": f"{kb}-{i}",
                        "document_id": f"{kb}-{i}",
                        "tenant": TENANT,
                        "knowledge_id": kb,
                        "content": text,
                        "embedding": vector,
                        **({"access_roles": restricted_roles(i)} if kb == "restricted" else {}),
                    },
                }
                for kb, i, text, vector in docs[run::4]
            ]
            await async_bulk(es, actions, chunk_size=100, max_chunk_bytes=512 * 1024)
            await es.indices.refresh(index=own)
        await es.indices.forcemerge(index=own, max_num_segments=1)
        await es.indices.refresh(index=own)
        # Then a third of one knowledge base deleted: the merged graph keeps them, marked.
        gone = [
            {"_op_type": "delete", "_index": own, "_id": f"deleted-{i}"}
            for i in range(len(heads))
            if deleted(i)
        ]
        await async_bulk(es, gone, refresh=True)
        segments = await es.indices.segments(index=own)
        shards = next(iter(segments["indices"].values()))["shards"].values()
        kept = [seg for shard in shards for copy in shard for seg in copy["segments"].values()]
        kept = [seg for seg in kept if seg["num_docs"]]  # a delete's tombstones hold no chunk
        assert len(kept) == 1 and kept[0]["deleted_docs"] == len(gone), kept
        rng = np.random.default_rng(25)
        picked = [questions[i] for i in rng.choice(len(questions), QUERIES, replace=False)]
        yield alias, np.asarray(passages, dtype=np.float32), picked
    finally:
        await es.options(ignore_status=404).indices.delete(index=f"{alias}.*,{alias}-runs.*")
        await es.options(ignore_status=404).indices.delete_index_template(name=f"{alias}-template")
        await es.close()


def deleted(i: int) -> bool:
    """Whether the ``deleted`` knowledge base's ``i``-th chunk is deleted after the merge."""
    return i % 3 == 0


def restricted_roles(i: int) -> list[str]:
    """The roles of the ``restricted`` knowledge base's ``i``-th chunk."""
    if i % 20 == 0:
        return ["sel1", "sel10"]
    return ["sel10"] if i % 2 == 0 else ["nobody-here"]


async def recall(
    alias: str,
    passages: np.ndarray,
    questions: list[str],
    knowledge_id: str = "passages",
    visible: list[int] | None = None,
    **settings: Any,
) -> float:
    """The service's mean recall@10 of vector search in ``knowledge_id`` against numpy's exact
    top 10 over the ``visible`` passages (all by default); a hit outside them fails."""
    rows = np.asarray(visible if visible is not None else range(len(passages)))
    unit = passages[rows] / np.linalg.norm(passages[rows], axis=1, keepdims=True)
    async with httpx.AsyncClient() as http:
        embedder = make_embedder(embedder_config(IndexSettings(embedder="local")), http)
        assert embedder is not None
        vectors = np.asarray(await embedder.embed_queries(questions), dtype=np.float32)
        await embedder.aclose()
    found = []
    async with app_client(make_settings(alias, embedder="local", **settings)) as c:
        for question, vector in zip(questions, vectors, strict=True):
            exact = rows[np.argsort(-(unit @ (vector / np.linalg.norm(vector))))[:10]]
            body = {"query": question, "knowledge_ids": [knowledge_id], "mode": "vector"}
            body["top_k"] = 10
            resp = await c.post("/v1/search", json=body, headers=auth("anon"))
            assert resp.status_code == 200, resp.text
            got = {m["chunk_id"] for m in resp.json()["chunk_metadata"]}
            assert got <= {f"{knowledge_id}-{i}" for i in rows}, "a chunk it may not see"
            found.append(len(got & {f"{knowledge_id}-{i}" for i in exact}) / 10)
        assert postcheck_drops(c) == 0
    return float(np.mean(found))


async def test_knn_recall_against_exact_search_after_a_merge(
    merged: tuple[str, np.ndarray, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    alias, passages, questions = merged
    measured = await recall(alias, passages, questions)
    with capsys.disabled():
        print(f"\nrecall@10 after a merge, {len(questions)} questions: {measured:.3f}")
    assert measured >= 0.98


@pytest.mark.parametrize("role", ["sel1", "sel10"])
async def test_knn_recall_under_a_selective_acl(
    merged: tuple[str, np.ndarray, list[str]], role: str, capsys: pytest.CaptureFixture[str]
) -> None:
    alias, passages, questions = merged
    visible = [i for i in range(len(passages)) if role in restricted_roles(i)]
    keys = [key_entry("anon", tenant=TENANT, mode=IdentityMode.FIXED, roles=(role,))]
    measured = await recall(alias, passages, questions, "restricted", visible, api_keys=keys)
    with capsys.disabled():
        print(f"\nrecall@10 with {role} ({len(visible)} chunks visible): {measured:.3f}")
    assert measured >= 0.98


async def test_knn_recall_with_deleted_chunks_in_the_merged_graph(
    merged: tuple[str, np.ndarray, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    """Deleted chunks stay in the graph until the next merge; the search must step over them
    and still find the exact top 10 of what is left."""
    alias, passages, questions = merged
    left = [i for i in range(len(passages)) if not deleted(i)]
    measured = await recall(alias, passages, questions, "deleted", left)
    with capsys.disabled():
        print(f"\nrecall@10 with a third deleted ({len(left)} chunks left): {measured:.3f}")
    assert measured >= 0.98
