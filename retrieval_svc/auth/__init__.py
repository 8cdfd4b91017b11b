"""Authentication: API keys and the principal a request acts for."""
