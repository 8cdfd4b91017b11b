"""Elasticsearch: the chunk index, query building and execution."""
