"""MILP placement (Algorithm 1 with look-ahead): pack vs spread on constructed cases, the effect of
every objective term, both solvers, and the placer inside the simulator."""

from __future__ import annotations

import numpy as np
import pytest

from hetsched.core.errors import ConfigError
from hetsched.jobs.cluster.model import Cluster, Node
from hetsched.jobs.cluster.state import ClusterState
from hetsched.jobs.placement.milp import MILPPlacer, ObjectiveWeights, build_problem, solve
from hetsched.jobs.placement.placers import JobRequest, candidate_placements
from hetsched.jobs.placement.registry import PLACERS
from hetsched.jobs.policies.heuristics import make_policy
from hetsched.jobs.sim.config import SimulationConfig
from hetsched.jobs.sim.simulator import Simulator
from hetsched.jobs.traces.job_table import Job, JobTable


def _state(free_gpus: list[int], gpus_per_node: int = 8, cpus: float = np.inf) -> ClusterState:
    cluster = Cluster([Node(f"n{i}", "V100", gpus_per_node, cpus) for i in range(len(free_gpus))])
    state = ClusterState(cluster)
    state.free_gpus[:] = free_gpus
    return state


def _job(gpus: int, n: int, cpus: float = 0.0) -> JobRequest:
    return JobRequest(gpus, cpus, 0.0, np.ones(n, dtype=bool))


def _choose(free, gpus, upcoming, weights=ObjectiveWeights(), solver="highs", cpus=np.inf):
    state = _state(free, cpus=cpus)
    placer = MILPPlacer(weights=weights, solver=solver)
    placer.set_lookahead([_job(g, len(free)) for g in upcoming])
    allocation = placer.place(_job(gpus, len(free)), state)
    return allocation.key(), placer.solver_calls


def _without(term: str) -> ObjectiveWeights:
    weights = {"fragmentation": 1.0, "imbalance": 1.0, "room": 1.0}
    weights[term] = 0.0
    return ObjectiveWeights(**weights)


# (free GPUs per 8-GPU node, job GPUs, look-ahead GPUs, choice with all terms, without the term)
TERM_CASES = {
    # Best fit on the 2-free node keeps the 5- and 4-free nodes intact: less fragmentation.
    "fragmentation": ([5, 4, 2], 1, [2], ((2, 1),), ((0, 1),)),
    # Splitting 4 GPUs 3 + 1 over the two emptiest nodes evens out utilisation.
    "imbalance": ([5, 7, 6], 4, [4], ((1, 3), (2, 1)), ((0, 4),)),
    # The next job needs a whole node: keep node 0 empty.
    "room": ([8, 7], 1, [8], ((1, 1),), ((0, 1),)),
}


@pytest.mark.parametrize("term", sorted(TERM_CASES))
def test_every_objective_term_changes_the_choice(term):
    free, gpus, upcoming, with_term, without_term = TERM_CASES[term]
    assert _choose(free, gpus, upcoming)[0] == with_term
    assert _choose(free, gpus, upcoming, _without(term))[0] == without_term


@pytest.mark.parametrize("solver", ["glpk_mi", "glpk"])
@pytest.mark.parametrize("term", sorted(TERM_CASES))
def test_glpk_agrees_with_highs(term, solver):
    free, gpus, upcoming, with_term, _ = TERM_CASES[term]
    assert _choose(free, gpus, upcoming, solver=solver)[0] == with_term


def test_pack_when_the_next_job_needs_a_whole_node():
    # Two empty nodes and one half-full: a 4-GPU job goes onto the half-full node (pack), so
    # two 8-GPU look-ahead jobs still fit.
    choice, calls = _choose([8, 8, 4], 4, [8, 8])
    assert choice == ((2, 4),) and calls == 1


