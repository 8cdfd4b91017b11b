"""``retrieval-svc``: the command line, a module a command group on one app (``main``:
``serve``, ``new-key``): ``policy`` (``policy``; ``sync-ldap`` in ``directory``),
``identity`` (``identity``), ``audit`` (``audit``), and the settings they load (``config``)."""

from retrieval_svc.cli.main import app
from retrieval_svc.usage_words import install

install()  # (a mistyped command line answered in the reader's language)

__all__ = ["app"]
