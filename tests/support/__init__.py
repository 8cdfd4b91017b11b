"""Helpers shared by tests: the cluster URL, test keys, settings and an in-process client."""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import jwt
from asgi_lifespan import LifespanManager
from fastapi import FastAPI

from retrieval_svc.app import create_app
from retrieval_svc.auth.keys import ApiKeyConfig, IdentityMode, hash_key
from retrieval_svc.settings import Settings

# Read once at import, before the autouse fixture clears RSVC_* variables. Unset, a closed port
# (the ES fixtures then fail saying how to start one), never the product's default 9200: on a
# shared machine another team's Elasticsearch answers there (tests/support/others_cluster.py).
ES_URL = os.environ.get("RSVC_ES_URL") or "http://127.0.0.1:9"
# Where scripts/test keeps the servers it stops on any exit (read here, before a test's clean
# environment hides it: a server started from inside a test still lands there).
SERVERS_DIR = os.environ.get("RSVC_SERVERS_DIR", "")
SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "building-ops"
# Public Chinese evaluation data beside the checkout (never in it); scripts/test reads the same.
CMRC = Path(
    os.environ.get("RSVC_EVAL_CMRC")
    or Path(__file__).resolve().parents[3] / "shared" / "eval" / "cmrc2018" / "cmrc2018_dev.json"
)

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

# Dify's comparison operators, as design.md §7 lists them.
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
# The suite's S3 server (moto) takes any credentials; these are the ones the tests sign with.
S3_KEY_ID, S3_SECRET = "test-access-key-id", "test-secret-access-key"

KEYS = {
    "anon": "test-key-anonymous-0123456789",
    "ops": "test-key-fixed-ops-0123456789",
    "scoped": "test-key-scoped-0123456789",
}


# An expiry before any clock this suite will run on: an expired token is expired on purpose,
# whatever the time and however long the suite has run.
EXPIRED_AT = 946_684_800  # 2000-01-01T00:00:00Z


@dataclass(frozen=True)
class Token:
    """A principal token that is minted when a test uses it, never when it is declared.

    Test parameters and module constants are built at collection time, which can be minutes
    before the test runs on a busy machine; a token minted there would expire in between.
    ``exp`` is ``now + lifetime_s`` at minting unless the claims name it (e.g. ``EXPIRED_AT``).
    """

    secret: str
    claims: dict[str, Any] = field(default_factory=dict)
    lifetime_s: float = 3600.0
    algorithm: str = "HS256"

    def mint(self) -> str:
        """The signed token, with its expiry counted from now."""
        payload = {"exp": time.time() + self.lifetime_s, **self.claims}
        payload = {k: v for k, v in payload.items() if v is not None}  # None: leave the claim out
        key: Any = None if self.algorithm == "none" else self.secret
        return jwt.encode(payload, key, algorithm=self.algorithm)


def minted(value: Any) -> Any:
    """``value`` with every ``Token`` in it (at any depth of lists and dicts) minted now."""
    if isinstance(value, Token):
        return value.mint()
    if isinstance(value, dict):
        return {k: minted(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(minted(v) for v in value)
    return value


def time_bound_tokens(value: Any) -> list[str]:
    """JWTs inside ``value`` whose expiry is a real, future-bound time (a collection-time bug).

    Used by conftest to refuse test parameters that carry a token minted at collection.
    """
    found: list[str] = []
    if isinstance(value, str) and value.count(".") == 2:
        try:
            claims = jwt.decode(value, options={"verify_signature": False, "verify_exp": False})
        except jwt.InvalidTokenError:
            return found
        exp = claims.get("exp")
        if isinstance(exp, int | float) and exp > EXPIRED_AT:
            found.append(value)
    elif isinstance(value, dict):
        for v in value.values():
            found += time_bound_tokens(v)
    elif isinstance(value, list | tuple | set | frozenset):
        for v in value:
            found += time_bound_tokens(v)
    elif hasattr(value, "__dataclass_fields__") and not isinstance(value, Token):
        for name in value.__dataclass_fields__:
            found += time_bound_tokens(getattr(value, name, None))
    return found


def key_entry(name: str, **kwargs: Any) -> ApiKeyConfig:
    """A configured key for one of ``KEYS``."""
    return ApiKeyConfig(name=name, sha256=hash_key(KEYS[name]), **kwargs)


def make_settings(alias: str, **overrides: Any) -> Settings:
    """Settings for the app under test."""
    values: dict[str, Any] = {
        "es_url": ES_URL,
        "index_alias": alias,
        # The shared BM25 corpus has no vectors; tests of semantic search ask for an embedder.
        "embedder": "none",
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
async def app_client(app: Settings | FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client driving the app (or the app for these settings) in-process, with its
    lifespan run."""
    app = create_app(app) if isinstance(app, Settings) else app
    async with LifespanManager(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://svc") as client:
            yield client


def metric_sample(
    client: httpx.AsyncClient, name: str, labels: dict[str, str] | None = None
) -> float | None:
    """One sample of the metrics of the app behind ``client`` (None if it has none)."""
    transport = client._transport
    assert isinstance(transport, httpx.ASGITransport)
    registry = transport.app.state.rsvc.metrics.registry  # type: ignore[attr-defined]
    value = registry.get_sample_value(name, labels or {})
    return None if value is None else float(value)


def postcheck_drops(client: httpx.AsyncClient) -> float:
    """How many hits the app's ACL post-check dropped (a leak in the Elasticsearch query)."""
    return metric_sample(client, "rsvc_acl_postcheck_drops_total") or 0.0
