"""What each part of the service is configured with, read from the settings: the policy's
place, the OpenID Connect provider, web search, the reranker, hybrid scoring (the settings
name variables; these are the parts' own terms)."""

from __future__ import annotations

from retrieval_svc.acl.policy_store import PolicyDatabase, PolicyFiles, PolicySource
from retrieval_svc.auth.oidc import OidcConfig
from retrieval_svc.search.engine import HybridConfig
from retrieval_svc.search.rerank import RerankConfig
from retrieval_svc.settings import Settings
from retrieval_svc.web.client import WebConfig


def policy_source(settings: Settings) -> PolicySource:
    """Where the Casbin policy lives: the database if a URL is set, else the file."""
    if settings.casbin_db_url is not None:
        return PolicyDatabase(settings.casbin_model, settings.casbin_db_url.get_secret_value())
    return PolicyFiles(settings.casbin_model, settings.casbin_policy)


def oidc_config(settings: Settings) -> OidcConfig:
    """The OpenID Connect provider's configuration in ``settings`` (issuer required)."""
    assert settings.oidc_issuer is not None
    return OidcConfig(
        issuer=settings.oidc_issuer,
        audience=tuple(settings.oidc_audience),
        jwks_url=settings.oidc_jwks_url,
        user_claim=settings.oidc_user_claim,
        roles_claim=settings.oidc_roles_claim,
        algorithms=tuple(settings.oidc_algorithms),
        leeway_s=settings.oidc_leeway_s,
        jwks_max_age_s=settings.oidc_jwks_max_age_s,
        jwks_min_refresh_s=settings.oidc_jwks_min_refresh_s,
        timeout_s=min(3.0, settings.request_deadline_s),
    )


def web_config(settings: Settings) -> WebConfig:
    """The web search configuration in ``settings``."""
    return WebConfig(
        provider=settings.web_provider,
        api_key=settings.web_api_key.get_secret_value() if settings.web_api_key else None,
        base_url=settings.web_base_url,
        timeout_s=settings.web_timeout_s,
        max_results=settings.web_max_results,
        freshness=settings.web_freshness,
        cache_ttl_s=settings.web_cache_ttl_s,
        cache_size=settings.web_cache_size,
    )


def rerank_config(settings: Settings) -> RerankConfig:
    """The optional reranker's configuration in ``settings``."""
    key = settings.rerank_api_key
    return RerankConfig(
        url=settings.rerank_url,
        model=settings.rerank_model,
        api_key=key.get_secret_value() if key else None,
        top_n=settings.rerank_top_n,
        timeout_s=settings.rerank_timeout_s,
    )


def hybrid_config(settings: Settings) -> HybridConfig:
    """How vector and hybrid retrieval score and fuse, from ``settings``."""
    return HybridConfig(
        fusion=settings.fusion,
        vector_weight=settings.fusion_vector_weight,
        vector_floor=settings.vector_score_floor,
        rrf_k=settings.rrf_k,
        text_fields=settings.bm25_fields,
        candidates=settings.hybrid_candidates,
        num_candidates=settings.knn_num_candidates,
        oversample=settings.knn_oversample,
    )
