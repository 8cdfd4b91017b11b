"""What a feature costs on the query path: MCP against ``/v1/search``, the audit trail, a
tenant's index, the field catalog's refresh.

    python -m bench.features.mcp | .audit | .tenants | .catalog
"""
