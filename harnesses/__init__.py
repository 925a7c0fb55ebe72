"""Harnesses: the contract, the sandbox, the archive, proposers and seed harnesses (h0)."""
