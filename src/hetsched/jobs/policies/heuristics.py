"""The heuristic priority policies (Table 5, Slurm multifactor, QSSF) and their registry.

Every policy maps a read-only :class:`~hetsched.jobs.policies.queue_state.QueueState` snapshot
(the waiting jobs' columns, the cluster's free resources, the completed-job history, the
simulated time) to one score per queued job. The simulator orders the queue by score (ties:
earlier submission first) and hands jobs to the placer in that order. The RL prioritiser
(:mod:`hetsched.jobs.rl.policy`) is just another policy with this signature.

Formulas follow the paper's Table 5 with these definitions (all documented choices):
- ``rt`` is the *requested* time (user estimate, or the estimate model's value), never the true
  run time unless the ``oracle`` estimate was chosen explicitly;
- ``wt`` is the job's current waiting time ``now - submit`` (RLTune's code read a scheduled time
  that is unset for waiting jobs, so WFP3/UNICEP saw a wrong or negative wait);
- ``nt`` is the number of GPUs (processors for CPU traces), at least 1;
- UNICEP divides by ``log2(nt + 1)`` because ``log2(1) = 0`` would divide by zero for the
  commonest job size (a crash in RLTune's baselines).

A policy whose score depends on nothing but the job's own columns (FCFS, SJF, F1) says so with
``static_scores = True``: the simulator then scores each job once, on arrival, instead of the
whole queue at every pass (:mod:`hetsched.jobs.sim.waiting_queue`); the order is the same.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hetsched.core.errors import DataError
from hetsched.core.registry import Registry
from hetsched.jobs.policies.queue_state import PriorityPolicy, QueueState

PRIORITY_POLICIES: Registry = Registry("priority policy")


@PRIORITY_POLICIES.register("fcfs")
class FCFS:
    """First come, first served: score = submit time (Table 5, ``st``)."""

    name = "fcfs"
    static_scores = True

    def score(self, state: QueueState) -> np.ndarray:
        """Earlier submission first."""
        return state.submit_time_s


@PRIORITY_POLICIES.register("sjf")
class SJF:
    """Shortest (requested) job first: score = ``rt`` (Table 5)."""

    name = "sjf"
    static_scores = True

    def score(self, state: QueueState) -> np.ndarray:
        """Shorter requested time first."""
        return state.requested_time_s


@PRIORITY_POLICIES.register("wfp3")
class WFP3:
    """WFP3 (Tang et al.): score = ``-(wt / rt)^3 * nt`` (Table 5): long waits relative to the
    requested time, times size, go first."""

    name = "wfp3"

    def score(self, state: QueueState) -> np.ndarray:
        """Table 5, WFP3 row."""
        return -((state.wait_time_s / state.requested_time_s) ** 3) * state.num_gpus


@PRIORITY_POLICIES.register("unicep")
class UNICEP:
    """UNICEP (Tang et al.): score = ``-wt / (log2(nt + 1) * rt)`` (Table 5, with +1 so a
    1-GPU job does not divide by zero)."""

    name = "unicep"

    def score(self, state: QueueState) -> np.ndarray:
        """Table 5, UNICEP row."""
        return -state.wait_time_s / (np.log2(state.num_gpus + 1.0) * state.requested_time_s)


@PRIORITY_POLICIES.register("f1")
class F1:
    """F1 (Carastan-Santos & de Camargo): score = ``log10(rt) * nt + 870 * log10(st)``
    (Table 5); ``st`` is floored at 1 s so the first job of a window is defined."""

    name = "f1"
    static_scores = True

    def score(self, state: QueueState) -> np.ndarray:
        """Table 5, F1 row."""
        st = np.maximum(state.submit_time_s, 1.0)
        return np.log10(state.requested_time_s) * state.num_gpus + 870.0 * np.log10(st)


@PRIORITY_POLICIES.register("slurm")
@dataclass
class SlurmMultifactor:
    """Slurm's multifactor priority (``priority/multifactor``), section 5.4.

    priority = w_age * age + w_fairshare * fairshare + w_job_size * size + w_partition * part
    + w_qos * qos, each factor in [0, 1]; score = -priority. Factors:

    - age = min(wait / max_age_s, 1) (``PriorityMaxAge``);
    - fairshare = 2^(-U / S) (Slurm's classic formula), U = the user's share of decayed GPU usage
      so far, S = 1 / number of users (equal shares);
    - size = GPUs / cluster GPUs, or 1 - that with ``favor_small`` (``PriorityFavorSmall``);
    - partition = ``partition_tiers[vc] / max tier`` (1 for all when none is configured);
    - qos = ``qos_levels[qos] / max level`` (0 for an unknown QoS).

    The paper sets every weight to 1000; those are the defaults.
    """

    name: str = "slurm"
    w_age: float = 1000.0
    w_fairshare: float = 1000.0
    w_job_size: float = 1000.0
    w_partition: float = 1000.0
    w_qos: float = 1000.0
    max_age_s: float = 7 * 86400.0
    favor_small: bool = False
    partition_tiers: dict[str, float] = field(default_factory=dict)
    qos_levels: dict[str, float] = field(default_factory=dict)

    def score(self, state: QueueState) -> np.ndarray:
        """Negated weighted sum of the five factors."""
        q = state.queue
        age = np.minimum(state.wait_time_s / self.max_age_s, 1.0)
        usage = state.history.decayed_usage_gpu_s(state.now_s)
        total = usage.sum()
        if total > 0:
            share_used = usage[state.user_codes[q]] / total
            fairshare = np.power(2.0, -share_used * len(usage))
        else:
            fairshare = np.ones(len(q))
        size = state.jobs.num_gpus[q] / max(state.cluster.total_gpus, 1)
        if self.favor_small:
            size = 1.0 - size
        partition = self._lookup(state.jobs.virtual_cluster[q], self.partition_tiers, 1.0)
        qos = self._lookup(state.jobs.qos[q], self.qos_levels, 0.0)
        priority = (
            self.w_age * age
            + self.w_fairshare * fairshare
            + self.w_job_size * size
            + self.w_partition * partition
            + self.w_qos * qos
        )
        return -priority

    @staticmethod
    def _lookup(keys: np.ndarray, table: dict[str, float], default: float) -> np.ndarray:
        if not table:
            return np.full(len(keys), default)
        top = max(table.values()) or 1.0
        return np.array([table.get(k, 0.0) / top for k in keys.tolist()], dtype=np.float64)


@PRIORITY_POLICIES.register("qssf")
@dataclass
class QSSF:
    """Quasi-Shortest-Service-First (Helios, Hu et al. SC'21): score = GPUs x expected duration.

    The expected duration comes from ``priority_file`` when given (CSV ``job_id,duration_s``,
    e.g. the published Helios predictions) and otherwise from history: the mean run time of the
    user's completed jobs with the same GPU count, else the user's mean, else the global mean,
    else the requested time. Jobs missing from the file use the history estimate.
    """

    name: str = "qssf"
    priority_file: str | None = None
    _durations: dict[str, float] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.priority_file is not None:
            self._durations = read_priority_file(Path(self.priority_file))

    def score(self, state: QueueState) -> np.ndarray:
        """GPU-seconds of expected service."""
        q = state.queue
        expected = state.history.mean_run_time_s(
            state.user_codes[q], state.jobs.num_gpus[q], state.requested_time_s
        )
        if self._durations:
            ids = state.jobs.id[q].tolist()
            for i, job_id in enumerate(ids):
                if job_id in self._durations:
                    expected[i] = self._durations[job_id]
        return state.num_gpus * expected


def read_priority_file(path: Path) -> dict[str, float]:
    """Reads ``job_id,duration_s`` rows (an optional header line is skipped).

    Raises:
        DataError: Naming the file, line and field of a bad row.
    """
    if not path.is_file():
        raise DataError("priority file not found", path=str(path))
    out: dict[str, float] = {}
    with path.open(newline="") as handle:
        for line_no, row in enumerate(csv.reader(handle), start=1):
            if not row or (line_no == 1 and row[0].strip().lower() in ("job_id", "id")):
                continue
            if len(row) < 2:
                raise DataError("expected job_id,duration_s", path=str(path), line=line_no)
            try:
                out[row[0].strip()] = float(row[1])
            except ValueError:
                raise DataError(
                    f"not a number: {row[1]!r}", path=str(path), line=line_no, field="duration_s"
                ) from None
    return out


def make_policy(name: str, **options: object) -> PriorityPolicy:
    """Instantiates the policy registered as ``name``; an unknown name lists the known ones."""
    policy: PriorityPolicy = PRIORITY_POLICIES.create(name, **options)
    return policy
