"""The indexer's readers, one module per family of formats (docs/indexer.md, "Formats").

Each reader turns a file's bytes into a ``Parsed``: text with headings marked ``#`` (so the
chunker sees structure), table rows that repeat their column names, and parts that say where
the text came from (a page read by OCR, with its confidence).
"""
