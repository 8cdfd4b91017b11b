"""/retrieval filters exactly as Dify's built-in knowledge base would (issue #11).

Every Dify operator × field (present on some documents, absent on others, or unknown to the
index) × value form (text, list, number, numeric text, Unix seconds int/float, date text,
null, empty) runs against the real Elasticsearch, over a corpus this test indexes through the
indexer. Each row's expected answer comes from ``dify_reading``: a small, independent reading
of Dify's ``process_metadata_filter_func`` over PostgreSQL JSON — ``->>`` text for text
operators, ``as_float()`` for numbers, SQL NULL for a missing key — plus the two rules this
service adds on purpose (docs/filters.md): dates compare calendar days in RSVC_TIMEZONE for
``is`` and instants for ``before``/``after``; where Dify's query would fail on a value that is
not a number, this service answers 400 (and a document whose value is not a number simply
does not match, where Dify would fail the whole query).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest
from elasticsearch import AsyncElasticsearch

from indexer.pipeline import IndexOptions, index_source
from indexer.sources import LocalSource
from tests.support import (
    DIFY_DESIGN_OPERATORS,
    ES_URL,
    app_client,
    auth,
    make_settings,
    postcheck_drops,
)
from tests.support.corpus import TENANT, own

pytestmark = pytest.mark.anyio

KB = "dify-fidelity"
ZONE = ZoneInfo("Asia/Shanghai")  # the default RSVC_TIMEZONE

# The corpus: front matter as a Dify user would set metadata. Every document holds 通用.
DOCS: dict[str, dict[str, Any]] = {
    "d1": {"category": "巡检", "year": 2024, "code": "15", "effective": date(2026, 3, 1)},
    "d2": {"category": "设备", "year": 2025, "code": "7", "effective": date(2025, 6, 1)},
    "d3": {"category": "制度"},
    "d4": {"category": "巡检-夜班", "year": 2026, "code": "abc", "effective": date(2026, 11, 1)},
    "d5": {"year": 2025.5, "code": "7.0", "effective": date(2026, 2, 28)},
    "d6": {},
}
DATE_FIELDS = {"effective"}
FIELDS = ("category", "year", "code", "effective", "nonexistent")

MIDNIGHT = int(datetime(2026, 3, 1, tzinfo=ZONE).timestamp())  # Dify's date picker, 2026-03-01
FORMS: dict[str, Any] = {
    "text": "巡检",
    "list": ["巡检", "设备"],
    "number": 2025,
    "numeric-text": "15",
    "unix-int": MIDNIGHT,
    "unix-float": MIDNIGHT + 0.5,
    "date-text": "2026-03-01",
    "null": None,
    "empty": "",
    "empty-list": [],
}

IGNORED, BAD_VALUE, SKIP = "ignored", "bad value", "skip"
MISSING = object()


class CastError(Exception):
    """PostgreSQL could not cast a value to float."""


def as_text(value: Any) -> str:
    """``doc_metadata[name].as_string()``: the JSON value's text (``->>``)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def as_float(value: Any, field: str) -> float:
    """``as_float()``; dates (this service's addition) as instants of local midnight."""
    if field in DATE_FIELDS and isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=ZONE).timestamp()
    if isinstance(value, bool):
        raise CastError
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(str(value))
    except ValueError:
        raise CastError from None


def value_instant(value: Any, field: str) -> float:
    """A condition value as Unix seconds (dates) or a number."""
    if field in DATE_FIELDS and isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
        try:
            day = date.fromisoformat(value)
        except ValueError:
            raise CastError from None
        return datetime(day.year, day.month, day.day, tzinfo=ZONE).timestamp()
    return as_float(value, field)


def value_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, list):
        return [str(v) for v in value if v is not None]
    return [str(value)]


def dify_reading(meta: dict[str, Any], name: str, op: str, value: Any) -> Any:
    """Whether one document matches one condition: True/False, IGNORED, BAD_VALUE or SKIP."""
    op = {"=": "is", "≠": "is not", "before": "<", "after": ">"}.get(op, op)
    stored = meta.get(name, MISSING)
    is_date = name in DATE_FIELDS
    if value is None and op not in ("empty", "not empty"):
        return IGNORED
    if op == "empty":
        return stored is MISSING
    if op == "not empty":
        return stored is not MISSING
    if op in ("in", "not in"):
        if is_date:
            return SKIP  # Dify stores times as Unix numbers; this index keeps ISO text
        wanted = value_list(value)
        if not wanted:
            return op == "not in"
        if stored is MISSING:
            return False
        return (as_text(stored) in wanted) == (op == "in")
    if op in ("<", ">", "≤", "≥"):
        if isinstance(value, list):
            return BAD_VALUE
        try:
            bound = value_instant(value, name)
        except CastError:
            return BAD_VALUE  # PostgreSQL fails the query; this service answers 400
        if stored is MISSING:
            return False
        try:
            mine = as_float(stored, name)
        except CastError:
            return False  # Dify fails the whole query here; documented difference
        return {"<": mine < bound, ">": mine > bound, "≤": mine <= bound, "≥": mine >= bound}[op]
    if op in ("contains", "not contains", "start with", "end with"):
        if is_date:
            return SKIP  # the same: Dify's text of a time is a Unix number
        if stored is MISSING:
            return False
        needle, text = str(value), as_text(stored)
        return {
            "contains": needle in text,
            "not contains": needle not in text,
            "start with": text.startswith(needle),
            "end with": text.endswith(needle),
        }[op]
    assert op in ("is", "is not"), op
    if not isinstance(value, str | int | float):
        return IGNORED  # Dify's match has no case for a list
    if is_date:  # this service: the calendar day in the zone
        try:
            instant = value_instant(value, name)
        except CastError:
            return BAD_VALUE
        if stored is MISSING:
            return False
        same = datetime.fromtimestamp(instant, ZONE).date() == stored
        return same if op == "is" else not same
    if stored is MISSING:
        return False
    if isinstance(value, str):
        same = as_text(stored) == value
    else:
        try:
            same = as_float(stored, name) == value
        except CastError:
            same = False
    return same if op == "is" else not same


