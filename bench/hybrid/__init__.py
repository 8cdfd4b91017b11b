"""Hybrid with vectors: BM25 and hybrid against raw ``_msearch``, kNN recall under selective
permissions, at the sizes users have.

    python -m bench.hybrid [--chunks N] [--smoke]
"""