def test_spread_when_balance_is_what_counts():
    # No look-ahead and imbalance weighted up: the job is split evenly across two empty nodes.
    weights = ObjectiveWeights(fragmentation=0.0, imbalance=1.0, room=0.0)
    choice, _ = _choose([8, 8], 4, [], weights)
    assert choice == ((0, 2), (1, 2))
    # Fragmentation alone packs it on one node.
    weights = ObjectiveWeights(fragmentation=1.0, imbalance=0.0, room=0.0)
    assert _choose([8, 8], 4, [], weights)[0] == ((0, 4),)


def test_lookahead_respects_cpu_limits():
    # Imbalance alone puts this 2-GPU, 4-CPU job on node 0 (the emptier one). A next job needing
    # 13 CPUs fits only on node 0 (16 free CPUs), so with it in the look-ahead the choice must
    # leave >= 13 CPUs there: the 1 + 1 split (2 CPUs on node 0) keeps the room and is still
    # better balanced than putting everything on node 1.
    def choose(next_cpus: float):
        state = _state([8, 6], cpus=16.0)
        state.free_cpus[:] = [16.0, 4.0]
        placer = MILPPlacer(weights=ObjectiveWeights(fragmentation=0.0, imbalance=1.0, room=5.0))
        placer.set_lookahead([_job(4, 2, cpus=next_cpus)])
        return placer.place(_job(2, 2, cpus=4.0), state).key()

    assert choose(0.0) == ((0, 2),)
    assert choose(13.0) == ((0, 1), (1, 1))


def test_no_solver_call_with_a_single_way_and_none_when_nothing_fits():
    state = _state([8])
    placer = MILPPlacer()
    assert len(candidate_placements(_job(8, 1), state)) == 1
    assert placer.place(_job(8, 1), state).key() == ((0, 8),)
    assert placer.solver_calls == 0
    assert placer.place(_job(8, 1), _state([4])) is None
    assert placer.solver_calls == 0


def test_argmin_shortcut_equals_the_solver_without_contested_lookahead():
    # Without look-ahead jobs competing for the touched nodes the MILP has only the x_c; the
    # placer takes the argmin of their costs directly. Both solvers must agree with it.
    state = _state([5, 4, 2, 8])
    request = _job(2, 4)
    candidates = candidate_placements(request, state)
    problem = build_problem(request, state, candidates, [], ObjectiveWeights())
    assert len(problem.cost) == problem.num_candidates == len(candidates) > 1
    expected = int(np.argmin(problem.cost))
    assert (
        solve(problem, "highs") == solve(problem, "glpk_mi") == solve(problem, "glpk") == expected
    )
    placer = MILPPlacer()
    assert placer.place(request, state).key() == candidates[expected].key()
    assert placer.solver_calls == 0


def test_lookahead_is_used_once():
    placer = MILPPlacer()
    placer.set_lookahead([_job(8, 2)])
    placer.place(_job(1, 2), _state([8, 7]))
    assert placer._upcoming == []


def test_bad_options_are_rejected():
    with pytest.raises(ConfigError, match="unknown MILP solver 'cplex'"):
        MILPPlacer(solver="cplex")
    with pytest.raises(ConfigError, match="room must be >= 0"):
        ObjectiveWeights(room=-1.0)


def test_registered_placer_runs_in_the_simulator_with_lookahead(hetero_cluster):
    placer = PLACERS.create("milp", lookahead_jobs=4)
    assert isinstance(placer, MILPPlacer)
    rng = np.random.default_rng(3)
    jobs = JobTable.from_jobs(
        [
            Job(f"j{i}", float(i * 30), float(rng.integers(100, 2000)), int(rng.choice([1, 2, 4])),
                requested_time_s=1000.0)
            for i in range(60)
        ]
    )  # fmt: skip
    seen: list[int] = []
    original = placer.set_lookahead

    def spy(upcoming):
        seen.append(len(upcoming))
        original(upcoming)

    placer.set_lookahead = spy
    config = SimulationConfig(placer=placer)
    result = Simulator(jobs, hetero_cluster, make_policy("fcfs"), config).run()
    assert result.finished.all()
    assert placer.solver_calls > 0
    assert max(seen) <= 4 and sum(seen) > 0
