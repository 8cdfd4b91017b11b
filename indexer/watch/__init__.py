"""Keeping a knowledge base true to its source while people ask: ``retrieval-indexer watch``.

Events from the source (a folder's file-system events, a bucket's notifications through SQS)
and a periodic re-listing both name keys to look at; each batch of keys is settled the same
way (``settle``): what may narrow takes effect first — a document gone is deleted, a changed
one is held (its chunks answer no one) — before anything is parsed or embedded; then the keys
go through the indexer's one pipeline, as ``index`` runs it. Events are a speed-up, never the
only path: the re-listing finds whatever they missed.
"""

from indexer.store import HELD_ROLE
from indexer.watch.settle import Settled, settle

__all__ = ["HELD_ROLE", "Settled", "settle"]
