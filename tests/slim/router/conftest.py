import numpy as np
import pytest
import torch

from hetsched.slim.routers import RouterState, ServerView

WIDTHS = (0.25, 0.5, 0.75, 1.0)
GROUPS = (1, 4, 8, 16)


@pytest.fixture(autouse=True)
def _one_torch_thread():
    torch.set_num_threads(1)


def make_state(queues=(3, 0, 5), utils=(50.0, 10.0, 90.0), available=(True, True, True)):
    servers = tuple(
        ServerView(f"s{i}", q, 100.0 + u, 250.0, u, a)
        for i, (q, u, a) in enumerate(zip(queues, utils, available, strict=True))
    )
    return RouterState(1.0, 12, 4, 20, 0, servers, WIDTHS, GROUPS)


@pytest.fixture
def state_factory():
    return make_state


class SerialServer:
    """A test double for one server: runs submitted segments one at a time, width-scaled latency.

    Cheap and fully predictable, so cluster and environment tests check the mechanism and not the
    executor (the real executor is exercised in the end-to-end tests).
    """

    def __init__(self, loop, name, seconds_per_width=0.01, max_power_w=200.0):
        self.loop, self.name = loop, name
        self.seconds_per_width, self.max_power_w = seconds_per_width, max_power_w
        self.waiting, self.busy, self.submitted = [], False, []

    def submit(self, segment, width, prev_width, done):
        self.submitted.append((segment, width, prev_width))
        self.waiting.append((width, done))
        self._start()

    def submit_many(self, segment, width, prev_width, payloads, finished):
        for payload in payloads:
            self.submit(segment, width, prev_width, lambda run, p=payload: finished(run, [p]))

    def _start(self):
        if self.busy or not self.waiting:
            return
        width, done = self.waiting.pop(0)
        self.busy = True

        def finish():
            self.busy = False
            done(width)
            self._start()

        self.loop.schedule_in(self.seconds_per_width * width, finish)

    def telemetry(self):
        from hetsched.slim.executor.server import ServerTelemetry

        util = 100.0 if self.busy else 0.0
        return ServerTelemetry(len(self.waiting), 50.0 + util, self.max_power_w, util)


class TableAccuracy:
    """Accuracy oracle: prior = mean width; image i correct iff mean width > (i % 4) / 4."""

    def prior(self, widths):
        return sum(widths) / len(widths)

    def correct(self, widths, image_index):
        return sum(widths) / len(widths) > (image_index % 4) / 4


def make_fake_cluster(seed=0, n_images=20, n_servers=3, decision_time_s=0.001, transfer_s=0.002):
    from hetsched.core.events import EventLoop
    from hetsched.core.seeding import make_rng
    from hetsched.slim.cluster.slim_cluster import ClusterConfig, SlimCluster

    loop = EventLoop()
    servers = [SerialServer(loop, f"s{i}", 0.01 * (i + 1)) for i in range(n_servers)]
    cluster = SlimCluster(
        servers,
        loop,
        lambda segment, prev_width, src, dst: transfer_s,
        TableAccuracy(),
        ClusterConfig(widths=WIDTHS, group_sizes=GROUPS, decision_time_s=decision_time_s),
    )
    times = np.sort(make_rng(seed).uniform(0, 0.2, n_images))
    cluster.schedule_arrivals(list(times))
    return cluster


@pytest.fixture
def fake_cluster():
    return make_fake_cluster
