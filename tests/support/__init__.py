"""Test helpers shared by several test modules (loopback API servers)."""
