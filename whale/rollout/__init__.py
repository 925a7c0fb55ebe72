"""Rollouts: the one engine, chat rendering, generation backends, the OpenAI-compatible server, metrics."""
