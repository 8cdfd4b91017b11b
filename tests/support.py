"""Helpers shared by tests: the cluster URL, test keys, settings and an in-process client."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from asgi_lifespan import LifespanManager

from retrieval_svc.app import create_app
from retrieval_svc.auth.keys import ApiKeyConfig, IdentityMode, hash_key
from retrieval_svc.settings import Settings

# Read once at import, before the autouse fixture clears RSVC_* variables.
ES_URL = os.environ.get("RSVC_ES_URL", "http://127.0.0.1:9200")
SAMPLES = Path(__file__).resolve().parents[1] / "samples" / "building-ops"

# The fields of a chunk in the customer's code-node output (seed appendix A).
SEED_FIELDS = frozenset(
    {
        "id",
        "content",
        "source_type",
        "document_title",
        "url",
        "score",
        "display_subtitle",
        "document_name",
        "dataset_name",
        "site_name",
        "site_host",
        "source_file_url",
        "segment_position",
        "published_date",
    }
)

# Dify's comparison operators, as DESIGN §7 lists them.
DIFY_DESIGN_OPERATORS = (
    "contains",
    "not contains",
    "start with",
    "end with",
    "is",
    "is not",
    "in",
    "not in",
    "empty",
    "not empty",
    "=",
    "≠",
    ">",
    "<",
    "≥",
    "≤",
    "before",
    "after",
)

# Secrets of the test API keys; the service only ever sees their hashes.
KEYS = {
    "anon": "test-key-anonymous-0123456789",
    "ops": "test-key-fixed-ops-0123456789",
    "scoped": "test-key-scoped-0123456789",
}


def key_entry(name: str, **kwargs: Any) -> ApiKeyConfig:
    """A configured key for one of ``KEYS``."""
    return ApiKeyConfig(name=name, sha256=hash_key(KEYS[name]), **kwargs)


def make_settings(alias: str, **overrides: Any) -> Settings:
    """Settings for the app under test."""
    values: dict[str, Any] = {
        "es_url": ES_URL,
        "index_alias": alias,
        "api_keys": [
            key_entry("anon", tenant="acme"),
            key_entry("ops", tenant="acme", mode=IdentityMode.FIXED, roles=("运维工程师",)),
            key_entry("scoped", tenant="acme", knowledge_ids=("other-*",)),
        ],
    }
    values.update(overrides)
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


def auth(name: str) -> dict[str, str]:
    """The Authorization header for one of ``KEYS``."""
    return {"Authorization": f"Bearer {KEYS[name]}"}


@asynccontextmanager
async def app_client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client driving the app in-process, with its lifespan run."""
    app = create_app(settings)
    async with LifespanManager(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://svc") as client:
            yield client


def postcheck_drops(client: httpx.AsyncClient) -> float:
    """How many hits the app's ACL post-check dropped (a leak in the Elasticsearch query)."""
    transport = client._transport
    assert isinstance(transport, httpx.ASGITransport)
    registry = transport.app.state.rsvc.metrics.registry  # type: ignore[attr-defined]
    value = registry.get_sample_value("rsvc_acl_postcheck_drops_total")
    return float(value or 0.0)
