"""The rollout teacher: per chunk, the advisor whose rollout to the episode's end scores best."""

import pytest

from hetsched.slim.router_training.behaviour_cloning import Demonstrations, record_episode
from hetsched.slim.router_training.env import SlimRoutingEnv
from hetsched.slim.router_training.learned_training import LearnedRouterConfig
from hetsched.slim.router_training.scenario_mix import mix_encoder, training_mix
from hetsched.slim.router_training.teachers import RolloutTeacher, fork, horizon_score
from hetsched.slim.router_training.validation import episode_score
from hetsched.slim.routers import ROUTERS
from hetsched.slim.routers.reward import REWARD_PRESETS
from hetsched.slim.sim.future_arrivals import FutureSampler

RULES = ("jsq-0.25", "slackfit", "constant-best")


def _mix(images: int = 240):
    return training_mix(["bursty-3x"], images=images, randomize=False)


def test_a_copied_cluster_continues_exactly_as_the_original_and_leaves_it_untouched():
    cluster = _mix().cluster(4)
    router = ROUTERS.create("slackfit")
    for _ in range(40):  # part-way into the episode
        state = cluster.next_state()
        assert state is not None
        cluster.route(router.decide(state))
    assert cluster.next_state() is not None
    copied = fork(cluster)
    completed_before = len(cluster.completed)
    forked = episode_score(copied, ROUTERS.create("jsq-0.25"))
    assert len(cluster.completed) == completed_before  # the copy shares no state
    assert episode_score(cluster, ROUTERS.create("jsq-0.25")) == forked


def test_the_rollout_episode_scores_at_least_the_best_single_rule():
    mix = _mix()
    encoder = mix_encoder(mix, RULES, "advice")
    env = SlimRoutingEnv(lambda _drawn: mix.cluster(2), encoder, REWARD_PRESETS["slo"])
    rules = {name: episode_score(mix.cluster(2), ROUTERS.create(name)) for name in RULES}
    teacher = RolloutTeacher(RULES, seed=2, chunk_decisions=60)
    demos = Demonstrations()
    record_episode(env, teacher, 2, demos)
    assert env.cluster is not None
    scored = [s.score for s in teacher.rollout_scores]
    assert len(scored) >= 3 and scored == sorted(scored)  # the rollout improvement property
    assert scored[-1] >= max(score.score for score in rules.values()) - 1e-12
    # the episode it drove is the last rollout (finished: scoring runs nothing more)
    assert episode_score(env.cluster, ROUTERS.create("jsq-0.25")) == teacher.rollout_scores[-1]
    # the labels are the picked advisors' indices, chunk by chunk
    assert sum(teacher.chunks.values()) == len(scored)
    assert {int(a[0]) for a in demos.actions} <= {RULES.index(n) for n in teacher.chunks}


def test_a_horizon_rollout_scores_only_the_images_whose_fate_it_settled():
    mix = _mix(3000)
    cluster = mix.cluster(3)
    for _ in range(200):
        state = cluster.next_state()
        assert state is not None
        cluster.route(ROUTERS.create("constant-best").decide(state))
    assert cluster.next_state() is not None
    start_s = cluster.clock.now_s() - cluster.config.slo_s
    copied = fork(cluster)
    short = horizon_score(copied, ROUTERS.create("jsq-0.25"), 800)
    end_s = copied.clock.now_s() - copied.config.slo_s
    assert not copied.done and start_s < end_s
    window = [i for i in copied.completed if start_s <= i.arrival_s <= end_s]
    arrived = [t for t in copied.arrival_times_s if start_s <= t <= end_s]
    assert arrived and short.slo_attainment == sum(i.met_slo for i in window) / len(arrived)
    assert short.accuracy == sum(i.correct for i in window) / len(window)
    # a horizon past the episode's end is the rest of the episode
    whole = horizon_score(fork(cluster), ROUTERS.create("jsq-0.25"), 10**6)
    assert whole == episode_score(fork(cluster), ROUTERS.create("jsq-0.25"))


def test_a_horizon_rollout_teacher_labels_every_decision_with_a_candidate():
    mix = _mix()
    encoder = mix_encoder(mix, RULES, "advice")
    env = SlimRoutingEnv(lambda _drawn: mix.cluster(2), encoder, REWARD_PRESETS["slo"])
    teacher = RolloutTeacher(RULES, seed=2, chunk_decisions=40, horizon_decisions=80)
    demos = Demonstrations()
    record_episode(env, teacher, 2, demos)
    assert sum(teacher.chunks.values()) == -(-env.cluster.decisions // 40)
    assert len(demos) == env.cluster.decisions


def test_bad_rollout_settings_are_refused():
    with pytest.raises(ValueError, match="chunk_decisions"):
        RolloutTeacher(RULES, seed=0, chunk_decisions=0)
    with pytest.raises(ValueError, match="at least one"):
        RolloutTeacher((), seed=0, chunk_decisions=5)
    with pytest.raises(ValueError, match="must cover a chunk"):
        RolloutTeacher(RULES, seed=0, chunk_decisions=50, horizon_decisions=49)
    with pytest.raises(ValueError, match="rollout_chunk"):
        LearnedRouterConfig(teacher="rollout", rollout_chunk=0)
    with pytest.raises(ValueError, match="must be at least rollout_chunk"):
        LearnedRouterConfig(teacher="rollout", rollout_chunk=500, rollout_horizon=400)
    assert LearnedRouterConfig(rollout_chunk=500, rollout_horizon=None).rollout_horizon is None


def test_a_teacher_on_sampled_futures_labels_from_the_present_and_repeats_per_seed():
    mix = _mix()
    scenario = mix.scenarios["bursty-3x"]
    encoder = mix_encoder(mix, RULES, "advice")

    def run() -> tuple[dict[str, int], list]:
        env = SlimRoutingEnv(lambda _drawn: mix.cluster(2), encoder, REWARD_PRESETS["slo"])
        teacher = RolloutTeacher(RULES, seed=2, chunk_decisions=60, horizon_decisions=120,
                                 futures=FutureSampler(scenario), samples=2)  # fmt: skip
        demos = Demonstrations()
        record_episode(env, teacher, 2, demos)
        assert env.cluster is not None and len(demos) == env.cluster.decisions
        return teacher.chunks, teacher.rollout_scores

    first, again = run(), run()
    assert first == again and sum(first[0].values()) == len(first[1]) >= 3
    with pytest.raises(ValueError, match="samples"):
        RolloutTeacher(RULES, seed=0, chunk_decisions=5, futures=FutureSampler(scenario),
                       samples=0)  # fmt: skip
