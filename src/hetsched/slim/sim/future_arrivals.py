"""Futures a router could expect: arrivals drawn from the scenario's process, not its workload.

Beyond the paper (issue 19). A rollout over the workload's own future arrivals is clairvoyant:
on bursty-3x it switched among the six advisor rules to 99.88 % of the deadlines at +0.7 points of
accuracy over the rule with as many, and nothing cloned from it kept the gain, because its choices
follow bursts no observation shows. :class:`FutureSampler` gives a lookahead only what a router
can know at the moment it decides: the time, the arrivals so far and the arrival process of the
scenario (its rate, burstiness and ramp, which an operator knows or estimates). It replaces, in a
*copy* of the cluster, every arrival not yet admitted by a draw from that process from now on, and
the future images' difficulties by fresh ones.

The process is memoryless where it can be: Poisson arrivals restart at any moment; a bursty
(on/off) process is in an ON period when an image arrived within :data:`ON_GAPS` mean ON gaps
(at 12x a server's capacity such a gap is a fraction of a millisecond, and an OFF period lasts
tens of milliseconds, so the phase is plain to see), and both periods are exponential, so the
rest of the period is drawn afresh; a diurnal ramp goes on from the point of its cycle now is on.
"""

from __future__ import annotations

import numpy as np

from hetsched.slim.cluster.accuracy_oracle import TableAccuracy
from hetsched.slim.cluster.bookkeeping import ClusterBookkeeping
from hetsched.slim.sim.scenario import ScenarioConfig, arrival_rate_per_s
from hetsched.slim.sim.workload import arrival_times_s

ON_GAPS = 5.0
"""A bursty process counts as ON when the last arrival is at most this many mean ON gaps old."""


class FutureSampler:
    """Draws the rest of a cluster's workload from ``scenario``'s arrival process.

    Args:
        scenario: The scenario whose process (rate, pattern, burst or ramp) to draw from.
    """

    def __init__(self, scenario: ScenarioConfig) -> None:
        self.scenario = scenario
        self.rate_per_s = arrival_rate_per_s(scenario)

    def bursting(self, now_s: float, last_arrival_s: float | None) -> bool:
        """Whether a bursty process is in an ON period, judged from the last arrival."""
        if last_arrival_s is None:
            return True  # the process starts with an ON period
        on_gap_s = 1.0 / (self.scenario.burst_factor * self.rate_per_s)
        return now_s - last_arrival_s <= ON_GAPS * on_gap_s

    def draw(
        self, now_s: float, last_arrival_s: float | None, count: int, rng: np.random.Generator
    ) -> np.ndarray:
        """``count`` sorted arrival times after ``now_s``, given the last arrival so far."""
        scenario = self.scenario
        start_s = now_s
        if scenario.arrival == "bursty" and not self.bursting(now_s, last_arrival_s):
            start_s += rng.exponential((scenario.burst_factor - 1.0) * scenario.burst_s)
        return arrival_times_s(
            rng,
            self.rate_per_s,
            scenario.arrival,
            count=count,
            burst_s=scenario.burst_s,
            burst_factor=scenario.burst_factor,
            period_s=scenario.diurnal_period_s,
            amplitude=scenario.diurnal_amplitude,
            start_s=start_s,
        )

    def resample(self, cluster: ClusterBookkeeping, rng: np.random.Generator) -> None:
        """Replaces ``cluster``'s future (a copy's: the arrivals not yet admitted and those
        images' difficulties) by a draw given what a router can see now."""
        remaining = cluster.images_to_arrive
        if remaining == 0:
            return
        now_s, last_s = cluster.clock.now_s(), cluster.last_arrival_s
        cluster.replace_future_arrivals(self.draw(now_s, last_s, remaining, rng).tolist())
        if isinstance(cluster.accuracy, TableAccuracy):
            cluster.accuracy.redraw_difficulty(cluster.arrived, rng)
