"""A source's lease record written by someone else (anyone who can write the runs index, or a
host whose clock runs far ahead) against the real Elasticsearch: no such record stops a
writer with an error, holds a source for ever, or stops ``show`` from naming who holds it."""

from __future__ import annotations

import time
from typing import Any

import pytest
from elasticsearch import AsyncElasticsearch

from indexer.lease import Lease, lease_id
from retrieval_svc.search.runs import lease_holders

pytestmark = pytest.mark.anyio

FAR = 10.0**9  # (some thirty years ahead)


def _intruder(**more: Any) -> dict[str, Any]:
    return {"token": "forged", "name": "intruder", "role": "watch", "host": "elsewhere",
            "boot": "b", "pid": 1, "started": 1, "since": 1.0, **more}  # fmt: skip


FORGED = {
    "far-ahead": {"slots": {"*": _intruder(expires_at=time.time() + FAR)}},
    "far-ahead-want": {
        "slots": {},
        "wanted": {"forged": {"slot": "*", "until": time.time() + FAR, "role": "index"}},
    },
    "not-a-time": {"slots": {"*": _intruder(expires_at="soon")}},
    "not-a-slot": {"slots": {"x": _intruder(expires_at=time.time() + 30)}},
    "slots-a-list": {"slots": [_intruder(expires_at=time.time() + 30)], "wanted": ["x"]},
    "not-a-calendar": {"slots": {"*": _intruder(expires_at=1e300, since=1e300)}},
}


@pytest.mark.parametrize("forged", sorted(FORGED))
async def test_a_forged_lease_record_neither_stops_a_writer_nor_holds_the_source(
    es: AsyncElasticsearch, alias: str, forged: str
) -> None:
    runs = f"{alias}-runs.lease-forged"
    record = {"kind": "lease", "knowledge_id": "kb", "source": "/srv/share", **FORGED[forged]}
    watcher = Lease(es, runs, "kb", "/srv/share", ttl_s=3.0, name="w")
    await watcher.acquire(wait_s=0)  # (the runs index made)
    await watcher.release()
    await es.index(index=runs, id=lease_id("kb", "/srv/share"), document=record, refresh=True)
    assert lease_holders(record) == []  # (main: raised — show, the console)
    assert await watcher.acquire(wait_s=10)  # (main: waited for ever, or raised)
    await watcher.renew()
    await watcher.check()
    await watcher.release()


def test_a_holder_since_a_time_no_calendar_holds_is_shown_without_it() -> None:
    record = {"source": "/srv/share", "slots": {"*": _intruder(expires_at=time.time() + 30,
                                                               since=1e300)}}  # fmt: skip
    (row,) = lease_holders(record)
    assert row["name"] == "intruder" and row["since"] is None and row["expires_at"]
