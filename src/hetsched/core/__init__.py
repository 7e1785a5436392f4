"""Shared core: event loop, metrics, registry, config loading, seeding and errors."""
