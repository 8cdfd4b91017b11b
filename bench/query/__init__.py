"""The query path against raw Elasticsearch: the service's latency, throughput and CPU per
request beside the same query posted to Elasticsearch directly, at scale, on a cluster, under
soak, and the floor of a hop that only forwards.

    python -m bench.query [--smoke] [--hop] [--scales …]   (see bench/README.md)
"""
