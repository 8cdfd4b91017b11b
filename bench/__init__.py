"""Benchmark harness: retrieval-svc against raw Elasticsearch (see bench/README.md)."""
