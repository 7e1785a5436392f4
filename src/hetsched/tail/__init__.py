"""Tail-latency aware placement of inference pods by predicted P90 latency."""
