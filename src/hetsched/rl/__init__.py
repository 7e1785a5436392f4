"""Shared RL: one readable PPO with masks and factored heads."""
