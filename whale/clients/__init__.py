"""Clients of outside services (the Anthropic Messages API)."""
