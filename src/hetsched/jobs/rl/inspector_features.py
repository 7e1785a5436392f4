"""What SchedInspector sees when it inspects one decision (Zhang, Dai and Xie, HPDC'22, section 4).

SchedInspector looks at the job the base policy picked and at the system around it, and its
paper groups these into job features (the pick's requested time, processors and wait), system
features (free resources, the queue's length and its jobs' waits and sizes) and the backfilling
opportunity (whether other jobs could use the resources if the pick waits). For GPUs the
processors are requested GPUs, the pick's share of the free GPUs it may use is RLTune's
demand-supply ratio (eq. 1), the backfilling opportunity is the share of the other visible jobs
that could start now (on an eligible GPU type and VC, :func:`build_features`), and the cluster's
fragmentation (eq. 3) is added because on multi-GPU nodes free GPUs alone do not say whether a
large job fits. All values are in [0, 1] on Table 3's scales.
"""

from __future__ import annotations

import numpy as np

from hetsched.jobs.policies.queue_state import QueueState
from hetsched.jobs.rl.features import QueueFeatures, log_time

INSPECTOR_QUEUE = 128
"""Jobs (in the base policy's order) whose features are built to find the pick and the others
that could start."""
MAX_REJECTIONS = 4
"""Consecutive rejections after which the inspector must accept, so no job starves."""
QUEUE_LENGTH_SCALE = 1024
"""Queue length that maps to 1.0 on the log scale of ``queue_length``."""
INSPECTOR_FEATURES: tuple[str, ...] = (
    "pick_requested_time",
    "pick_wait_time",
    "pick_requested_gpus",
    "pick_demand_supply_ratio",
    "free_gpu_share",
    "queue_length",
    "queue_mean_wait",
    "queue_mean_requested_time",
    "backfill_opportunity",
    "fragmentation_factor",
    "rejections",
)
"""The inspector's observation, in order."""


def inspector_observation(
    state: QueueState,
    features: QueueFeatures,
    pick: int,
    rejections: int,
    max_rejections: int,
) -> np.ndarray:
    """The observation of one inspection.

    Args:
        state: The queue (in any order) and the cluster now.
        features: Table 3 features of the visible jobs (the base policy's first ones).
        pick: Slot in ``features`` of the base policy's pick.
        rejections: Consecutive rejections so far.
        max_rejections: The bound on them.
    """
    table = features.table
    visible = len(features.queue)
    others_startable = int(features.can_start.sum()) - 1
    total_gpus = max(state.cluster.total_gpus, 1)
    values = (
        table["requested_time"][pick],
        table["wait_time"][pick],
        table["requested_gpus"][pick],
        table["demand_supply_ratio"][pick],
        float(state.cluster_state.free_gpus.sum()) / total_gpus,
        min(np.log1p(len(state.queue)) / np.log1p(QUEUE_LENGTH_SCALE), 1.0),
        float(log_time(np.array([state.wait_time_s.mean()]))[0]),
        float(log_time(np.array([state.requested_time_s.mean()]))[0]),
        others_startable / max(visible - 1, 1),
        features.cluster_fragmentation,
        rejections / max(max_rejections, 1),
    )
    return np.asarray(values, dtype=np.float32)
