"""The serving front gives routers predicted completion times (each server's device model and
the backlog it books), so every rule of the Slim experiments and the learned router route live;
a router that raises answers the head image 500 instead of stopping the routing loop."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from hetsched.core.devices import DEVICES
from hetsched.core.errors import ConfigError
from hetsched.core.events import WallClock
from hetsched.slim.model.costs import compute_cost_table
from hetsched.slim.routers import ROUTERS, Router, RouterState, RoutingDecision
from hetsched.slim.routers.ppo import LearnedRouter
from hetsched.slim.serving.admission import AdmissionController
from hetsched.slim.serving.config import ServeConfig
from hetsched.slim.serving.front import Front
from hetsched.slim.serving.images import RequestError
from hetsched.slim.serving.metrics import ServingMetrics
from hetsched.slim.serving.runtime import build_router
from hetsched.slim.sim.device_predictions import device_completion_model
from tests.slim.serving.fakes import FakePool

WIDTHS = (0.25, 0.5, 0.75, 1.0)
GROUPS = (1, 4, 8, 16)


def completion():
    """A GPU and a CPU server for the fake model's 10 classes and 8-pixel images."""
    specs = [DEVICES["rtx-2080-ti"], DEVICES["cpu"]]
    return device_completion_model(specs, compute_cost_table(10, 8, WIDTHS), WIDTHS, 16)


def front(router: Router, pool: FakePool, model=None) -> Front:
    return Front(
        pool,
        router,
        AdmissionController(1000),
        WallClock(),
        ServingMetrics(),
        widths=WIDTHS,
        group_sizes=GROUPS,
        completion=model,
    )


def serve(router: Router, labels: list[int], pool: FakePool, model=None):
    async def scenario():
        f = front(router, pool, model)
        f.start()
        futures = f.submit(labels)
        results = await asyncio.wait_for(asyncio.gather(*futures, return_exceptions=True), 20)
        await f.stop()
        return results

    return asyncio.run(scenario())


@pytest.mark.parametrize(
    "name",
    ["least-completion", "slackfit", "infaas", "constant-best", "least-completion-0.5",
     "backlog-width", "learned"],
)  # fmt: skip
def test_rules_that_read_predictions_route_every_image_with_the_device_models(name):
    model = completion()
    labels = list(range(10)) * 4
    results = serve(ROUTERS.create(name, seed=0), labels, FakePool(), model)
    assert [int(np.argmax(r.logits)) for r in results] == labels
    assert model.backlog_s == pytest.approx([0.0, 0.0], abs=1e-12)  # every block released


def test_the_prediction_sees_the_backlog_a_running_block_booked():
    async def scenario():
        model = completion()
        pool = FakePool(seconds=0.05)
        f = front(ROUTERS.create("constant-best"), pool, model)
        f.start()
        futures = f.submit(list(range(8)))
        while not pool.running(0):
            await asyncio.sleep(0.001)
        busy = list(model.backlog_s)
        view = f.state().servers[0]
        await asyncio.gather(*futures)
        await f.stop()
        return busy, view

    busy, view = asyncio.run(scenario())
    assert busy[0] > 0.0 and busy[1] == 0.0
    assert view.backlog_s == busy[0]
    assert view.image_done_s[-1] > busy[0]  # the backlog plus the image's own device time


def test_without_device_models_a_rule_that_needs_them_fails_each_image_with_500():
    results = serve(ROUTERS.create("backlog-width"), list(range(3)), FakePool())
    assert all(isinstance(r, RequestError) and r.status == 500 for r in results)
    assert all("needs predicted completion times" in str(r) for r in results)


class FailsFirst(Router):
    """Raises on its first ``failures`` decisions, then joins the shortest queue at 0.5."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.fallback = ROUTERS.create("jsq-0.5")

    def decide(self, state: RouterState) -> RoutingDecision:
        if self.failures:
            self.failures -= 1
            raise IndexError("a router bug")
        return self.fallback.decide(state)


def test_a_router_that_raises_fails_the_head_image_with_500_and_routing_goes_on():
    results = serve(FailsFirst(failures=2), list(range(6)), FakePool())
    errors = [r for r in results if isinstance(r, RequestError)]
    assert len(errors) == 2
    assert all(e.status == 500 and "IndexError: a router bug" in str(e) for e in errors)
    answered = [r for r in results if not isinstance(r, BaseException)]
    assert [int(np.argmax(r.logits)) for r in answered] == [2, 3, 4, 5]


def test_a_trained_router_must_fit_the_servers_and_widths_at_start_up():
    config = ServeConfig(checkpoint=Path("unused.pt"), router="learned")
    router = build_router(config, 2)  # the shipped router pads up to its server slots
    assert isinstance(router, LearnedRouter)
    slots = router.encoder.n_servers
    with pytest.raises(ConfigError, match=f"trained for at most {slots} servers, the config has"):
        build_router(config, slots + 1)
    narrow = ServeConfig(checkpoint=Path("unused.pt"), router="learned", widths=(0.5, 1.0))
    with pytest.raises(ConfigError, match="chooses widths"):
        build_router(narrow, 2)
