"""The completion model's prediction for a block of requests (issue 19): a block of one is the
lone prediction, and a device whose batch time grows with the batch (a CPU) is predicted to
finish a block late, where the lone prediction calls it the fastest."""

import pytest

from hetsched.slim.cluster.completion_model import CompletionModel

WIDTHS = (0.25, 0.5, 1.0)


def gpu_s(segment: int, width: float, prev: float, batch: int) -> float:
    """Launch-bound: 1 ms per batch plus 0.05 ms per request and width."""
    return 1e-3 + 0.05e-3 * batch * width


def cpu_s(segment: int, width: float, prev: float, batch: int) -> float:
    """Compute-bound: 0.4 ms per request and width, nothing per batch."""
    return 0.4e-3 * batch * width


def no_transfer(segment: int, prev: float | None, source: int | None, target: int) -> float:
    return 0.0


def model() -> CompletionModel:
    return CompletionModel(
        [gpu_s, cpu_s], no_transfer, WIDTHS, num_segments=4, backlog_batch_size=16
    )


def test_a_block_of_one_is_the_lone_prediction_on_every_server_and_place():
    m = model()
    m.book(0, 1, 0.5, 0.5)
    for server in (0, 1):
        for segment, prev in ((0, None), (2, 0.5)):
            lone = m.predict(server, segment, prev, None, WIDTHS)[2]
            assert m.predict_block(server, segment, prev, None, WIDTHS, 1) == lone
            assert m.predict_block(server, segment, prev, None, WIDTHS, 0) == lone  # at least 1


def test_a_block_of_sixteen_waits_for_the_whole_batch_at_every_remaining_segment():
    m = model()
    # Alone the CPU finishes the image first (4 x 0.4 ms at width 1.0 < 4 x 1.05 ms) ...
    assert m.predict(1, 0, None, None, WIDTHS)[2][2] < m.predict(0, 0, None, None, WIDTHS)[2][2]
    gpu = m.predict_block(0, 0, None, None, WIDTHS, 16)
    cpu = m.predict_block(1, 0, None, None, WIDTHS, 16)
    # ... but a block of 16 takes 16 x 0.4 ms per segment there and 1.8 ms on the GPU.
    assert cpu[2] == pytest.approx(4 * 16 * 0.4e-3)
    assert gpu[2] == pytest.approx(4 * (1e-3 + 16 * 0.05e-3))
    assert gpu[2] < cpu[2]
    # Later segments only: segment 2 of 4 leaves two batches.
    assert m.predict_block(1, 2, 1.0, 1, WIDTHS, 16)[2] == pytest.approx(2 * 16 * 0.4e-3)


def test_the_block_prediction_adds_the_backlog_and_grows_with_the_block():
    m = model()
    before = m.predict_block(1, 0, None, None, WIDTHS, 8)
    cost_s = m.book(1, 0, 1.0, None)
    after = m.predict_block(1, 0, None, None, WIDTHS, 8)
    assert [a - b for a, b in zip(after, before, strict=True)] == pytest.approx([cost_s] * 3)
    sizes = [m.predict_block(0, 0, None, None, WIDTHS, n)[1] for n in (1, 2, 4, 8, 16)]
    assert sizes == sorted(sizes) and sizes[0] < sizes[-1]
