"""The live side of the Slim cluster: greedy executors on real devices, real test images.

:func:`hetsched.slim.sim.scenario.build_cluster` builds the one cluster mechanism for both worlds
(docs/architecture.md, "one mechanism"); with a :class:`LiveSetup` its servers are
:class:`~hetsched.slim.executor.greedy.GreedyExecutor` (Algorithm 1) on
:class:`~hetsched.slim.live.torch_backend.TorchBackend`, all on ONE shared
:class:`~hetsched.core.realtime.RealTimeLoop`, so the cluster's ``next_state`` steps the wall
clock exactly as it steps the simulated one.

* Devices: one server per CUDA device when there are GPUs, else the scenario's number of servers
  all on ``cpu``; or the devices given.
* Images: the test split of the data set the checkpoint was trained on, image i carrying test
  image i mod n (in turn again when the workload is longer), attached at arrival.
* Link: the servers share one host, so activations move in memory (a loopback link with no
  simulated delay); the real cost of those copies is inside the measured latencies.
* Accuracy: the table's prior for segments 1-3 (eq. 7's p̃_acc), the last segment's real logits
  against the image's label for correctness.
* Predictions: the routers that read predicted completion times (``constant-best``,
  ``slackfit``, ``infaas``, ``least-completion``, the learned router) get them from the
  scenario's device model of each server (name a profile written by ``hetsched slim profile``
  on these devices for measured ones), the cost table of the model actually served (its classes
  and image size) and the backlog each server carries; the loopback link predicts no transfer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from hetsched.core.errors import ConfigError
from hetsched.core.realtime import RealTimeLoop
from hetsched.slim.cluster.accuracy_oracle import TableAccuracy
from hetsched.slim.cluster.completion_model import CompletionModel
from hetsched.slim.cluster.slim_cluster import ClusterConfig, SlimCluster
from hetsched.slim.executor.backend import BatchDone, SegmentKey
from hetsched.slim.executor.greedy import GreedyExecutor
from hetsched.slim.live.devices import resolve_live_device
from hetsched.slim.live.torch_backend import LiveInstance, TorchBackend
from hetsched.slim.model.checkpoint import load_checkpoint, model_from_checkpoint
from hetsched.slim.model.costs import SegmentCostTable, compute_cost_table
from hetsched.slim.model.data import load_dataset
from hetsched.slim.model.pipeline import ACCURACY_TABLE_NAME
from hetsched.slim.model.slimresnet import SlimResNet
from hetsched.slim.sim.device_predictions import device_completion_model, in_memory_transfer
from hetsched.slim.sim.scenario import ScenarioConfig, device_specs

LINK_NOTE = (
    "link: loopback (activations copied in memory, no simulated delay; their real copy cost is"
    " inside the measured latencies)"
)


class LiveAccuracy:
    """The table's prior for a width prefix; the model's real answer for correctness.

    Args:
        table_oracle: The simulated world's oracle: the prior (segments 1-3 of eq. 7's p̃_acc)
            and, asked for correctness without an output, its answer.
        labels: Labels of the test images; image i is test image i mod n.
    """

    def __init__(self, table_oracle: TableAccuracy, labels: torch.Tensor) -> None:
        self.table_oracle = table_oracle
        self._labels = labels

    def prior(self, widths: Sequence[float]) -> float:
        """The table's p̃_acc of a width prefix."""
        return self.table_oracle.prior(widths)

    def correct(self, widths: Sequence[float], image_index: int) -> bool:
        """The table's answer (used only for an image that carries no output)."""
        return self.table_oracle.correct(widths, image_index)

    def correct_output(self, image_index: int, output: Any) -> bool:
        """Whether the argmax of the last segment's logits is the image's label."""
        label = self._labels[image_index % len(self._labels)]
        return int(torch.as_tensor(output).argmax()) == int(label)


def live_completion_model(scenario: ScenarioConfig, costs: SegmentCostTable) -> CompletionModel:
    """The routers' predicted completion times on live servers: each server's device model
    (the scenario's, ideally a measured profile) on the served model's ``costs``, no transfer.

    Raises:
        ConfigError: Naming ``servers[i]`` for an unknown device or a bad profile.
    """
    executor = scenario.executor
    return device_completion_model(
        device_specs(scenario), costs, executor.widths, executor.max_batch
    )


class _ExpectedBackend(TorchBackend):
    """A :class:`TorchBackend` whose running batches the shared loop's ``step`` waits for.

    A batch runs on a worker thread and is in no heap until it hands back, so each ``done`` is
    announced with :meth:`RealTimeLoop.expect` (else ``step`` could see an empty loop and the
    cluster would stop with images still in flight).
    """

    def __init__(self, model: SlimResNet, loop: RealTimeLoop, device: str, name: str) -> None:
        super().__init__(model, loop, device, name=name)
        self._expecting_loop = loop

    def run_batch(
        self, handle: LiveInstance, key: SegmentKey, inputs: Sequence[Any], done: BatchDone
    ) -> None:
        super().run_batch(handle, key, inputs, self._expecting_loop.expect(done))


