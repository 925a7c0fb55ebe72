"""Test helpers: the loopback Messages-API server."""
