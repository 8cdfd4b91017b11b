"""MCP (design.md §13): the retrieval pipeline as Model Context Protocol tools at ``/mcp``."""

from retrieval_svc.mcp.transport import McpRoutes, OidcTokens, build_mcp

__all__ = ["McpRoutes", "OidcTokens", "build_mcp"]
