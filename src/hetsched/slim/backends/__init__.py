"""Device backends of the greedy executor: simulated (event loop) and live (PyTorch)."""
