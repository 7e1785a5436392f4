"""The learned router's extended observation, masked joint placement head and checkpoints."""

import numpy as np
import pytest

from hetsched.slim.routers import ROUTERS, RouterState, RoutingDecision, ServerView
from hetsched.slim.routers.ppo import PPORouter, new_policy, save_router
from hetsched.slim.routers.slo_features import OBS_CLIP, AdviceEncoder, SloEncoder

from .conftest import GROUPS, WIDTHS


def view(done_ms, *, backlog_ms=0.0, available=True, queue=2):
    done_s = tuple(d / 1e3 for d in done_ms)
    return ServerView(
        "s", queue, 100.0, 200.0, 50.0, available, backlog_ms / 1e3, 0.001, done_s, done_s
    )


def state(*servers, slack_ms=50.0, location=1, segment=3):
    return RouterState(
        0.0, 3, 1, 4, segment, tuple(servers), WIDTHS, GROUPS,
        head_deadline_s=slack_ms / 1e3, head_slack_s=slack_ms / 1e3,
        head_location=location, head_prev_width=0.5,
    )  # fmt: skip


ENCODER = SloEncoder(3, WIDTHS, GROUPS, advisors=("slackfit", "jsq-0.25"))
SERVERS = (view((10, 20, 30, 40)), view((30, 45, 60, 90)))


def per_server(obs, index):
    """The per-server block of ``index`` in ENCODER's observation."""
    start = 2 + 3 + 4 + index * (8 + 2 * len(WIDTHS))
    return obs[start : start + 8 + 2 * len(WIDTHS)]


def test_observation_carries_slack_location_predictions_and_the_advisors_choices():
    s = state(*SERVERS)
    obs = ENCODER.encode(s)
    assert obs.shape == (ENCODER.obs_dim,) and obs.dtype == np.float32
    assert (obs >= -OBS_CLIP).all() and (obs <= OBS_CLIP).all()
    assert obs[2] == pytest.approx(0.5)  # 50 ms of slack in 100 ms units
    assert list(obs[3:7]) == [0, 0, 0, 1] and obs[7] == 0 and obs[8] == 0.5  # segment 3, prev 0.5
    second = per_server(obs, 1)
    assert list(second[:2]) == [1, 1] and second[7] == 1  # present, available, head lies here
    assert second[8:12] == pytest.approx([-0.2, -0.05, 0.1, 0.4])  # done - slack, in 100 ms
    assert list(second[12:]) == [1, 1, 0, 0]  # fits at 0.25 and 0.5
    assert not per_server(obs, 2).any()  # the third slot is padding
    advisors = obs[-2 * ENCODER.placements :].reshape(2, ENCODER.placements)
    slackfit = ROUTERS.create("slackfit").decide(s)
    assert advisors[0].argmax() == ENCODER.placement(slackfit) == 3  # 1.2 x 40 ms <= 50 ms
    assert advisors[1].argmax() == ENCODER.placement(ROUTERS.create("jsq-0.25").decide(s))


def test_mask_forbids_missing_pairs_only_while_one_fits_and_never_a_down_server():
    mask = ENCODER.mask(state(*SERVERS))
    placements = mask[: ENCODER.placements].reshape(3, 4)
    assert placements.tolist() == [[1, 1, 1, 1], [1, 1, 0, 0], [0, 0, 0, 0]]
    assert mask[ENCODER.placements :].all()  # every group size
    late = ENCODER.mask(state(SERVERS[0], view((5, 6, 7, 8), available=False), slack_ms=-1.0))
    assert late[: ENCODER.placements].reshape(3, 4).tolist() == [[1] * 4, [0] * 4, [0] * 4]


def test_actions_round_trip_and_a_too_large_cluster_is_refused():
    decision = RoutingDecision(1, 0.75, 8)
    assert ENCODER.decision(ENCODER.action(decision)) == decision
    with pytest.raises(ValueError, match="4 servers, router 3"):
        ENCODER.encode(state(*SERVERS, *SERVERS))


