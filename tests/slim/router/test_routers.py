import zipfile

import numpy as np
import pytest
import torch

from hetsched.core.errors import DataError, UnknownNameError
from hetsched.slim.routers import ROUTERS
from hetsched.slim.routers.ppo import (
    OBS_CLIP,
    PPORouter,
    StateEncoder,
    new_policy,
    save_router,
)

from .conftest import GROUPS, WIDTHS


def test_registry_lists_every_router_and_rejects_unknown_names():
    assert ROUTERS.names() == [
        "backlog-width",
        "constant-best",
        "infaas",
        "jsq-0.25",
        "jsq-0.5",
        "jsq-0.75",
        "jsq-1.0",
        "learned",
        "least-completion",
        "least-completion-0.5",
        "least-loaded",
        "ppo",
        "random",
        "round-robin",
        "slackfit",
        "static-slimmest",
        "static-widest",
    ]
    with pytest.raises(UnknownNameError, match="known: backlog-width, constant-best"):
        ROUTERS.get("fastest")


def test_random_router_covers_every_choice_and_is_seeded(state_factory):
    state = state_factory()
    first = [ROUTERS.create("random", seed=3).decide(state) for _ in range(1)]
    router = ROUTERS.create("random", seed=3)
    decisions = [router.decide(state) for _ in range(400)]
    assert decisions[0] == first[0]
    assert {d.server for d in decisions} == {0, 1, 2}
    assert {d.width for d in decisions} == set(WIDTHS)
    assert {d.group_size for d in decisions} == set(GROUPS)


def test_round_robin_cycles_and_skips_unavailable_servers(state_factory):
    router = ROUTERS.create("round-robin")
    state = state_factory(available=(True, False, True))
    assert [router.decide(state).server for _ in range(4)] == [0, 2, 0, 2]


def test_least_loaded_and_static_routers(state_factory):
    state = state_factory(queues=(3, 1, 1), utils=(10.0, 60.0, 20.0))
    assert ROUTERS.create("least-loaded").decide(state).server == 2  # tie on queue → lower util
    widest = ROUTERS.create("static-widest", group_size=4).decide(state)
    slimmest = ROUTERS.create("static-slimmest").decide(state)
    assert (widest.width, widest.group_size, widest.server) == (1.0, 4, 2)
    assert slimmest.width == 0.25


def test_encoder_builds_the_eq1_vector_normalised(state_factory):
    encoder = StateEncoder(3, WIDTHS, GROUPS)
    obs = encoder.encode(state_factory())
    assert obs.shape == (encoder.obs_dim,) == (11,)
    assert obs.dtype == np.float32
    assert (obs >= 0).all() and (obs <= OBS_CLIP).all()
    assert obs[1] == pytest.approx(4 / 20)  # completed / arrived
    assert obs[2:5] == pytest.approx([np.log1p(3) / np.log1p(64), 150.0 / 250.0, 0.5])
    with pytest.raises(ValueError, match="3 servers, router 2"):
        StateEncoder(2, WIDTHS, GROUPS).encode(state_factory())


def test_ppo_router_respects_the_server_mask(state_factory):
    encoder = StateEncoder(3, WIDTHS, GROUPS)
    router = PPORouter(policy=new_policy(encoder), encoder=encoder, seed=0)
    state = state_factory(available=(False, True, False))
    decisions = [router.decide(state) for _ in range(200)]
    assert {d.server for d in decisions} == {1}
    assert {d.width for d in decisions} == set(WIDTHS)  # untrained: near-uniform heads
    assert {d.group_size for d in decisions} <= set(GROUPS)


def test_ppo_router_draws_follow_the_policy_softmax(state_factory):
    encoder = StateEncoder(3, WIDTHS, GROUPS)
    policy = new_policy(encoder, (16,))
    with torch.no_grad():
        policy.policy_head.weight.zero_()
        policy.policy_head.bias.zero_()
        policy.policy_head.bias[3 + 3] = np.log(
            3.0
        )  # width 1.0 three times as likely as each other
    router = PPORouter(policy=policy, encoder=encoder, seed=1)
    widths = [router.decide(state_factory()).width for _ in range(6000)]
    share = widths.count(1.0) / len(widths)
    assert share == pytest.approx(3 / 6, abs=0.03)  # 3 / (1 + 1 + 1 + 3)
    again = PPORouter(policy=policy, encoder=encoder, seed=1)
    assert [again.decide(state_factory()).width for _ in range(50)] == widths[:50]


def test_router_checkpoint_round_trip(tmp_path, state_factory):
    encoder = StateEncoder(3, WIDTHS, GROUPS)
    policy = new_policy(encoder, (16,))
    with torch.no_grad():
        policy.policy_head.bias[3 + 3] = 50.0  # strongly prefer width 1.0
    save_router(tmp_path / "r.pt", policy, encoder, (16,), {"preset": "balanced"})
    router = ROUTERS.create("ppo", checkpoint=tmp_path / "r.pt", greedy=True)
    assert router.metadata == {"preset": "balanced"}
    assert router.decide(state_factory()).width == 1.0
    (tmp_path / "bad.pt").write_bytes(b"nonsense")
    with pytest.raises(DataError, match="not a router checkpoint"):
        PPORouter(tmp_path / "bad.pt")
    with pytest.raises(DataError, match="not found"):
        PPORouter(tmp_path / "missing.pt")


def foreign_files(folder):
    """Files a user might name as a router or a training state by mistake: each makes torch
    raise a different exception type (EOFError, UnpicklingError, KeyError, RuntimeError,
    IndexError) or loads as something other than a settings mapping."""
    files = {
        "empty.pt": b"",
        "random.pt": bytes(range(256)) * 8,
        "text.pt": b"hello\n",
        "passwd.pt": b"root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1::/:/sbin/nologin\n",
    }
    for name, data in files.items():
        (folder / name).write_bytes(data)
    with zipfile.ZipFile(folder / "zip.pt", "w") as archive:
        archive.writestr("a", "b")
    torch.save(torch.zeros(3), folder / "tensor.pt")
    torch.save({"encoder": 1}, folder / "half.pt")
    return sorted(folder.glob("*.pt"))


def test_a_foreign_file_as_router_checkpoint_is_a_one_line_data_error(tmp_path):
    for path in foreign_files(tmp_path):
        with pytest.raises(DataError, match="not a router checkpoint") as caught:
            PPORouter(path)
        assert "\n" not in str(caught.value), path
