"""RLScheduler's observation (Zhang et al., SC'20, section 4.2), adapted to GPU jobs.

RLScheduler describes each visible job by four numbers (how long it has waited, its requested run
time, its requested processors, whether it can be scheduled now) and shows its kernel network the
``MAX_QUEUE_SIZE = 128`` oldest waiting jobs, zero-padded. Its value network reads the same
per-job numbers of the whole window, flattened.

What changed for GPUs: processors become requested GPUs; "can be scheduled now" is RLTune's
``can_schedule_now`` (an eligible GPU type and virtual cluster with enough GPUs, CPUs and memory,
from :func:`~hetsched.jobs.rl.features.build_features`), so heterogeneous types reach the kernel
through the same placement rules as every other policy; and the scales are Table 3's logarithmic
ones, because GPU traces run from seconds to 30 days and RLScheduler's division by the trace's
maximum would squash every short job to 0.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from hetsched.jobs.policies.queue_state import QueueState
from hetsched.jobs.rl.features import QueueFeatures, build_features

RLSCHEDULER_QUEUE = 128
"""RLScheduler's MAX_QUEUE_SIZE: jobs its kernel sees per decision (oldest first)."""
RLSCHEDULER_FEATURES: tuple[str, ...] = (
    "wait_time",
    "requested_time",
    "requested_gpus",
    "can_schedule_now",
)
"""RLScheduler's per-job features, in its order (processors -> GPUs)."""


def build_rlscheduler_features(
    state: QueueState, max_queue: int = RLSCHEDULER_QUEUE
) -> QueueFeatures:
    """The ``max_queue`` oldest jobs' four RLScheduler features, as observation and critic input
    (the critic sees the same window); padded slots are zero and masked like RLTune's."""
    full = build_features(state, max_queue)
    observation = np.zeros((max_queue, len(RLSCHEDULER_FEATURES)), dtype=np.float32)
    visible = len(full.queue)
    observation[:visible] = np.column_stack([full.table[name] for name in RLSCHEDULER_FEATURES])
    return replace(
        full, observation=observation, critic=observation.copy(), sampled=RLSCHEDULER_FEATURES
    )
