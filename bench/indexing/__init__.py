"""The indexer's scale and convergence: a re-run that changed 1% of a source, shards of one
knowledge base indexed side by side.

    python -m bench.indexing.convergence | python -m bench.indexing.shards
"""
