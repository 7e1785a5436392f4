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
