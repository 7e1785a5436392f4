"""Algorithm 1's invariants: on hand-made cases and on random arrivals, widths and configs."""

from collections import defaultdict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hetsched.core.config import validate_config
from hetsched.core.errors import ConfigError
from hetsched.slim.executor.config import ExecutorConfig
from tests.slim.executor.conftest import WIDTHS, make_executor


def submit_all(loop, executor, requests):
    """Schedules (time_s, segment, width, prev_width) requests with payload = index; returns
    the completion log {index: [(executed width, output)]}."""
    finished = defaultdict(list)
    for index, (at_s, segment, width, prev_width) in enumerate(requests):

        def arrive(index=index, segment=segment, width=width, prev_width=prev_width):
            def done(executed_width, output, index=index):
                finished[index].append((executed_width, output))

            executor.submit(segment, width, prev_width, done, payload=index)

        loop.schedule(at_s, arrive)
    return finished


def check_run(requests, executor, backend, finished):
    """Every request ran exactly once, at a width >= requested, FIFO within its key."""
    assert sorted(finished) == list(range(len(requests)))
    for index, log in finished.items():
        assert len(log) == 1, f"request {index} completed {len(log)} times"
        executed_width, output = log[0]
        assert output == index  # the payload travelled to the backend and back
        assert executed_width >= requests[index][2]
    dispatched = [i for _key, _width, ids in backend.batches for i in ids]
    assert sorted(dispatched) == list(range(len(requests)))
    per_key = defaultdict(list)
    for i in dispatched:
        _, segment, width, prev_width = requests[i]
        per_key[(segment, width, 1.0 if segment == 0 else prev_width)].append(i)
    for ids in per_key.values():
        assert ids == sorted(ids), "requests of one key left out of arrival order"
    assert executor.queue_length == 0 and executor.running_batches == 0
    assert not backend.busy


def test_batches_by_head_key_best_fit_and_fifo(costs):
    loop, executor, backend = make_executor(costs, max_batch=4)
    # One wide instance exists and is idle: a narrower request must use it (smallest width >= w).
    requests = [(0.0, 1, 1.0, 0.5)] + [(1.0, 1, 0.5, 0.25)] * 6 + [(1.0, 2, 0.25, 0.5)]
    finished = submit_all(loop, executor, requests)
    loop.run()
    check_run(requests, executor, backend, finished)
    keys = [(key.segment, key.width, width, len(ids)) for key, width, ids in backend.batches]
    # t = 1: the 0.5 requests take the idle 1.0 instance (best fit), the next 0.5 batch loads a
    # 0.5 instance, segment 3 loads its own; batches of at most B_max = 4.
    assert keys[0] == (1, 1.0, 1.0, 1)
    assert keys[1] == (1, 0.5, 1.0, 1)  # the first arrival at t = 1 finds the idle 1.0 instance
    assert all(size <= 4 for *_, size in keys)
    assert executor.record.loads == executor.record.unloads  # everything offloaded after t_idle


def test_head_of_line_waits_for_busy_instance_until_queue_reaches_q_th(costs):
    loop, executor, _ = make_executor(costs, max_batch=2, scale_queue_threshold=3, scale_max_new=2)
    for _ in range(2):
        executor.submit(0, 1.0, None, lambda width: None)
    assert executor.loaded_instances() == {(0, 1.0): 1}  # one loaded for the first request
    assert executor.running_batches == 1 and executor.queue_length == 1  # the second waits
    executor.submit(0, 1.0, None, lambda width: None)
    assert executor.loaded_instances() == {(0, 1.0): 1}  # queue 2 < Q_th: still waiting
    executor.submit(0, 1.0, None, lambda width: None)  # queue reaches Q_th = 3: scale up by 2
    assert executor.loaded_instances() == {(0, 1.0): 3}
    assert executor.queue_length == 0 and executor.running_batches == 3
    loop.run()
    assert executor.record.completed == 4 and executor.record.unloads == 3


