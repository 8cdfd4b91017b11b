"""What Elasticsearch's failures mean for a caller (issue #24 items 5 and 6): overload is a 503
with Retry-After, never a 500; a value the index cannot take is a 400."""

from __future__ import annotations

from typing import Any

import pytest

from retrieval_svc.errors import QueryRefused, SearchUnavailable
from retrieval_svc.search.failures import refusal

BREAKER = {
    "type": "search_phase_execution_exception",
    "reason": "all shards failed",
    "failed_shards": [
        {"reason": {"type": "circuit_breaking_exception",
                    "reason": "[parent] Data too large, data for [wildcard:chunk_id]"}}
    ],
}  # fmt: skip


@pytest.mark.parametrize(
    ("status", "error", "kind", "retry"),
    [
        pytest.param(429, {"type": "es_rejected_execution_exception"}, SearchUnavailable, True,
                     id="429"),
        pytest.param(500, BREAKER, SearchUnavailable, True, id="circuit-breaker-in-a-shard"),
        pytest.param(503, {"type": "circuit_breaking_exception"}, SearchUnavailable, True,
                     id="circuit-breaker"),
        pytest.param(500, {"type": "exception"}, SearchUnavailable, False, id="cluster-failure"),
        pytest.param(401, {"type": "security_exception"}, SearchUnavailable, False,
                     id="credentials"),
        pytest.param(400, {"type": "query_shard_exception", "reason": "out of range"},
                     QueryRefused, False, id="a-value-it-cannot-take"),
    ],
)  # fmt: skip
def test_failures_are_what_they_mean(
    status: int, error: dict[str, Any], kind: type, retry: bool
) -> None:
    found = refusal(status, error)
    assert isinstance(found, kind) and found.status_code != 500
    assert (found.headers is not None and "Retry-After" in found.headers) is retry
