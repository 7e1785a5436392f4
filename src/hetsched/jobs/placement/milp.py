"""MILP placement among candidate placements with top-K look-ahead (RLTune Algorithm 1).

Algorithm 1 picks one of two ways (spread or pack) with a binary variable under per-node GPU, CPU
and memory limits and maximises GPU occupancy. Its objective cannot tell the ways apart (both
occupy the job's GPUs), which is why RLTune's fragmentation term is inert. Here:

- the choice set is :func:`~hetsched.jobs.placement.candidate_placements` (pack and spread on the
  fewest nodes and on one more), one binary ``x_c`` per distinct candidate, ``Σ x_c = 1``
  (Algorithm 1 lines 1-14 with more than two ways);
- the look-ahead (the text after Algorithm 1): the next ``lookahead_jobs`` jobs in priority order
  get binaries ``z_ka`` = "job k would still fit whole on node a after our choice"; every node the
  candidates touch must hold the chosen candidate plus the look-ahead jobs assigned to it, GPUs,
  CPUs and memory each (lines 15-20). Look-ahead jobs that fit on a node no candidate touches are
  assigned there first (greedily, in priority order), and jobs that fit on no touched node even
  now are left out: in both cases their room does not depend on the choice;
- the objective, minimised: ``w_frag · fragmentation(c) + w_imb · imbalance(c) −
  w_room · Σ_k Σ_a z_ka / (k + 1)``, where fragmentation is eq. 3 over the job's eligible nodes
  after placing ``c`` and imbalance is the mean absolute deviation of their GPU utilisation. Each
  term changes the choice in some case (``tests/jobs/placement/test_milp.py`` builds one per term).

The solver runs only when more than one distinct candidate exists and some look-ahead job competes
for the nodes they touch (otherwise the optimum is the argmin of the candidates' constant costs,
taken directly). HiGHS through
``scipy.optimize.milp`` is the default; ``solver="glpk_mi"`` solves the same matrices with CVXPY
and GLPK_MI (the paper's solver), and ``solver="glpk"`` hands them to GLPK through cvxopt without
CVXPY's compile step (the same solver, ~0.1 ms for these sizes against HiGHS's per-call overhead of
several ms; see ``benchmarks/RESULTS.md``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from hetsched.core.errors import ConfigError, HetschedError
from hetsched.jobs.cluster.model import Allocation
from hetsched.jobs.cluster.state import ClusterState, fragmentation_factor
from hetsched.jobs.placement.placers import JobRequest, candidate_placements, capacity_per_node

SOLVERS: tuple[str, ...] = ("highs", "glpk_mi", "glpk")
#: Added per candidate index so that exact ties resolve to the earliest candidate (pack on the
#: fewest nodes), whichever solver runs.
TIE_BREAK = 1e-6


@dataclass(frozen=True)
class ObjectiveWeights:
    """Weights of the three objective terms (all >= 0).

    Attributes:
        fragmentation: Eq. 3 over the job's eligible nodes after the placement (favours packing).
        imbalance: Mean absolute deviation of those nodes' GPU utilisation (favours spreading,
            which also eases intra-node contention).
        room: Value of keeping room for the next job in priority order (the k-th counts 1/(k+1)).
    """

    fragmentation: float = 1.0
    imbalance: float = 1.0
    room: float = 1.0

    def __post_init__(self) -> None:
        for name in ("fragmentation", "imbalance", "room"):
            if getattr(self, name) < 0:
                raise ConfigError(f"MILP weight {name} must be >= 0, got {getattr(self, name)}")


@dataclass
class PlacementProblem:
    """min c·v subject to lower <= A v <= upper, v binary; v = (x_c..., z_ka...)."""

    cost: np.ndarray
    matrix: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    num_candidates: int


def _after(state: ClusterState, allocation: Allocation) -> np.ndarray:
    free = state.free_gpus.astype(np.float64).copy()
    free[allocation.node_indices] -= allocation.gpus
    return free


def candidate_costs(
    request: JobRequest,
    state: ClusterState,
    candidates: Sequence[Allocation],
    weights: ObjectiveWeights,
) -> np.ndarray:
    """The fragmentation and imbalance part of the objective for each candidate."""
    pool = np.flatnonzero(request.eligible & (state.cluster.node_gpus > 0))
    capacity = state.cluster.node_gpus[pool].astype(np.float64)
    costs = np.empty(len(candidates))
    for i, allocation in enumerate(candidates):
        free = _after(state, allocation)[pool]
        utilisation = 1.0 - free / capacity
        imbalance = float(np.abs(utilisation - utilisation.mean()).mean()) if len(pool) else 0.0
        costs[i] = (
            weights.fragmentation * fragmentation_factor(free)
            + weights.imbalance * imbalance
            + TIE_BREAK * i
        )
    return costs


def build_problem(
    request: JobRequest,
    state: ClusterState,
    candidates: Sequence[Allocation],
    upcoming: Sequence[JobRequest],
    weights: ObjectiveWeights,
) -> PlacementProblem:
    """The MILP of the module docstring for ``candidates`` and the look-ahead jobs ``upcoming``."""
    touched = np.unique(np.concatenate([a.node_indices for a in candidates]))
    # Look-ahead jobs that fit whole on an untouched node keep their room whatever we choose.
    outside = state.copy()
    outside.free_gpus[touched] = 0
    outside.free_cpus[touched] = 0
    outside.free_memory_mib[touched] = 0
    contested: list[tuple[int, JobRequest]] = []
    for rank, job in enumerate(upcoming):
        cap = capacity_per_node(job, outside)
        need = max(job.num_gpus, 1)
        hosts = np.flatnonzero(cap >= need)
        if len(hosts):
            node = hosts[np.argmin(outside.free_gpus[hosts])]
            outside.free_gpus[node] -= job.num_gpus
            outside.free_cpus[node] -= job.cpus
            outside.free_memory_mib[node] -= job.memory_mib
        elif (capacity_per_node(job, state)[touched] >= need).any():
            contested.append((rank, job))  # its room depends on our choice
        # else: it fits on no touched node even now, so no choice can give it room there
    n_c, n_a = len(candidates), len(touched)
    n_vars = n_c + len(contested) * n_a
    cost = np.zeros(n_vars)
    cost[:n_c] = candidate_costs(request, state, candidates, weights)
    rows: list[np.ndarray] = []
    lower: list[float] = []
    upper: list[float] = []

    def add(row: np.ndarray, lo: float, hi: float) -> None:
        rows.append(row)
        lower.append(lo)
        upper.append(hi)

    one_choice = np.zeros(n_vars)
    one_choice[:n_c] = 1.0
    add(one_choice, 1.0, 1.0)  # exactly one way (Algorithm 1, x)
    usage = {
        "gpus": np.zeros((n_c, n_a)),
        "cpus": np.zeros((n_c, n_a)),
        "memory_mib": np.zeros((n_c, n_a)),
    }
    position = {int(node): i for i, node in enumerate(touched)}
    for c, allocation in enumerate(candidates):
        for k, node in enumerate(allocation.node_indices.tolist()):
            usage["gpus"][c, position[node]] = allocation.gpus[k]
            usage["cpus"][c, position[node]] = allocation.cpus[k]
            usage["memory_mib"][c, position[node]] = allocation.memory_mib[k]
    free = {
        "gpus": state.free_gpus[touched].astype(np.float64),
        "cpus": state.free_cpus[touched],
        "memory_mib": state.free_memory_mib[touched],
    }
    demand = {
        "gpus": [float(job.num_gpus) for _, job in contested],
        "cpus": [job.cpus for _, job in contested],
        "memory_mib": [job.memory_mib for _, job in contested],
    }
    for k, (rank, job) in enumerate(contested):
        start = n_c + k * n_a
        cost[start : start + n_a] = -weights.room / (rank + 1)  # room for the next jobs
        fits_empty = job.eligible[touched] & (state.cluster.node_gpus[touched] >= job.num_gpus)
        pick = np.zeros(n_vars)
        pick[start : start + n_a] = 1.0
        add(pick, 0.0, 1.0)  # each look-ahead job on at most one node
        for a in np.flatnonzero(~fits_empty).tolist():  # ineligible or too small: z_ka = 0
            never = np.zeros(n_vars)
            never[start + a] = 1.0
            add(never, 0.0, 0.0)
    for resource in ("gpus", "cpus", "memory_mib"):  # per-node limits (Algorithm 1, lines 15-20)
        for a in range(n_a):
            if not np.isfinite(free[resource][a]):
                continue
            row = np.zeros(n_vars)
            row[:n_c] = usage[resource][:, a]
            for k in range(len(contested)):
                row[n_c + k * n_a + a] = demand[resource][k]
            add(row, -np.inf, float(free[resource][a]) + 1e-9)
    return PlacementProblem(cost, np.array(rows), np.array(lower), np.array(upper), n_c)


def solve(problem: PlacementProblem, solver: str = "highs") -> int:
    """Index of the chosen candidate.

    Raises:
        ConfigError: For an unknown solver.
        HetschedError: If the solver reports no optimal solution (the problem is always feasible:
            the first candidate with no look-ahead room is a solution).
    """
    if solver == "highs":
        from scipy.optimize import Bounds, LinearConstraint, milp

        result = milp(
            problem.cost,
            integrality=np.ones(len(problem.cost)),
            bounds=Bounds(0, 1),
            constraints=LinearConstraint(problem.matrix, problem.lower, problem.upper),
        )
        if result.status != 0 or result.x is None:
            raise HetschedError(f"HiGHS found no placement: {result.message}")
        values = result.x
    elif solver == "glpk_mi":
        import cvxpy as cp

        v = cp.Variable(len(problem.cost), boolean=True)
        bounded = np.isfinite(problem.lower)
        constraints = [problem.matrix @ v <= problem.upper]
        if bounded.any():
            constraints.append(problem.matrix[bounded] @ v >= problem.lower[bounded])
        cvx = cp.Problem(cp.Minimize(problem.cost @ v), constraints)
        cvx.solve(solver=cp.GLPK_MI)
        if v.value is None:
            raise HetschedError(f"GLPK_MI found no placement: status {cvx.status}")
        values = v.value
    elif solver == "glpk":
        from cvxopt import glpk, matrix

        equal = problem.lower == problem.upper
        upper = ~equal & np.isfinite(problem.upper)
        lower = ~equal & np.isfinite(problem.lower)
        g = np.vstack((problem.matrix[upper], -problem.matrix[lower]))
        h = np.concatenate((problem.upper[upper], -problem.lower[lower]))
        glpk.options["msg_lev"] = "GLP_MSG_OFF"
        status, x = glpk.ilp(
            matrix(problem.cost),
            matrix(g),
            matrix(h),
            matrix(problem.matrix[equal]),
            matrix(problem.upper[equal]),
            set(),
            set(range(len(problem.cost))),
        )
        if status != "optimal" or x is None:
            raise HetschedError(f"GLPK found no placement: status {status}")
        values = np.asarray(x).ravel()
    else:
        raise ConfigError(f"unknown MILP solver {solver!r}; known: {', '.join(SOLVERS)}")
    return int(np.argmax(values[: problem.num_candidates]))


@dataclass
class MILPPlacer:
    """Chooses among candidate placements with the MILP of the module docstring (registered in
    ``PLACERS`` as ``milp``).

    Args:
        lookahead_jobs: K, how many next jobs in priority order the MILP keeps room for; the
            simulator passes them through :meth:`set_lookahead` before each placement.
        weights: Objective weights.
        solver: ``highs`` (scipy), ``glpk_mi`` (CVXPY) or ``glpk`` (cvxopt, no CVXPY).
        extra_nodes: Candidates use up to this many nodes more than the fewest.
    """

    lookahead_jobs: int = 8
    weights: ObjectiveWeights = field(default_factory=ObjectiveWeights)
    solver: str = "highs"
    extra_nodes: int = 1
    name: str = "milp"
    solver_calls: int = field(default=0, init=False)
    """MILPs handed to the solver so far (placements that needed one)."""
    _upcoming: list[JobRequest] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.solver not in SOLVERS:
            raise ConfigError(f"unknown MILP solver {self.solver!r}; known: {', '.join(SOLVERS)}")
        if self.lookahead_jobs < 0 or self.extra_nodes < 0:
            raise ConfigError("lookahead_jobs and extra_nodes must be >= 0")

    def set_lookahead(self, upcoming: Sequence[JobRequest]) -> None:
        """The next jobs in priority order, used by the next :meth:`place` call only."""
        self._upcoming = list(upcoming)[: self.lookahead_jobs]

    def place(self, request: JobRequest, state: ClusterState) -> Allocation | None:
        """The best candidate placement, or None when the job does not fit now."""
        upcoming, self._upcoming = self._upcoming, []
        candidates = candidate_placements(request, state, self.extra_nodes)
        if len(candidates) <= 1:  # one way or none: nothing to optimise, no solver call
            return candidates[0] if candidates else None
        problem = build_problem(request, state, candidates, upcoming, self.weights)
        if len(problem.cost) == problem.num_candidates:
            # No look-ahead job competes for the touched nodes: the MILP is "pick one x_c" with
            # constant costs, whose optimum is their argmin (exact, and ~100x cheaper than HiGHS).
            return candidates[int(np.argmin(problem.cost))]
        self.solver_calls += 1
        return candidates[solve(problem, self.solver)]
