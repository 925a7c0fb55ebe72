"""One run: its context (store, archive, engine, trainer), settings, schedule and budget rules."""
