"""Formats and OCR: what each format the indexer reads yields (recall of its passages) and
costs, rendered from real passages; OCR at the engine's speed.

    python -m bench.formats [--ocr-speed N] | python -m bench.formats.cost
"""
