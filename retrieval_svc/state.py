"""What the app holds for its lifetime: settings, clients, keys, engine, ACL, metrics."""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx
from elasticsearch import AsyncElasticsearch

from retrieval_svc.acl.casbin_acl import AccessControl
from retrieval_svc.acl.identities import Unresolved
from retrieval_svc.audit import Audit
from retrieval_svc.auth.key_file import KeyFile
from retrieval_svc.auth.keys import KeyStore
from retrieval_svc.auth.oidc import OidcVerifier
from retrieval_svc.embedding import Embedder, EmbeddingModel, QueryCache
from retrieval_svc.filters.dify import IdentityNames
from retrieval_svc.metrics import Metrics
from retrieval_svc.refusals import RecentRefusals
from retrieval_svc.search.catalog import CatalogCache
from retrieval_svc.search.engine import SearchEngine
from retrieval_svc.search.rerank import Reranker
from retrieval_svc.settings import Settings
from retrieval_svc.web.client import WebSearch


@dataclass(slots=True)
class AppState:
    """Long-lived objects, opened and closed by the app's lifespan."""

    settings: Settings
    es: AsyncElasticsearch
    http: httpx.AsyncClient
    keys: KeyStore
    engine: SearchEngine
    catalog: CatalogCache
    acl: AccessControl
    web: WebSearch
    metrics: Metrics
    audit: Audit
    embedder: Embedder | None = None
    embedding_model: EmbeddingModel | None = None
    query_vectors: QueryCache | None = None
    reranker: Reranker | None = None
    oidc: OidcVerifier | None = None
    key_file: KeyFile | None = None  # RSVC_API_KEYS_FILE, reloaded when it changes
    # User ids that resolved to no one lately (design.md §17), for the console.
    unknown_users: Unresolved = field(default_factory=Unresolved)
    # The last refusals on the retrieval routes, by key and reason, for the console.
    refusals: RecentRefusals = field(default_factory=RecentRefusals)

    @property
    def identity_names(self) -> IdentityNames:
        """Dify condition names that carry identity claims."""
        return IdentityNames(
            user_id=tuple(self.settings.identity_user_names),
            roles=tuple(self.settings.identity_role_names),
            token=tuple(self.settings.identity_token_names),
        )
