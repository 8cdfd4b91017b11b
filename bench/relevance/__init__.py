"""Relevance on real Chinese data (CMRC 2018): the indexer, the local model and the service
against floors, BM25 / vector / hybrid, and the tuning of the defaults.

    python -m bench.relevance --data cmrc2018_dev.json
"""