@dataclass
class LiveSetup:
    """A trained model, its test images and the devices a live cluster runs on.

    Build it with :meth:`open` once; every :func:`~hetsched.slim.sim.scenario.build_cluster` call
    then opens fresh servers on a fresh loop (one evaluation run each).
    """

    checkpoint: Path
    model: SlimResNet
    data: str
    images: torch.Tensor
    labels: torch.Tensor
    devices: tuple[str, ...]
    device_note: str
    energy_sources: set[str] = field(default_factory=set)
    """Where the runs' power and energy figures came from (``nvml``, ``rapl``, ``power-model``)."""

    @classmethod
    def open(
        cls,
        checkpoint: Path,
        server_count: int,
        widths: Sequence[float],
        devices: Sequence[str] | None = None,
    ) -> LiveSetup:
        """Loads the checkpoint and its data set's test split; resolves the devices.

        Args:
            checkpoint: A SlimResNet checkpoint written by ``hetsched slim train``.
            server_count: The scenario's number of servers (what the routers are built for).
            widths: The router's widths, which the model must have.
            devices: One device per server (``cpu``, ``cuda``, ``cuda:N``); None: one per CUDA
                device, else ``server_count`` CPU servers.

        Raises:
            DataError: For a missing or unreadable checkpoint, or its data set missing.
            ConfigError: For a device this machine lacks, a device count other than the
                scenario's server count, or widths the model does not have.
        """
        payload = load_checkpoint(checkpoint)
        model = model_from_checkpoint(payload, checkpoint).eval()
        missing = sorted(set(widths) - set(model.widths))
        if missing:
            raise ConfigError(
                f"{checkpoint}: the model has widths {model.widths}, the router's widths"
                f" {missing} are not among them"
            )
        chosen, note = choose_devices(server_count, devices)
        for device in chosen:
            resolve_live_device(device)
        dataset = load_dataset(payload["config"]["data"])
        return cls(
            checkpoint, model, dataset.name, dataset.test_images, dataset.test_labels, chosen, note
        )

    def open_cluster(
        self, scenario: ScenarioConfig, config: ClusterConfig, oracle: TableAccuracy
    ) -> SlimCluster:
        """A cluster of fresh live servers (one evaluation run); closing it frees the devices.

        Activations move in memory; correctness is the model's real answer; predictions come
        from the scenario's device models (see module doc).
        """
        loop = RealTimeLoop()
        backends = [
            _ExpectedBackend(self.model, loop, device, f"{index}:{device}")
            for index, device in enumerate(self.devices)
        ]
        servers = [GreedyExecutor(b, loop, scenario.executor, name=b.name) for b in backends]
        self.energy_sources.update(backend.energy_source for backend in backends)
        accuracy = LiveAccuracy(oracle, self.labels)
        completion = live_completion_model(scenario, self.costs())
        cluster = SlimCluster(servers, loop, in_memory_transfer, accuracy, config, completion)
        for backend in backends:
            cluster.on_close(backend.close)
        return cluster

    def costs(self) -> SegmentCostTable:
        """The cost table of the served model: its classes and its test images' size."""
        return compute_cost_table(
            self.model.num_classes, int(self.images.shape[-1]), self.model.widths
        )

    def image(self, image_id: int) -> torch.Tensor:
        """The test image workload image ``image_id`` carries (in turn again past the split)."""
        return self.images[image_id % len(self.images)]

    def describe(self) -> str:
        """What the live runs rest on, for the output beside the tables."""
        return (
            f"live: {len(self.devices)} servers on {', '.join(self.devices)} ({self.device_note});"
            f" model {self.checkpoint} trained on {self.data}, {len(self.images)} test images in"
            f" turn; {LINK_NOTE}"
        )

    def energy_note(self) -> str:
        """Where the energy and power figures of the runs so far came from."""
        sources = ", ".join(sorted(self.energy_sources)) or "none yet"
        return f"live energy and power figures: source {sources} (per-server meter)"


def open_live_scenario(
    scenario: ScenarioConfig,
    checkpoint: Path,
    device_names: Sequence[str] | None = None,
    *,
    accuracy_table_given: bool = False,
) -> tuple[ScenarioConfig, LiveSetup]:
    """The live setup of ``scenario`` and the scenario it runs, checked before any work.

    Live, a measured ``accuracy_table.json`` beside the checkpoint is the default prior unless
    one was given (for training too, so the router learns the model it will run).
    """
    setup = LiveSetup.open(checkpoint, len(scenario.servers), scenario.widths, device_names)
    device_specs(scenario)  # a bad device model fails here, naming servers[i], before any run
    beside = measured_table_beside(checkpoint)
    if not accuracy_table_given and scenario.accuracy_table == "paper" and beside is not None:
        scenario = scenario.model_copy(update={"accuracy_table": str(beside)})
    return scenario, setup


def measured_table_beside(checkpoint: Path) -> Path | None:
    """The ``accuracy_table.json`` that ``hetsched slim accuracy`` wrote beside ``checkpoint``."""
    path = Path(checkpoint).parent / ACCURACY_TABLE_NAME
    return path if path.is_file() else None


def choose_devices(server_count: int, devices: Sequence[str] | None) -> tuple[tuple[str, ...], str]:
    """The devices of the servers and a note on how they were chosen."""
    if devices:
        chosen, note = tuple(devices), "as given"
    elif torch.cuda.is_available():
        # Fewer GPUs than servers (one H100 for a 3-server scenario, say): servers share them.
        count = torch.cuda.device_count()
        chosen = tuple(f"cuda:{i % count}" for i in range(server_count))
        note = f"{count} CUDA device(s) shared round-robin by the servers"
    else:
        chosen = ("cpu",) * server_count
        note = "no CUDA device here: all servers share this machine's CPU"
    if len(chosen) != server_count:
        raise ConfigError(
            f"live devices {', '.join(chosen)} ({note}): {len(chosen)} server(s), but the scenario"
            f" has {server_count} (the routers are built for that many); give --live-devices with"
            f" {server_count} devices or a scenario with {len(chosen)} servers"
        )
    return chosen, note
