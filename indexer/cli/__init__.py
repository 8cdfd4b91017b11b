"""``retrieval-indexer``: the command line, a module a command group, on one app
(``common``): ``index`` (``index``, what its options make: ``prepare``), ``watch``
(``watch``), and ``init``, ``delete``, ``stats``, ``rebuild``, ``show`` (``manage``)."""

from indexer.cli import index, manage, watch  # noqa: F401 (each registers its commands)
from indexer.cli.common import app
from indexer.cli.index import print_report
from retrieval_svc.usage_words import install

install()  # (a mistyped command line answered in the reader's language)

__all__ = ["app", "print_report"]
