"""Weights: the RSFT trainer (TRL) and its checkpoints."""
