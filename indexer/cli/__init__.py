"""``retrieval-indexer``: the command line, a module a command group, on one app
(``common``): ``index`` (``index``, what its options make: ``prepare``), ``watch``
(``watch``), and ``init``, ``delete``, ``stats``, ``rebuild``, ``show`` (``manage``)."""

from indexer.cli import index, manage, watch  # noqa: F401 (each registers its commands)
from indexer.cli.common import app
from indexer.cli.index import print_report

__all__ = ["app", "print_report"]
