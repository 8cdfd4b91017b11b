"""Dify's External Knowledge API: request and response shapes, and their translation."""
