"""Prometheus metrics, one registry per app (labels are bounded: never user input)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter


class Metrics:
    """The service's metric families."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.acl_postcheck_drops = Counter(
            "rsvc_acl_postcheck_drops_total",
            "Hits that passed the Elasticsearch ACL clause but failed the Python re-check (a bug).",
            registry=self.registry,
        )
        self.policy_reloads = Counter(
            "rsvc_policy_reloads_total",
            "Casbin policy reloads after a file change, by outcome (ok, error).",
            ["outcome"],
            registry=self.registry,
        )
        self.auth_failures = Counter(
            "rsvc_auth_failures_total",
            "Requests refused for authentication or authorization, by reason.",
            ["reason"],
            registry=self.registry,
        )
