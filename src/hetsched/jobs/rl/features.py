"""RLTune's feature building and heuristic feature sampling (section 3.2, Table 3, eqs. 1-3).

Per queued job we build the full feature set of Table 3 (17 features: 4 of them, job id, user,
virtual cluster and GPU-type constraint, are metadata kept by the job table and never fed to the
network), then sample the 8 that form the agent's observation vector (OV) and the 5 of the critic
vector (CV). The queue is cut to the ``max_queue`` oldest jobs and zero-padded to that size, so
the network's input has a fixed shape whatever the queue length.

Definitions where the paper leaves room (each a documented choice):

- **Cluster features** are per job, over the nodes the job may use (GPU type and VC):
  ``free_nodes`` = fully free eligible nodes, ``can_schedule_now`` = the placer could start it now,
  ``num_ways_to_schedule`` = eligible nodes that could hold the whole job now (for a job that must
  span nodes: the GPU types whose free GPUs could hold it).
- **Eq. 1, demand-supply ratio** ``req_gpu / free_gpu`` of the job's eligible types, squashed to
  ``x / (1 + x)`` (1 when nothing is free).
- **Eq. 2, future availability**: the eligible GPUs left free if the job starts now, i.e.
  capacity − GPUs allocated to running jobs on those nodes − the job's request, divided by the
  eligible capacity and mapped from [-1, 1] to [0, 1] (below 0.5: it does not fit now).
- **Eq. 3, fragmentation factor**: the paper prints ``1 − Σ free² / total_free``, which is not
  dimensionless (one node with 8 free GPUs gives −7). We use the Herfindahl form
  ``1 − Σ free² / (Σ free)²``: 0 when all free GPUs sit on one node, ``1 − 1/n`` when they are
  spread evenly over n nodes, normalised by its maximum ``1 − 1/N`` over N nodes.
- **Job size** = ``requested GPUs x requested time`` on a log scale; **urgency** =
  ``wait / (wait + mean requested time of the queue)``: ages every job at the same pace whatever its
  own size or length, so large or long jobs are not penalised (the paper's stated intent).
- Times are ``log1p(t) / log1p(30 days)`` (Table 4's longest runs are 30-60 days), clipped to 1.

Heuristic sampling (section 3.2): slots 0-5 are always requested time, wait, requested GPUs,
``can_schedule_now``, DSR and future availability; slot 6 is job size when the cluster's
fragmentation factor is high (>= 0.5: favour jobs that fill holes) and urgency otherwise; slot 7 is
``num_ways_to_schedule`` for a job with several ways to be placed and ``free_nodes`` otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hetsched.jobs.cluster.state import fragmentation_factor
from hetsched.jobs.policies.queue_state import QueueState

MAX_QUEUE_SIZE = 256
"""Jobs the agent sees per decision (section 3.2); older jobs first, the rest padded."""
OBS_FEATURES = 8
"""Features per job in the observation vector (the paper's 8 sampled features)."""
CRITIC_FEATURES = 5
"""Features per job in the critic vector."""
REFERENCE_TIME_S = 30 * 86400.0
"""Time that maps to 1.0 on the log scale of times."""
CFF_HIGH = 0.5
"""Fragmentation factor from which slot 6 carries job size instead of urgency."""

#: The numeric features of Table 3 kept per job (normalised to [0, 1]).
FEATURE_NAMES: tuple[str, ...] = (
    "requested_gpus",
    "requested_time",
    "submit_time",
    "wait_time",
    "req_cpu",
    "req_mem",
    "free_nodes",
    "can_schedule_now",
    "num_ways_to_schedule",
    "demand_supply_ratio",
    "job_size",
    "job_urgency",
    "future_availability",
    "fragmentation_factor",
)
#: Table 3's metadata features, tracked by the job table and never normalised or fed to the net.
METADATA_FEATURES: tuple[str, ...] = ("job_id", "user", "virtual_cluster", "gpu_type")
CRITIC_NAMES: tuple[str, ...] = (
    "wait_time",
    "requested_time",
    "requested_gpus",
    "can_schedule_now",
    "fragmentation_factor",
)


@dataclass
class QueueFeatures:
    """Features of the visible queue at one decision.

    Attributes:
        queue: Indices (into the job table) of the visible jobs, oldest first.
        table: Feature name -> value per visible job, normalised to [0, 1].
        observation: ``(max_queue, 8)`` float32, zero rows for padded slots (the OV).
        critic: ``(max_queue, 5)`` float32, zero rows for padded slots (the CV).
        valid: ``(max_queue,)`` True where a slot holds a job.
        can_start: ``(max_queue,)`` True where the slot's job could start now.
        cluster_fragmentation: Eq. 3 over the whole cluster (drives the sampling of slot 6).
        sampled: The names of the 8 observation features chosen for this state (slot 7 is per job:
            ``num_ways_or_free_nodes``).
    """

    queue: np.ndarray
    table: dict[str, np.ndarray]
    observation: np.ndarray
    critic: np.ndarray
    valid: np.ndarray
    can_start: np.ndarray
    cluster_fragmentation: float
    sampled: tuple[str, ...]

    def flat(self) -> np.ndarray:
        """OV then CV, flattened: the Gymnasium observation the agent splits again."""
        return np.concatenate((self.observation.ravel(), self.critic.ravel()))


def log_time(seconds: np.ndarray) -> np.ndarray:
    """``log1p(t) / log1p(30 days)``, clipped to [0, 1]."""
    return np.clip(np.log1p(np.maximum(seconds, 0.0)) / np.log1p(REFERENCE_TIME_S), 0.0, 1.0)


def choice_possible(state: QueueState, max_queue: int = MAX_QUEUE_SIZE) -> bool:
    """A cheap necessary condition for a real choice: at least two visible jobs ask for no more
    GPUs than are free in the whole cluster. When it fails, at most one visible job can start and
    the order does not matter, so the features need not be built."""
    free_gpus = int(state.cluster_state.free_gpus.sum())
    visible = np.asarray(state.queue)[:max_queue]
    return int(np.count_nonzero(state.jobs.num_gpus[visible] <= free_gpus)) >= 2


def _eligibility(state: QueueState, queue: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(group per job, eligible-node mask per group): jobs sharing (GPU types, VC) share a row."""
    jobs, cluster = state.jobs, state.cluster
    keys: dict[tuple, int] = {}
    masks: list[np.ndarray] = []
    group = np.empty(len(queue), dtype=np.int64)
    for i, (types, vc) in enumerate(
        zip(jobs.gpu_types[queue].tolist(), jobs.virtual_cluster[queue].tolist(), strict=True)
    ):
        key = (types, vc)
        if key not in keys:
            keys[key] = len(masks)
            masks.append(cluster.type_mask(types) & cluster.vc_mask(vc))
        group[i] = keys[key]
    return group, np.array(masks, dtype=bool).reshape(len(masks), len(cluster.nodes))


def build_features(state: QueueState, max_queue: int = MAX_QUEUE_SIZE) -> QueueFeatures:
    """Builds the Table 3 features of the ``max_queue`` oldest queued jobs and samples the OV/CV.

    Nodes in the same state (type, VC, capacity, free GPUs/CPUs/memory) are merged first, so the
    cost grows with the number of distinct node states, not with the cluster size.
    """
    queue = np.asarray(state.queue)[:max_queue]
    jobs, cluster, free = state.jobs, state.cluster, state.cluster_state
    n = len(queue)
    gpus = jobs.num_gpus[queue].astype(np.float64)
    requested = np.maximum(jobs.requested_time_s[queue], 1.0)
    wait = np.maximum(state.now_s - jobs.submit_time_s[queue], 0.0)
    cpus, memory = jobs.cpus[queue], jobs.memory_mib[queue]

    # Distinct node states (rows) and, per job group, which rows are eligible.
    node_rows = np.column_stack(
        (
            cluster.node_type_code,
            cluster.node_vc_code,
            cluster.node_gpus,
            free.free_gpus,
            free.free_cpus,
            free.free_memory_mib,
        )
    ).astype(np.float64)
    rows, first, count = np.unique(node_rows, axis=0, return_index=True, return_counts=True)
    group, masks = _eligibility(state, queue)
    eligible = masks[:, first][group]  # (jobs, rows)
    row_gpus, row_free = rows[:, 2], rows[:, 3]
    row_cpus, row_memory = rows[:, 4], rows[:, 5]

    # How many of each job's GPUs a node in each row can host (CPU and memory shares bound it).
    per_gpu = np.maximum(gpus, 1.0)[:, None]
    cap = np.broadcast_to(row_free, (n, len(rows))).copy()
    with np.errstate(divide="ignore", invalid="ignore"):
        cpu_cap = np.where(
            cpus[:, None] > 0, np.floor(row_cpus / (cpus[:, None] / per_gpu) + 1e-9), np.inf
        )
        mem_cap = np.where(
            memory[:, None] > 0, np.floor(row_memory / (memory[:, None] / per_gpu) + 1e-9), np.inf
        )
    cap = np.minimum(np.minimum(cap, cpu_cap), mem_cap)
    cpu_only = gpus == 0
    if cpu_only.any():  # a CPU-only job needs its CPUs and memory on one node
        cap[cpu_only] = np.minimum(cpu_cap[cpu_only], mem_cap[cpu_only])
    cap = np.where(eligible, np.maximum(cap, 0.0), 0.0)
    need = np.maximum(gpus, 1.0)[:, None]
    whole = cap >= need
    nodes_that_fit = (whole * count).sum(axis=1)
    types_that_fit = np.zeros(n)
    for code in range(len(cluster.gpu_types)):
        in_type = rows[:, 0] == code
        types_that_fit += (cap[:, in_type] * count[in_type]).sum(axis=1) >= gpus
    spanning = ~cpu_only & (nodes_that_fit == 0)
    ways = np.where(spanning, types_that_fit, nodes_that_fit)
    can_start = ways > 0

    # Eligible-pool aggregates: capacity, free GPUs, fully free nodes, fragmentation.
    eligible_count = eligible * count
    capacity = eligible_count @ row_gpus
    free_gpus = eligible_count @ row_free
    free_nodes = eligible_count @ ((row_free == row_gpus) & (row_gpus > 0)).astype(np.float64)
    n_eligible = eligible_count.sum(axis=1)
    node_free = free.free_gpus.astype(np.float64)
    pool_cff = np.zeros(n)
    for g in np.unique(group):  # eq. 3 per eligible pool
        pool_cff[group == g] = fragmentation_factor(node_free[masks[g]])
    cluster_cff = fragmentation_factor(node_free)

    # Eq. 1 squashed to x / (1 + x) = req / (req + free): 1 when nothing eligible is free.
    dsr_norm = np.divide(gpus, gpus + free_gpus, out=np.ones(n), where=gpus + free_gpus > 0)
    # Eq. 2: eligible GPUs left free if the job started now, over the eligible capacity.
    future = np.divide(free_gpus - gpus, capacity, out=np.full(n, -1.0), where=capacity > 0)
    total_gpus = max(cluster.total_gpus, 1)
    size = np.log1p(gpus * requested) / np.log1p(total_gpus * REFERENCE_TIME_S)
    mean_requested = float(requested.mean()) if n else 1.0
    oldest_wait = float(wait.max(initial=0.0))
    # Submission order within the visible queue: 0 = the oldest job, 1 = submitted just now.
    submit_position = 1.0 - wait / oldest_wait if oldest_wait > 0 else np.zeros(n)
    biggest_cpus = float(np.max(cluster.node_cpus[np.isfinite(cluster.node_cpus)], initial=0.0))
    biggest_memory = float(
        np.max(cluster.node_memory_mib[np.isfinite(cluster.node_memory_mib)], initial=0.0)
    )
    table = {
        "requested_gpus": np.minimum(np.log1p(gpus) / np.log1p(total_gpus), 1.0),
        "requested_time": log_time(requested),
        "submit_time": submit_position,
        "wait_time": log_time(wait),
        "req_cpu": np.clip(cpus / biggest_cpus, 0, 1) if biggest_cpus > 0 else np.zeros(n),
        "req_mem": np.clip(memory / biggest_memory, 0, 1) if biggest_memory > 0 else np.zeros(n),
        "free_nodes": np.divide(free_nodes, n_eligible, out=np.zeros(n), where=n_eligible > 0),
        "can_schedule_now": can_start.astype(np.float64),
        "num_ways_to_schedule": np.log1p(ways) / np.log1p(len(cluster.nodes)),
        "demand_supply_ratio": dsr_norm,
        "job_size": np.clip(size, 0.0, 1.0),
        "job_urgency": wait / (wait + mean_requested),
        "future_availability": (np.clip(future, -1.0, 1.0) + 1.0) / 2.0,
        "fragmentation_factor": pool_cff,
    }
    # Heuristic sampling (section 3.2): the state's fragmentation picks slot 6, flexibility slot 7.
    regime = "job_size" if cluster_cff >= CFF_HIGH else "job_urgency"
    several = ways > 1
    slot7 = np.where(several, table["num_ways_to_schedule"], table["free_nodes"])
    sampled = (
        "requested_time",
        "wait_time",
        "requested_gpus",
        "can_schedule_now",
        "demand_supply_ratio",
        "future_availability",
        regime,
        "num_ways_or_free_nodes",
    )
    observation = np.zeros((max_queue, OBS_FEATURES), dtype=np.float32)
    columns = [table[name] for name in sampled[:7]] + [slot7]
    observation[:n] = np.column_stack(columns)
    critic = np.zeros((max_queue, CRITIC_FEATURES), dtype=np.float32)
    critic_columns = [table[name] for name in CRITIC_NAMES[:4]] + [np.full(n, cluster_cff)]
    critic[:n] = np.column_stack(critic_columns)
    valid = np.zeros(max_queue, dtype=bool)
    valid[:n] = True
    start_mask = np.zeros(max_queue, dtype=bool)
    start_mask[:n] = can_start
    return QueueFeatures(queue, table, observation, critic, valid, start_mask, cluster_cff, sampled)
