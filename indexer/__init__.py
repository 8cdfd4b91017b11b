"""The indexer: source documents → parsed, chunked, ACL-tagged chunks in Elasticsearch."""
