"""Serving refuses, at start-up, a router that needs predicted completion times (the front has
no device cost model), and a router that raises at run time answers 500 instead of hanging."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from hetsched.core.errors import ConfigError
from hetsched.core.events import WallClock
from hetsched.slim.routers import ROUTERS, Router, RouterState, RoutingDecision
from hetsched.slim.routers.ppo import StateEncoder, new_policy, save_router
from hetsched.slim.routers.slo_features import AdviceEncoder
from hetsched.slim.serving.admission import AdmissionController
from hetsched.slim.serving.config import ServeConfig
from hetsched.slim.serving.front import Front
from hetsched.slim.serving.images import RequestError
from hetsched.slim.serving.metrics import ServingMetrics
from hetsched.slim.serving.runtime import build_router
from tests.slim.serving.fakes import FakePool

WIDTHS = (0.25, 0.5, 0.75, 1.0)
GROUPS = (1, 4, 8, 16)


def config(router: str) -> ServeConfig:
    return ServeConfig(checkpoint=Path("unused.pt"), router=router)


@pytest.mark.parametrize(
    "name",
    ["least-completion", "slackfit", "infaas", "constant-best", "least-completion-0.5",
     "backlog-width", "learned"],
)  # fmt: skip
def test_routers_that_read_predictions_are_refused_at_start_up_in_one_line(name):
    with pytest.raises(ConfigError, match="reads predicted completion times") as caught:
        build_router(config(name), 2)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "name", ["random", "round-robin", "least-loaded", "jsq-0.5", "static-slimmest"]
)
def test_routers_that_read_telemetry_and_queues_are_accepted(name):
    assert not build_router(config(name), 2).needs_predictions


def test_a_ppo_checkpoint_needs_predictions_only_with_an_extended_encoder(tmp_path):
    paper = StateEncoder(2, WIDTHS, GROUPS)
    save_router(tmp_path / "paper.pt", new_policy(paper, (8,)), paper, (8,))
    assert not build_router(config(str(tmp_path / "paper.pt")), 2).needs_predictions
    advice = AdviceEncoder(2, WIDTHS, GROUPS, ("jsq-0.25", "backlog-width"), 0.1, 16.0, 4)
    save_router(tmp_path / "advice.pt", new_policy(advice, (8,)), advice, (8,))
    with pytest.raises(ConfigError, match="reads predicted completion times"):
        build_router(config(str(tmp_path / "advice.pt")), 2)


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
    async def scenario():
        front = Front(
            FakePool(),
            FailsFirst(failures=2),
            AdmissionController(100),
            WallClock(),
            ServingMetrics(),
            widths=WIDTHS,
            group_sizes=GROUPS,
        )
        front.start()
        futures = front.submit(list(range(6)))
        results = await asyncio.wait_for(asyncio.gather(*futures, return_exceptions=True), 10)
        await front.stop()
        return results

    results = asyncio.run(scenario())
    errors = [r for r in results if isinstance(r, RequestError)]
    assert len(errors) == 2
    assert all(e.status == 500 and "IndexError: a router bug" in str(e) for e in errors)
    answered = [r for r in results if not isinstance(r, BaseException)]
    assert [int(np.argmax(r.logits)) for r in answered] == [2, 3, 4, 5]
