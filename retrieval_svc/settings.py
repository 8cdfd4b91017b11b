"""Configuration: environment variables prefixed ``RSVC_`` (nested with ``__``), or ``.env``.

Every setting, its default and its meaning is listed in ``docs/configuration.md``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Literal, Self
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    Field,
    SecretStr,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from retrieval_svc.config_checks import database_url, http_url
from retrieval_svc.key_entry import ApiKeyConfig, load_api_keys, reserved_role
from retrieval_svc.tenancy import (
    DEFAULT_TENANT,
    MAX_INDEX_ALIAS,
    check_tenant,
)

log = logging.getLogger(__name__)

# The Casbin model and default policy shipped with the package (retrieval_svc/acl/).
_ACL_DIR = Path(__file__).resolve().parent / "acl"
DEFAULT_MODEL = _ACL_DIR / "model.conf"
DEFAULT_POLICY = _ACL_DIR / "default_policy.csv"

# Asymmetric JWS algorithms an OIDC token may use, by key type (auth/oidc.py accepts no
# others: a JWKS is public, so an HMAC "key" in it would let anyone sign).
OIDC_ALGORITHM_FAMILIES: dict[str, frozenset[str]] = {
    "RSA": frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}),
    "EC": frozenset({"ES256", "ES384", "ES512"}),
}
OIDC_ALGORITHMS = frozenset().union(*OIDC_ALGORITHM_FAMILIES.values())

DEFAULT_TIMEZONE = "Asia/Shanghai"


class ElasticsearchSettings(BaseSettings):
    """How to reach Elasticsearch and which alias to use (shared by service and indexer)."""

    model_config = SettingsConfigDict(
        env_prefix="RSVC_",
        env_nested_delimiter="__",
        env_file=".env",
        extra="ignore",
        hide_input_in_errors=True,  # errors must never echo a password or key
    )

    es_url: str = "http://127.0.0.1:9200"  # or several, comma-separated: one per node
    es_sniff: bool = False  # discover the cluster's other nodes (at start and on a failure)
    es_username: str | None = None
    es_password: SecretStr | None = None
    es_api_key: SecretStr | None = None
    es_ca_certs: Path | None = None
    es_timeout_s: float = Field(30.0, gt=0)
    # The prefix of every tenant's alias (``rsvc-chunks.acme``) and of its indices.
    index_alias: str = Field(
        "rsvc-chunks", pattern=r"^[a-z0-9][a-z0-9_.-]*$", max_length=MAX_INDEX_ALIAS
    )
    # Layout of new indices: primary shards, and replicas as a count or an auto-expand range
    # ("0-1": none on a one-node cluster, one as soon as there is a second node).
    index_shards: int = Field(1, ge=1, le=64)
    index_replicas: str = Field("0-1", pattern=r"^(\d+|\d+-(\d+|all))$")
    # Whose indices these are: stamped in every index this installation writes; another
    # installation's are refused unless adopted on purpose (search/installation.py).
    installation_id: str = Field("", max_length=200)
    installation_adopt: bool = False

    @field_validator("es_url")
    @classmethod
    def _node_urls(cls, value: str) -> str:
        nodes = [u for u in value.split(",") if u.strip()]
        if not nodes:
            raise ValueError("name at least one node, like http://127.0.0.1:9200")
        return ",".join(http_url(u, port=True) for u in nodes)

    @property
    def installation(self) -> str:
        """This installation's id: ``RSVC_INSTALLATION_ID``, else the folder it runs from (the
        checkout, or where the package is installed): every process of one checkout agrees,
        two checkouts differ."""
        return self.installation_id.strip() or str(Path(__file__).resolve().parents[1])

    @property
    def es_hosts(self) -> list[str]:
        """The node URLs in ``es_url``."""
        return [u.strip() for u in self.es_url.split(",") if u.strip()]


class IndexSettings(ElasticsearchSettings):
    """What the service and the indexer must agree on: the alias and the embedding model."""

    # Embeddings (docs/design.md §12). ``local`` = the bundled multilingual-e5-small.
    embedder: Literal["local", "openai", "none"] = "local"
    embedding_url: str | None = None  # openai: base URL up to /v1
    embedding_model: str | None = None  # openai: the model name the server knows
    embedding_api_key: SecretStr | None = None
    embedding_dimensions: int | None = Field(None, ge=1, le=4096)
    embedding_batch_size: int = Field(16, ge=1, le=2048)
    embedding_timeout_s: float = Field(30.0, gt=0)
    embedding_in_flight: int = Field(4, ge=1, le=64)  # openai: passage batches sent at once
    embedding_retries: int = Field(5, ge=0, le=20)  # openai: tries again of a passage batch
    embedding_input_type: bool = False  # send input_type=query|passage (e5/bge servers)
    embedding_query_prefix: str = ""
    embedding_passage_prefix: str = ""
    # Index layout: shards and HNSW quantisation of the vector field.
    vector_index_type: Literal[
        "int8_hnsw", "int4_hnsw", "bbq_hnsw", "hnsw", "int8_flat", "flat"
    ] = "int8_hnsw"
    # The zone in which date-only values (2026-03-01, in metadata and in filters) are read.
    timezone: str = DEFAULT_TIMEZONE
    # The policy in a database instead of the file (SQLAlchemy URL; may hold a password). The
    # indexer records there when a rules file changed documents' roles.
    casbin_db_url: SecretStr | None = None

    @field_validator("casbin_db_url")
    @classmethod
    def _database_url(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            database_url(value.get_secret_value())
        return value

    @field_validator("embedding_url")
    @classmethod
    def _embedding_url(cls, value: str | None) -> str | None:
        return None if value is None else http_url(value)

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f"unknown time zone {value!r} (an IANA name, e.g. Asia/Shanghai)"
            ) from None
        return value

    @model_validator(mode="after")
    def _check_embedder(self) -> Self:
        if self.embedder == "openai" and not (self.embedding_url and self.embedding_model):
            raise ValueError(
                "RSVC_EMBEDDER=openai needs RSVC_EMBEDDING_URL and RSVC_EMBEDDING_MODEL"
            )
        return self


class Settings(IndexSettings):
    """All of the service's settings."""

    manage_index: bool = True

    # Retrieval (docs/design.md §12): how relevance is computed.
    retrieval_mode: Literal["hybrid", "bm25", "vector"] = "hybrid"
    retrieval_modes: dict[str, Literal["hybrid", "bm25", "vector"]] = Field(default_factory=dict)
    # Defaults tuned on CMRC 2018 dev (bench/relevance/run.py; README "Relevance").
    bm25_fields: Literal["shingle", "segmented", "both"] = "both"
    fusion: Literal["linear", "rrf"] = "linear"
    fusion_vector_weight: float = Field(0.3, ge=0, le=1)
    vector_score_floor: float = Field(0.8, ge=0, lt=1)
    rrf_k: int = Field(60, ge=1)
    hybrid_candidates: int = Field(50, ge=1, le=1000)
    # HNSW candidates per shard, at least; 10 per neighbour asked for beyond that (issue #25).
    knn_num_candidates: int = Field(500, ge=1, le=10000)
    # Rescore the approximate kNN's k × this many neighbours with the full-precision vectors
    # (quantized index types; 0: off). int8 ties tight clusters without it (issue #25).
    knn_oversample: float = Field(3.0, ge=0, le=10)
    query_cache_size: int = Field(1024, ge=1)
    # Optional reranker (Cohere/Jina format: Xinference, vLLM… /v1/rerank); off without a URL.
    rerank_url: str | None = None
    rerank_model: str | None = None
    rerank_api_key: SecretStr | None = None
    rerank_top_n: int = Field(20, ge=1, le=200)
    rerank_timeout_s: float = Field(2.0, gt=0)

    # Auth
    api_keys: list[ApiKeyConfig] = Field(default_factory=list)
    api_keys_file: Path | None = None
    auth_disabled: bool = False

    # Access control (Casbin) and identity
    casbin_model: Path = DEFAULT_MODEL
    casbin_policy: Path = DEFAULT_POLICY
    policy_check_interval_s: float = Field(2.0, ge=0)
    identity_user_names: list[str] = Field(default_factory=lambda: ["user_id"])
    identity_role_names: list[str] = Field(default_factory=lambda: ["user_roles", "access_roles"])
    identity_token_names: list[str] = Field(default_factory=lambda: ["principal_token"])
    # OpenID Connect provider for ``oidc`` keys (design.md §6)
    oidc_issuer: str | None = None
    oidc_audience: list[str] = Field(default_factory=list)
    oidc_jwks_url: str | None = None  # default: discovered from the issuer
    oidc_user_claim: str = Field("sub", min_length=1)
    oidc_roles_claim: str = Field("groups", min_length=1)
    oidc_algorithms: list[str] = Field(default_factory=lambda: ["RS256", "ES256", "PS256"])
    oidc_leeway_s: float = Field(30.0, ge=0, le=300)
    oidc_jwks_max_age_s: float = Field(600.0, ge=0)
    oidc_jwks_min_refresh_s: float = Field(30.0, ge=0)

    # Web search (design.md §10)
    web_provider: Literal["bocha", "tavily", "baidu"] | None = None
    web_api_key: SecretStr | None = None
    web_base_url: str | None = None
    web_timeout_s: float = Field(3.0, gt=0, le=60)
    web_max_results: int = Field(5, ge=1, le=50)
    web_freshness: Literal["day", "week", "month", "year"] | None = None
    web_cache_ttl_s: float = Field(60.0, ge=0)
    web_cache_size: int = Field(256, ge=1)
    web_knowledge_ids: list[str] = Field(default_factory=list)

    # Dify custom tool (and MCP's protected-resource metadata): where clients reach the service
    public_url: str = "http://127.0.0.1:8080"
    # The language of answers to a request whose Accept-Language names neither Chinese nor
    # English (Dify sends none: its run log shows this one). Accept-Language still wins.
    default_language: Literal["en", "zh-CN"] = "en"

    # MCP (design.md §13) at /mcp: "key" an API key in Authorization, as on every route;
    # "oidc" the end user's access token from RSVC_OIDC_ISSUER, acting in ``mcp_tenant``;
    # "off" not served.
    mcp_auth: Literal["key", "oidc", "off"] = "key"
    mcp_tenant: str = DEFAULT_TENANT

    # Requests
    # Dify reads with a 5 s timeout: the deadline (all Elasticsearch and web work) ends first.
    request_deadline_s: float = Field(4.0, gt=0, le=120)
    max_query_chars: int = Field(1000, ge=16, le=100_000)
    max_top_k: int = Field(100, ge=1, le=1000)
    max_body_bytes: int = Field(1_048_576, ge=1024)
    score_saturation: float = Field(10.0, gt=0)

    # Audit trail (design.md §14): one event per retrieval, to a log stream or to per-tenant
    # daily Elasticsearch indices written from a bounded queue in the background.
    audit: Literal["off", "log", "elasticsearch"] = "off"
    audit_user: Literal["plain", "hash"] = "plain"  # hash: HMAC-SHA-256 with audit_hash_key
    audit_hash_key: SecretStr | None = Field(None, min_length=32)
    audit_queries: bool = False  # the query text in the event (off: ids and counts only)
    audit_retention_days: int = Field(90, ge=1, le=36500)
    audit_queue_size: int = Field(10_000, ge=1, le=1_000_000)

    # SCIM 2.0 at /scim/v2 (issue #35 §3), for keys with "scim": true; needs the policy in a
    # database (RSVC_CASBIN_DB_URL), where users, groups and their grants are kept.
    scim: bool = False
    # Per tenant, which SCIM group names give which roles (JSON: {"acme": {"Finance Team":
    # ["finance"]}}); a tenant without one: a group gives the role of its own name.
    scim_roles: dict[str, dict[str, list[str]]] = Field(default_factory=dict)

    # Operator console (design.md §14) at /console, for admin keys of a tenant.
    console: bool = False
    # Signs the session cookies (None: a secret per process; set one with --workers).
    console_secret: SecretStr | None = Field(None, min_length=32)
    console_session_s: int = Field(1800, ge=60, le=86400)

    # HTTP server (the ``serve`` command)
    # /docs, /redoc, /openapi.json; unset: served only when ``host`` is a loopback address
    # (development), never on an address others reach unless said so.
    api_docs: bool | None = None
    # /metrics: "open" on the API port (development), "key" on the API port behind an API
    # key, "port" on its own port (``metrics_port``, same host; the Helm chart's default),
    # "off" not served.
    # Unset: "open" when ``host`` is a loopback address (development), else "key".
    metrics: Literal["open", "key", "port", "off"] | None = None
    metrics_port: int = Field(9464, ge=1, le=65535)
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=1, le=65535)
    workers: int = Field(1, ge=1, le=64)  # processes of `serve` (one per core it is given)
    # Idle seconds before `serve` closes a kept-alive connection: longer than the idle timeout
    # of what reuses them (Dify's client, a load balancer: 60 s on AWS), or a request sent as
    # the service closes the connection fails.
    keep_alive_s: int = Field(65, ge=1, le=3600)

    @field_validator("oidc_issuer", "oidc_jwks_url", "web_base_url", "rerank_url", "public_url")
    @classmethod
    def _urls(cls, value: str | None) -> str | None:
        return None if value is None else http_url(value)

    @field_validator("mcp_tenant")
    @classmethod
    def _mcp_tenant(cls, value: str) -> str:
        return check_tenant(value)

    @field_validator("scim_roles")
    @classmethod
    def _scim_roles(cls, value: dict[str, dict[str, list[str]]]) -> dict[str, dict[str, list[str]]]:
        for tenant, groups in value.items():
            check_tenant(tenant)
            for group, roles in groups.items():
                for role in roles:
                    why = reserved_role(role) or (
                        "a role may not be empty or hold commas, quotes or line breaks"
                        if not role.strip() or any(c in role for c in ',\n\r"')
                        else None
                    )
                    if why:
                        raise ValueError(f"RSVC_SCIM_ROLES: {tenant} / {group!r}: {why}")
        return value

    @field_validator("oidc_algorithms")
    @classmethod
    def _asymmetric_only(cls, value: list[str]) -> list[str]:
        refused = sorted(set(value) - OIDC_ALGORITHMS)
        if refused or not value:
            raise ValueError(
                f"not accepted: {refused or 'an empty list'}; choose among "
                f"{', '.join(sorted(OIDC_ALGORITHMS))} (never HS* or none)"
            )
        return value

    @property
    def tenants(self) -> list[str]:
        """The tenants this service answers for: its keys' (the default one without auth)."""
        found = {k.tenant for k in self.api_keys}
        if self.mcp_auth == "oidc":
            found.add(self.mcp_tenant)
        return sorted(found | {DEFAULT_TENANT} if self.auth_disabled else found)

    @property
    def loopback(self) -> bool:
        """Whether the service binds only to this machine (development)."""
        return self.host in ("localhost", "::1") or self.host.startswith("127.")

    @model_validator(mode="after")
    def _exposure(self) -> Self:
        # What describes the service to strangers (/docs, /metrics) is open only where no
        # stranger reaches it, unless configured otherwise.
        if self.api_docs is None:
            self.api_docs = self.loopback
        if self.metrics is None:
            self.metrics = "open" if self.loopback else "key"
        return self

    @model_validator(mode="after")
    def _load_keys(self) -> Self:
        if self.api_keys_file is not None:
            self.api_keys = [*self.api_keys, *load_api_keys(self.api_keys_file)]
        names = [k.name for k in self.api_keys]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"API key names must be unique; repeated: {duplicates}")
        if self.casbin_db_url is not None and "casbin_policy" in self.model_fields_set:
            raise ValueError(
                "RSVC_CASBIN_DB_URL and RSVC_CASBIN_POLICY are both set: the policy lives in "
                "one place (`retrieval-svc policy import FILE` moves a file into the database)"
            )
        if self.scim and self.casbin_db_url is None:
            raise ValueError(
                "RSVC_SCIM=true needs RSVC_CASBIN_DB_URL: SCIM users, groups and the grants "
                "they give are kept in the policy database"
            )
        oidc_keys = [k.name for k in self.api_keys if k.mode == "oidc"]
        if oidc_keys and not self.oidc_issuer:
            raise ValueError(f"API keys {oidc_keys} have mode oidc: set RSVC_OIDC_ISSUER")
        if self.oidc_issuer and not self.oidc_audience:
            raise ValueError(
                "RSVC_OIDC_ISSUER needs RSVC_OIDC_AUDIENCE: the client id(s) tokens must be for"
            )
        if self.audit != "off" and self.audit_user == "hash" and self.audit_hash_key is None:
            raise ValueError(
                "RSVC_AUDIT_USER=hash needs RSVC_AUDIT_HASH_KEY (32 characters or more): the "
                "same key hashes the ids you later search the trail for"
            )
        if self.mcp_auth == "oidc" and not self.oidc_issuer:
            raise ValueError("RSVC_MCP_AUTH=oidc needs RSVC_OIDC_ISSUER (and RSVC_OIDC_AUDIENCE)")
        if self.web_provider and not self.web_api_key:
            raise ValueError(f"RSVC_WEB_PROVIDER={self.web_provider} needs RSVC_WEB_API_KEY")
        if not self.api_keys and not self.auth_disabled:
            raise ValueError(
                "no API key is configured: set RSVC_API_KEYS or RSVC_API_KEYS_FILE "
                "(see `retrieval-svc new-key`), or RSVC_AUTH_DISABLED=true for local development"
            )
        return self
