"""retrieval-svc: permission-aware retrieval for Dify, backed by Elasticsearch."""

__version__ = "0.1.0"
