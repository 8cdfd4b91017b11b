"""Reading documents under a budget (issue #37): worker processes that parse and chunk one
document at a time with a deadline and a memory limit, replaced when one passes either."""

from indexer.workers.pool import InFlight, ParserPool
from indexer.workers.starting import StartingPool

__all__ = ["InFlight", "ParserPool", "StartingPool"]
