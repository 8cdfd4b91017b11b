"""The visible-field catalog honours ``access_also`` and ``access_denied`` (a share's DACL
narrowed by a rules file, a DACL's deny entries) as the search does: a field only a chunk the
caller cannot see has answers exactly as a field that exists nowhere (design.md §4), and one a
chunk the caller can see has is filterable."""

from __future__ import annotations

from typing import Any

import pytest
from elasticsearch import Elasticsearch

from retrieval_svc.app import create_app
from retrieval_svc.auth.keys import IdentityMode
from tests.support import app_client, auth, key_entry, make_settings
from tests.support.corpus import TENANT, store_chunks

pytestmark = pytest.mark.anyio

KB = "catalog-guarded-kb"
DOCS = {
    "cg-public": {"content": "合同 台账", "metadata": {"area": "总部"}},
    "cg-denied": {
        "content": "合同 薪级",
        "access_roles": ["cg-staff"],
        "access_denied": ["cg-intern"],
        "metadata": {"salary_band": "P7"},
    },
    "cg-also": {
        "content": "合同 案号",
        "access_roles": ["cg-staff"],
        "access_also": ["cg-legal"],
        "metadata": {"case_no": "2026-17"},
    },
    "cg-both": {
        "content": "合同 并购",
        "access_roles": ["cg-staff"],
        "access_also": ["cg-legal"],
        "access_denied": ["cg-intern", "cg-temp"],
        "metadata": {"merger_code": "M-1"},
    },
}
NOWHERE = "no_such_field"


@pytest.fixture(scope="module")
def guarded_kb(corpus: str, es_sync: Elasticsearch) -> str:
    store_chunks(es_sync, corpus, KB, DOCS)
    return corpus


def _shape(resp: Any, field: str) -> tuple[int, str]:
    text = resp.json().get("error_msg", "") if resp.status_code != 200 else ""
    return resp.status_code, text.replace(field, "X")


@pytest.mark.parametrize(
    ("roles", "field", "seen"),
    [
        (["cg-staff", "cg-intern"], "salary_band", None),  # denied
        (["cg-staff"], "salary_band", "cg-denied"),
        (["cg-staff"], "case_no", None),  # access_also not met
        (["cg-staff", "cg-legal"], "case_no", "cg-also"),
        (["cg-legal"], "case_no", None),  # access_roles not met
        (["cg-staff", "cg-legal", "cg-temp"], "merger_code", None),  # one deny of two
        (["cg-staff", "cg-legal"], "merger_code", "cg-both"),
    ],
)
async def test_guarded_fields_answer_as_their_chunks(
    guarded_kb: str, roles: list[str], field: str, seen: str | None
) -> None:
    trusted = key_entry("anon", tenant=TENANT, mode=IdentityMode.TRUSTED)
    app = create_app(make_settings(guarded_kb, api_keys=[trusted]))
    async with app_client(app) as c:

        async def search(name: str) -> Any:
            body = {"query": "合同", "knowledge_ids": [KB], "principal": {"roles": roles},
                    "filter": {"field": name, "op": "exists"}}  # fmt: skip
            return await c.post("/v1/search", json=body, headers=auth("anon"))

        asked, nowhere = await search(field), await search(NOWHERE)
    if seen is None:
        assert _shape(asked, field) == _shape(nowhere, NOWHERE)
        assert asked.status_code == 400
    else:
        assert asked.status_code == 200, asked.text
        assert {h["chunk_id"] for h in asked.json()["chunk_metadata"]} == {seen}
