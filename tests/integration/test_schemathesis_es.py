"""Schemathesis against the service's own OpenAPI, over a real uvicorn on loopback:
whatever it sends, no 5xx, and every 4xx in the documented error shape (issue #8)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from retrieval_svc.app import create_app
from tests.support import auth, make_settings
from tests.support.fake_provider import ServerThread


@pytest.fixture(scope="module")
def service_url(corpus: str) -> Iterator[str]:
    # Module scope: the per-test env cleaning does not apply, so build Settings explicitly.
    with ServerThread(create_app(make_settings(corpus)), lifespan="on") as server:
        yield f"http://127.0.0.1:{server.port}"


@pytest.fixture(scope="module")
def api_schema(service_url: str) -> Any:
    return schemathesis.openapi.from_url(f"{service_url}/openapi.json")


def check(response: Any, where: str) -> None:
    assert response.status_code < 500, (where, response.text)
    if response.status_code >= 400:
        body = response.json()
        assert isinstance(body.get("error_code"), int), (where, response.text)
        assert isinstance(body.get("error_msg"), str) and body["error_msg"], (where, response.text)


def test_no_server_errors_and_documented_error_shape(api_schema: Any) -> None:
    # schemathesis's pytest plugin does not run on pytest 9; its Hypothesis strategies do.
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 10
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=25,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
        )
        def run(case: Any) -> None:
            where = f"{case.method} {case.path} {case.body!r:.300}"
            check(case.call(headers=auth("anon")), where)
            check(case.call(), where + " (no key)")

        run()
