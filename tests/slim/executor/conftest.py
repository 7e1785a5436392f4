import pytest

from hetsched.core.devices import DEVICES
from hetsched.core.events import EventLoop
from hetsched.slim.executor.config import ExecutorConfig
from hetsched.slim.executor.greedy import GreedyExecutor
from hetsched.slim.model.costs import compute_cost_table
from hetsched.slim.sim.simulated_backend import SimulatedBackend

WIDTHS = (0.25, 0.5, 0.75, 1.0)


@pytest.fixture(scope="session")
def costs():
    return compute_cost_table(num_classes=100)


class CheckedBackend:
    """Wraps the simulated backend and fails the test the moment an invariant breaks.

    It checks what the executor must never do (dispatch to a busy instance, run a narrower
    instance than requested, fill more than M_max with instances, unload a busy instance) and
    records every batch's request ids (the payloads) in dispatch order.
    """

    def __init__(self, inner, vram_cap_bytes):
        self.inner = inner
        self.name, self.memory_bytes = inner.name, inner.memory_bytes
        self.energy_source = inner.energy_source
        self.vram_cap_bytes = vram_cap_bytes
        self.busy = set()
        self.loaded = {}
        self.batches = []
        self.peak_instance_bytes = 0

    @property
    def max_power_w(self):
        return self.inner.max_power_w

    def instance_bytes(self, segment, width):
        return self.inner.instance_bytes(segment, width)

    def vram_used_bytes(self):
        return self.inner.vram_used_bytes()

    def utilization_pct(self):
        return self.inner.utilization_pct()

    def power_w(self):
        return self.inner.power_w()

    def energy_j(self):
        return self.inner.energy_j()

    def load(self, segment, width):
        handle = self.inner.load(segment, width)
        self.loaded[id(handle)] = self.instance_bytes(segment, width)
        total = sum(self.loaded.values())
        assert total <= self.vram_cap_bytes, f"instances use {total} > M_max {self.vram_cap_bytes}"
        self.peak_instance_bytes = max(self.peak_instance_bytes, total)
        return handle

    def unload(self, handle):
        assert id(handle) not in self.busy, "unloaded a busy instance"
        del self.loaded[id(handle)]
        self.inner.unload(handle)

    def run_batch(self, handle, key, inputs, done):
        assert id(handle) in self.loaded, "ran a batch on an instance that is not loaded"
        assert id(handle) not in self.busy, "dispatched to a busy instance"
        assert handle.width >= key.width and handle.segment == key.segment
        self.busy.add(id(handle))
        self.batches.append((key, handle.width, list(inputs)))

        def finished(outputs):
            self.busy.discard(id(handle))
            done(outputs)

        self.inner.run_batch(handle, key, inputs, finished)


def make_executor(costs, device="rtx-2080-ti", checked=True, **knobs):
    """(loop, executor, backend) with the simulated backend, optionally wrapped in checks."""
    loop = EventLoop()
    spec = DEVICES[device]
    backend = SimulatedBackend(spec, costs, loop)
    config = ExecutorConfig(**knobs)
    if checked:
        backend = CheckedBackend(backend, config.vram_cap_bytes or spec.memory_bytes)
    return loop, GreedyExecutor(backend, loop, config), backend
