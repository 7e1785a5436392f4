"""GreedyExecutor + TorchBackend + RealTimeLoop on the CPU with a trained digits model: every
image comes out once, equal to a whole-model forward at the widths the executor ran."""

from __future__ import annotations

import random

import torch

from hetsched.core.realtime import RealTimeLoop
from hetsched.slim.executor.config import ExecutorConfig
from hetsched.slim.executor.greedy import GreedyExecutor
from hetsched.slim.live.torch_backend import TorchBackend
from hetsched.slim.model.slimresnet import NUM_SEGMENTS, WIDTHS, SlimResNet


def test_requests_flow_through_the_live_executor_unchanged(
    digits_model: SlimResNet, digits_images: torch.Tensor
) -> None:
    loop = RealTimeLoop()
    backend = TorchBackend(digits_model, loop, "cpu", max_workers=4)
    config = ExecutorConfig(max_batch=4, idle_unload_s=0.05, scale_queue_threshold=3)
    executor = GreedyExecutor(backend, loop, config)
    rng = random.Random(0)
    requested = [[rng.choice(WIDTHS) for _ in range(NUM_SEGMENTS)] for _ in digits_images]
    executed: list[list[float]] = [[] for _ in digits_images]
    logits: dict[int, list[torch.Tensor]] = {}

    def submit(image: int, segment: int, prev_width: float | None, activation) -> None:
        def done(width: float, output: torch.Tensor) -> None:
            assert width >= requested[image][segment]  # FINDFREEBESTFIT: never narrower
            executed[image].append(width)
            if segment + 1 < NUM_SEGMENTS:
                submit(image, segment + 1, width, output)
            else:
                logits.setdefault(image, []).append(output)

        executor.submit(segment, requested[image][segment], prev_width, done, payload=activation)

    # Arrivals in three bursts, so batches form, instances get busy and idle ones are unloaded.
    for image, activation in enumerate(digits_images):
        delay_s = 0.1 * (image % 3)
        loop.schedule_in(delay_s, lambda i=image, a=activation: submit(i, 0, None, a))
    assert loop.run_until(lambda: len(logits) == len(digits_images), timeout_s=60.0)
    backend.close()

    assert all(len(outputs) == 1 for outputs in logits.values())  # none lost, none twice
    assert executor.record.submitted == executor.record.completed == NUM_SEGMENTS * len(logits)
    assert executor.queue_length == 0 and executor.running_batches == 0
    assert executor.record.batches < executor.record.completed  # some batches held several
    with torch.inference_mode():
        for image, (output,) in logits.items():
            expected = digits_model(digits_images[image : image + 1], executed[image])[0]
            torch.testing.assert_close(output, expected, rtol=1e-4, atol=1e-5)
    energy_j, source = executor.energy()
    assert energy_j > 0 and source == backend.energy_source


def test_a_free_wider_instance_serves_a_narrower_request_at_its_own_width(
    digits_model: SlimResNet, digits_images: torch.Tensor
) -> None:
    loop = RealTimeLoop()
    backend = TorchBackend(digits_model, loop, "cpu", max_workers=2)
    executor = GreedyExecutor(backend, loop, ExecutorConfig(idle_unload_s=60.0))
    results: list[tuple[list[float], torch.Tensor]] = []

    def run_image(image: torch.Tensor, widths: tuple[float, ...]) -> None:
        executed: list[float] = []

        def submit(segment: int, prev_width: float | None, activation) -> None:
            def done(width: float, output: torch.Tensor) -> None:
                executed.append(width)
                if segment + 1 < NUM_SEGMENTS:
                    submit(segment + 1, width, output)
                else:
                    results.append((executed, output))

            executor.submit(segment, widths[segment], prev_width, done, payload=activation)

        submit(0, None, image)

    run_image(digits_images[0], (1.0,) * NUM_SEGMENTS)  # loads one full-width instance each
    assert loop.run_until(lambda: len(results) == 1, timeout_s=30.0)
    run_image(digits_images[1], (0.25,) * NUM_SEGMENTS)  # FINDFREEBESTFIT: the free 1.0 ones
    assert loop.run_until(lambda: len(results) == 2, timeout_s=30.0)
    backend.close()

    executed, logits = results[1]
    assert executed == [1.0] * NUM_SEGMENTS and executor.record.loads == NUM_SEGMENTS
    with torch.inference_mode():
        expected = digits_model(digits_images[1:2], executed)[0]
    torch.testing.assert_close(logits, expected, rtol=1e-4, atol=1e-5)
