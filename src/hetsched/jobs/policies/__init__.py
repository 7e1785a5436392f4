"""Queue order: what a priority policy sees (:mod:`.queue_state`), the completed-job history it may
use (:mod:`.history`), and the heuristic policies with their registry (:mod:`.heuristics`).

The RL prioritiser is in :mod:`hetsched.jobs.rl`; it has the same signature.
"""
