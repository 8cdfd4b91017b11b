"""The operator's console (design.md §14), served at ``/console`` when ``RSVC_CONSOLE``."""

from retrieval_svc.console import inventory  # noqa: F401 (registers its pages on the router)
from retrieval_svc.console.pages import HERE, router

STATIC = HERE / "static"

__all__ = ["STATIC", "router"]
