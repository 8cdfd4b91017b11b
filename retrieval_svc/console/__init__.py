"""The operator's console (design.md §14), served at ``/console`` when ``RSVC_CONSOLE``."""

from retrieval_svc.console import (  # noqa: F401 (they register their pages on the router)
    inventory,
    policy_page,
)
from retrieval_svc.console.pages import HERE, router

STATIC = HERE / "static"

__all__ = ["STATIC", "router"]