def expected(field: str, op: str, value: Any) -> Any:
    """The documents matching, or what the whole request should be."""
    readings = {doc: dify_reading(meta, field, op, value) for doc, meta in DOCS.items()}
    outcomes = set(readings.values())
    for special in (SKIP, BAD_VALUE, IGNORED):
        if special in outcomes:
            return special
    return {doc for doc, hit in readings.items() if hit}


@pytest.fixture(scope="module")
async def indexed(corpus: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    folder: Path = tmp_path_factory.mktemp("fidelity")
    for doc, meta in DOCS.items():
        front = "".join(
            f"{k}: {json.dumps(v, ensure_ascii=False, default=str)}\n" for k, v in meta.items()
        )
        body = f"---\n{front}---\n\n通用 测试 {doc}\n" if front else f"通用 测试 {doc}\n"
        (folder / f"{doc}.md").write_text(body, encoding="utf-8")
    es = AsyncElasticsearch(ES_URL, request_timeout=30)
    try:
        report = await index_source(
            es, LocalSource(folder), IndexOptions(knowledge_id=KB, alias=own(corpus), tenant=TENANT)
        )
        assert report.ok and report.documents_indexed == len(DOCS)
    finally:
        await es.close()
    return corpus


@pytest.fixture(scope="module")
async def client(indexed: str) -> AsyncIterator[httpx.AsyncClient]:
    async with app_client(make_settings(indexed)) as c:
        yield c
        assert postcheck_drops(c) == 0


async def ask(
    client: httpx.AsyncClient, conditions: list[dict[str, Any]], logic: Any = "and"
) -> Any:
    body: dict[str, Any] = {
        "knowledge_id": KB,
        "query": "通用",
        "retrieval_setting": {"top_k": 20, "score_threshold": 0},
        "metadata_condition": {"logical_operator": logic, "conditions": conditions},
    }
    resp = await client.post("/retrieval", json=body, headers=auth("anon"))
    if resp.status_code == 400:
        return resp.json()
    assert resp.status_code == 200, resp.text
    return {Path(r["metadata"]["document_name"]).stem for r in resp.json()["records"]}


ALL = set(DOCS)


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("op", DIFY_DESIGN_OPERATORS)
async def test_operator_field_and_value_forms(
    client: httpx.AsyncClient, op: str, field: str
) -> None:
    mismatches = []
    rows = 0
    for form, value in FORMS.items():
        want = expected(field, op, value)
        if want == SKIP:
            continue
        rows += 1
        got = await ask(client, [{"name": field, "comparison_operator": op, "value": value}])
        if want == BAD_VALUE:
            ok = isinstance(got, dict) and got.get("path", "").startswith(
                "metadata_condition.conditions[0]"
            )
        elif want == IGNORED:
            ok = got == ALL  # the condition is ignored: every document, as Dify
        else:
            ok = got == want
        if not ok:
            mismatches.append((form, value, want, got))
    assert rows > 0
    assert not mismatches, mismatches


async def test_or_joins_and_a_null_logical_operator_is_or(client: httpx.AsyncClient) -> None:
    conditions = [
        {"name": "category", "comparison_operator": "is", "value": "制度"},
        {"name": "year", "comparison_operator": ">", "value": 2025},
    ]
    assert await ask(client, conditions, "and") == set()
    assert await ask(client, conditions, "or") == {"d3", "d4", "d5"}
    assert await ask(client, conditions, None) == {"d3", "d4", "d5"}  # Dify: `else or_`


async def test_errors_name_the_condition_the_caller_sent(client: httpx.AsyncClient) -> None:
    conditions = [
        {"name": "category", "comparison_operator": "is", "value": "巡检"},
        {"name": "year", "comparison_operator": "is", "value": None},  # ignored: no path shift
        {"name": "year", "comparison_operator": ">", "value": "not a number"},
    ]
    got = await ask(client, conditions)
    assert got["path"] == "metadata_condition.conditions[2].value", got


@pytest.mark.parametrize("op", ["is not", "≠", "not contains", "not in", "empty", "not empty", ">"])
@pytest.mark.parametrize("name", ["user_roles", "access_roles", "user_id", "principal_token"])
async def test_identity_names_refuse_every_operator_that_is_not_a_claim(
    client: httpx.AsyncClient, name: str, op: str
) -> None:
    got = await ask(client, [{"name": name, "comparison_operator": op, "value": "物业经理"}])
    assert got["error_code"] == 3001
    assert got["path"] == "metadata_condition.conditions[0].comparison_operator"


def test_the_reading_covers_dates_as_the_issue_says() -> None:
    # Dify's picker sends local midnight of 2026-03-01 (2026-02-28T16:00Z): d1's day.
    assert expected("effective", "is", MIDNIGHT) == {"d1"}
    assert expected("effective", "is", "2026-03-01") == {"d1"}
    assert expected("effective", "after", MIDNIGHT) == {"d4"}  # instants: 03-01 is not after
    assert expected("effective", "before", MIDNIGHT) == {"d2", "d5"}
    assert MIDNIGHT == int(
        (datetime(2026, 2, 28, 16) - datetime(1970, 1, 1)) / timedelta(seconds=1)
    )