def test_learned_router_checkpoint_round_trip_with_the_extended_encoder(tmp_path):
    policy = new_policy(ENCODER, (16,))
    save_router(tmp_path / "learned.pt", policy, ENCODER, (16,), {"preset": "slo"})
    router = ROUTERS.create("learned", checkpoint=tmp_path / "learned.pt")
    assert router.encoder == ENCODER and router.greedy
    s = state(*SERVERS)
    expected = PPORouter(policy=policy, encoder=ENCODER, greedy=True).decide(s)
    assert router.decide(s) == expected
    allowed = ENCODER.mask(s)[: ENCODER.placements]
    assert allowed[ENCODER.placement(expected)]


ADVICE = AdviceEncoder(3, WIDTHS, GROUPS, advisors=("slackfit", "jsq-0.25"))


def test_advice_head_follows_the_named_rule_on_the_state_encoded_last():
    with pytest.raises(ValueError, match="encode a state before"):
        AdviceEncoder(3, WIDTHS, GROUPS, advisors=("slackfit",)).decision(np.array([0]))
    s = state(*SERVERS)
    obs = ADVICE.encode(s)
    assert obs.shape == (ADVICE.obs_dim,) == (ENCODER.obs_dim + len(WIDTHS),)
    assert np.array_equal(obs[: ENCODER.obs_dim], ENCODER.encode(s))  # the joint head's, then
    assert not obs[ENCODER.obs_dim :].any()  # the offered load: nothing arrived per second yet
    assert ADVICE.head_sizes == (2,) and ADVICE.mask(s).tolist() == [True, True]
    for index, name in enumerate(ADVICE.advisors):
        rule = ROUTERS.create(name).decide(s)
        assert ADVICE.decision(np.array([index])) == rule
        assert ADVICE.decision(ADVICE.action(rule)) == rule
        assert ADVICE.imitation(name, rule).tolist() == [index]
    late = state(*SERVERS, slack_ms=-1.0)  # nothing fits: slackfit takes jsq-0.25's choice
    ADVICE.encode(late)
    agreed = ROUTERS.create("jsq-0.25").decide(late)
    assert ROUTERS.create("slackfit").decide(late) == agreed
    assert ADVICE.action(agreed).tolist() == [0]  # the first advisor that made it
    assert ADVICE.imitation("jsq-0.25", agreed).tolist() == [1]  # the teacher's own index
    with pytest.raises(ValueError, match="no advisor made"):
        ADVICE.action(RoutingDecision(2, 1.0, 16))


def test_offered_load_is_the_arrival_rate_over_the_available_servers_capacity_per_width():
    busy = RouterState(
        0.1, 3, 1, 4, 3, SERVERS, WIDTHS, GROUPS, head_slack_s=0.05, head_location=1
    )  # 4 images in 0.1 s; the head's last segment: a whole image is 4 x its device time
    per_s = [
        1 / (4 * (a - 0.001)) + 1 / (4 * (b - 0.001))
        for a, b in zip((0.01, 0.02, 0.03, 0.04), (0.03, 0.045, 0.06, 0.09), strict=True)
    ]
    assert ADVICE.offered_load(busy) == pytest.approx([min(OBS_CLIP, 40.0 / c) for c in per_s])
    assert ADVICE.offered_load(busy)[0] < ADVICE.offered_load(busy)[-1]  # wider: more load
    one_down = (SERVERS[0], view((30, 45, 60, 90), available=False))
    down = RouterState(0.1, 3, 1, 4, 3, one_down, WIDTHS, GROUPS)
    alone = [min(OBS_CLIP, 40.0 * 4 * (a - 0.001)) for a in (0.01, 0.02, 0.03, 0.04)]
    assert ADVICE.offered_load(down) == pytest.approx(alone)  # only available servers count


def test_advice_router_checkpoint_round_trip(tmp_path):
    policy = new_policy(ADVICE, (16,))
    save_router(tmp_path / "learned.pt", policy, ADVICE, (16,))
    router = ROUTERS.create("learned", checkpoint=tmp_path / "learned.pt")
    assert isinstance(router.encoder, AdviceEncoder) and router.encoder == ADVICE
    s = state(*SERVERS)
    rules = [ROUTERS.create(name).decide(s) for name in ADVICE.advisors]
    assert router.decide(s) in rules