def test_vram_cap_and_utilisation_block_stop_loading(costs):
    one = costs.instance_param_bytes(3, 1.0)
    loop, executor, backend = make_executor(costs, vram_cap_bytes=one + one // 2)
    executor.submit(3, 1.0, 1.0, lambda width: None)
    executor.submit(3, 0.75, 1.0, lambda width: None)  # does not fit beside the 1.0 instance
    assert executor.loaded_instances() == {(3, 1.0): 1} and executor.queue_length == 1
    loop.run()
    assert executor.record.completed == 2  # it ran after the idle 1.0 instance was offloaded
    assert backend.peak_instance_bytes <= one + one // 2

    loop, executor, backend = make_executor(costs, util_block_pct=1.0, max_batch=16)
    for segment in (0, 1):
        executor.submit(segment, 1.0, 1.0, lambda width: None)
    assert backend.utilization_pct() >= 1.0
    assert executor.loaded_instances() == {(0, 1.0): 1}  # the second load is blocked by U_blk
    loop.run()
    assert executor.record.completed == 2


def test_config_and_request_errors_name_the_problem(costs):
    for bad, field in (
        ({"util_block_pct": 150}, "util_block_pct"),
        ({"widths": [0.0, 0.5]}, "widths"),
        ({"max_batch": 0}, "max_batch"),
        ({"idle_unload_s": -1}, "idle_unload_s"),
        ({"scale_max_new": 0}, "scale_max_new"),
        ({"B_max": 4}, "B_max"),
    ):
        with pytest.raises(ConfigError, match=f"field '{field}'"):
            validate_config(bad, ExecutorConfig, "test")
    with pytest.raises(ConfigError, match="vram_cap_bytes"):
        make_executor(costs, vram_cap_bytes=10**15)
    _, executor, _ = make_executor(costs, vram_cap_bytes=1000)
    with pytest.raises(ConfigError, match="smaller than one instance of segment 4"):
        executor.submit(3, 1.0, 1.0, lambda width: None)
    _, executor, _ = make_executor(costs, widths=(0.5, 1.0))
    with pytest.raises(ConfigError, match="not in the executor's W"):
        executor.submit(0, 0.25, None, lambda width: None)


request_lists = st.lists(
    st.tuples(
        st.floats(0.0, 0.02),  # gap to the previous arrival
        st.integers(0, 3),
        st.sampled_from(WIDTHS),
        st.sampled_from(WIDTHS),
    ),
    min_size=1,
    max_size=120,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    raw=request_lists,
    device=st.sampled_from(["rtx-2080-ti", "gtx-980-ti", "cpu"]),
    max_batch=st.integers(1, 8),
    q_th=st.integers(1, 12),
    n_new=st.integers(1, 3),
    cap_factor=st.floats(1.0, 6.0),
    u_blk=st.floats(5.0, 100.0),
    t_idle=st.floats(0.0005, 0.05),
)
def test_invariants_hold_on_random_workloads(
    costs, raw, device, max_batch, q_th, n_new, cap_factor, u_blk, t_idle
):
    largest = max(costs.instance_param_bytes(k, w) for k in range(4) for w in WIDTHS)
    loop, executor, backend = make_executor(
        costs,
        device=device,
        max_batch=max_batch,
        scale_queue_threshold=q_th,
        scale_max_new=n_new,
        vram_cap_bytes=int(largest * cap_factor),
        util_block_pct=u_blk,
        idle_unload_s=t_idle,
    )
    requests, now_s = [], 0.0
    for gap_s, segment, width, prev_width in raw:
        now_s += gap_s
        requests.append((now_s, segment, width, 1.0 if segment == 0 else prev_width))
    finished = submit_all(loop, executor, requests)
    loop.run(max_events=200_000)
    check_run(requests, executor, backend, finished)
    assert backend.peak_instance_bytes <= executor.vram_cap_bytes
    assert executor.record.loads == executor.record.unloads + executor.instances_loaded


def test_blocked_by_someone_elses_load_retries_on_a_timer_not_a_spin(costs):
    loop, executor, backend = make_executor(costs, blocked_retry_s=0.01)
    busy_until_s = 0.035  # another process keeps the device at 100 % until then
    backend.utilization_pct = lambda: 100.0 if loop.now_s() < busy_until_s else 0.0
    finished = []
    executor.submit(2, 0.5, 0.5, finished.append)
    assert executor.loaded_instances() == {} and loop.pending == 1  # one retry timer, no spin
    loop.run()
    assert finished == [0.5]
    assert loop.events_processed <= 4 + 2  # retries at 0.01, 0.02, 0.03, 0.04; batch end; unload
