"""What the scheduler has seen finish: per-user run-time history and decayed GPU usage.

Policies that learn from the past (QSSF's duration estimate, Slurm's fair-share factor) read this
instead of the trace, so they only know about jobs that have already completed at ``now`` — no
peeking at the future or at the true run time of a queued job.
"""

from __future__ import annotations

import math

import numpy as np


class UsageHistory:
    """Per-user completions and exponentially decayed GPU-seconds.

    Args:
        num_users: Number of distinct user codes (0..num_users-1).
        half_life_s: Half-life of the usage decay (Slurm's ``PriorityDecayHalfLife``, 7 days
            by default).
    """

    def __init__(self, num_users: int, half_life_s: float = 7 * 86400.0) -> None:
        self.half_life_s = half_life_s
        self._usage_gpu_s = np.zeros(num_users)
        self._usage_time_s = 0.0
        self._run_sum_s = np.zeros(num_users)
        self._run_count = np.zeros(num_users, dtype=np.int64)
        self._by_size: dict[tuple[int, int], tuple[float, int]] = {}
        self._global_sum_s = 0.0
        self._global_count = 0

    def _decay_to(self, now_s: float) -> None:
        if now_s > self._usage_time_s:
            self._usage_gpu_s *= math.pow(2.0, -(now_s - self._usage_time_s) / self.half_life_s)
            self._usage_time_s = now_s

    def record_completion(
        self, user_code: int, num_gpus: int, run_time_s: float, end_s: float
    ) -> None:
        """Adds a finished job (its wall-clock run time on the GPUs it got)."""
        self._decay_to(end_s)
        self._usage_gpu_s[user_code] += max(num_gpus, 1) * run_time_s
        self._run_sum_s[user_code] += run_time_s
        self._run_count[user_code] += 1
        key = (user_code, num_gpus)
        total, count = self._by_size.get(key, (0.0, 0))
        self._by_size[key] = (total + run_time_s, count + 1)
        self._global_sum_s += run_time_s
        self._global_count += 1

    def decayed_usage_gpu_s(self, now_s: float) -> np.ndarray:
        """Decayed GPU-seconds per user at ``now_s`` (a copy)."""
        self._decay_to(now_s)
        return self._usage_gpu_s.copy()

    def mean_run_time_s(
        self, user_codes: np.ndarray, num_gpus: np.ndarray, fallback_s: np.ndarray
    ) -> np.ndarray:
        """Mean past run time of each job's (user, GPU count), else the user's, else global mean,
        else ``fallback_s`` (QSSF's history-based estimate, Helios section 5)."""
        out = np.asarray(fallback_s, dtype=np.float64).copy()
        if self._global_count:
            out[:] = self._global_sum_s / self._global_count
        users_seen = self._run_count[user_codes] > 0
        out[users_seen] = (
            self._run_sum_s[user_codes[users_seen]] / self._run_count[user_codes[users_seen]]
        )
        for i, (user, gpus) in enumerate(zip(user_codes.tolist(), num_gpus.tolist(), strict=True)):
            entry = self._by_size.get((user, gpus))
            if entry is not None:
                out[i] = entry[0] / entry[1]
        return out
