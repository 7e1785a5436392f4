"""The serving config (``cluster.yaml``): servers, model, router, admission limits, HTTP binding.

Every field has a default that serves on this machine, so an empty file is a valid config apart
from ``checkpoint``. Unknown keys are errors (a misspelt knob must fail, not be ignored).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from hetsched.core.config import StrictModel, load_config

#: Most entries a convolution cache may be given (the libraries parse the variable as an int).
MAX_CACHE_ENTRIES = 1_000_000
#: Most intra-op threads a server's batches may be given.
MAX_TORCH_THREADS = 256


class ServerConfig(StrictModel, use_attribute_docstrings=True):
    """One server: one Ray actor running a greedy executor on one device."""

    name: str
    device: str = "cpu"
    """Torch device inside the actor: ``cpu`` or ``cuda`` (Ray assigns the GPU)."""
    spec: str | None = None
    """Device spec (``hetsched.core.devices`` name or profile JSON) for the power model and
    the executor's memory cap; default: the built-in spec the live backend matches to the
    device (``cpu``, or the GPU's datasheet entry)."""
    num_cpus: float = Field(1.0, ge=0)
    """CPUs of the server: the Ray CPUs its actor reserves, and the cores its batches use: a CPU
    server computes ``num_cpus // torch_threads`` batches at once (at least one)."""
    torch_threads: int = Field(1, ge=1, le=MAX_TORCH_THREADS, strict=True)
    """Threads each batch computes with (``torch.set_num_threads`` in the server's process). 1
    suits several servers sharing a host; on one host, one server with ``num_cpus`` and
    ``torch_threads`` both the core count batches like a plain single-process server (one batch
    at a time over every core), which is faster for models whose batches are large enough to
    split (benchmarks/RESULTS.md, "one server per host"). ``pool: local`` runs every server in one
    process, which has one thread pool: the largest value of its servers applies to all."""
    nice: int = Field(0, ge=0, le=19)
    """CPU niceness the server adds to itself (only lowering its priority, which needs no
    privilege): a Ray actor to every thread of its process, a ``pool: local`` server to its own
    threads (Linux only; the front's thread keeps its priority). Where servers share cores with
    the front, a positive value lets the front's admission answer (and refuse) promptly while the
    servers are saturated."""
    onednn_cache_capacity: int | None = Field(256, ge=0, le=MAX_CACHE_ENTRIES, strict=True)
    """oneDNN's primitive cache entries in the actor's process (``ONEDNN_PRIMITIVE_CACHE_CAPACITY``;
    None: oneDNN's own default, 1,024). Torch's CPU convolutions create primitives per new input
    shape (segment, width, previous width, batch size); 256 keeps the hot ones for about 5 % of
    capacity against 1,024, 0 turns the cache off for about 11 %."""
    torch_lru_cache_capacity: int | None = Field(64, ge=0, le=MAX_CACHE_ENTRIES, strict=True)
    """Entries of PyTorch's own cache of oneDNN convolutions (``LRU_CACHE_CAPACITY``; None: its
    default, 1,024). Its entries keep their primitives' JIT code and buffers alive whatever
    oneDNN's cache evicts, so rare shapes made the actor grow for as long as it served; 64 cost
    no measurable capacity (benchmarks/RESULTS.md, "the CPU convolution caches").

    Both variables are set in the actor's environment when Ray starts it (Ray actors only:
    ``pool: local`` servers share the front's process, whose environment sets them)."""

    def compute_slots(self, torch_threads: int) -> int | None:
        """Batches the server computes at once with ``torch_threads`` threads each: its CPUs'
        worth on the CPU (at least one); None on a GPU, whose streams take the backend's default."""
        if self.device.startswith("cuda"):
            return None
        return max(1, int(self.num_cpus) // torch_threads)

    @property
    def num_gpus(self) -> float:
        """Ray GPUs the actor reserves: one for a CUDA server, none for a CPU server."""
        return 1.0 if self.device.startswith("cuda") else 0.0


class AdmissionConfig(StrictModel, use_attribute_docstrings=True):
    """Limits that keep an overloaded server answering quickly instead of queueing without bound."""

    max_images_in_system: int = Field(256, ge=1)
    """Images accepted and not yet answered; beyond it new requests get 429."""
    max_images_per_request: int = Field(64, ge=1)
    max_image_bytes: int = Field(1_000_000, ge=1)
    """Largest encoded image (PNG/JPEG file or decoded raw array)."""
    max_body_bytes: int = Field(16_000_000, ge=1)
    """Largest HTTP body of one request."""
    max_image_pixels: int = Field(1024 * 1024, ge=1)
    """Largest width x height of a PNG/JPEG before it is resized to the model's input."""
    default_deadline_s: float | None = Field(None, gt=0)
    """Deadline of requests that name none; None: no deadline."""
    max_attempts: int = Field(3, ge=1)
    """Times one segment may be re-routed after server failures before the image fails."""
    deadline_headroom: float = Field(0.6, gt=0, le=1)
    """A request is admitted while its expected time (work ahead / recent rate) is at most this
    fraction of its deadline; the rest absorbs the spread of real times around the estimate."""
    shed_from: float = Field(0.5, gt=0, le=1)
    """Fraction of ``max_images_in_system`` in use from which the router's widths are capped,
    narrower as the system fills (cheaper images before refusals); 1: never cap."""


class HttpConfig(StrictModel, use_attribute_docstrings=True):
    """Bounds on the HTTP side, so that slow or idle clients cannot hold the server's resources."""

    header_timeout_s: float = Field(10.0, gt=0)
    """A connection must send a complete request head within this long of opening (or of the
    previous answer); else it is closed (slowloris)."""
    body_timeout_s: float = Field(10.0, gt=0)
    """A request's body must have arrived within this long of its head; else 408 and close."""
    keep_alive_s: int = Field(5, ge=1)
    """Idle keep-alive connections are closed after this long."""
    max_connections: int = Field(1024, ge=1)
    """Open connections (and requests in progress) at most; beyond it new ones get 503."""
    decode_threads: int = Field(2, ge=1)
    """Threads decoding request bodies (JSON, arrays, PNG/JPEG) off the event loop."""


class ServeConfig(StrictModel, use_attribute_docstrings=True):
    """Everything ``hetsched slim serve`` needs."""

    checkpoint: Path
    """SlimResNet checkpoint written by ``hetsched slim train``."""
    servers: tuple[ServerConfig, ...] = ()
    """One entry per server; empty: one per visible GPU, or two CPU servers without GPUs."""
    pool: Literal["ray", "local"] = "ray"
    """Where the servers run: ``ray``, one Ray actor each (any host of a Ray cluster; a crashed
    server is restarted and its images re-routed while the others serve); ``local``, threads of
    the front's own process (one host, no Ray: no per-segment hop through the object store, but
    a crash of the process is a total outage; ``num_cpus`` bounds the batches each server
    computes at once)."""
    router: str = "random"
    """A registered router name (``hetsched.slim.routers.ROUTERS``) or a PPO checkpoint file."""
    router_seed: int = 0
    widths: tuple[float, ...] = (0.25, 0.5, 0.75, 1.0)
    group_sizes: tuple[int, ...] = (1, 4, 8, 16)
    executor: dict[str, Any] = Field(default_factory=dict)
    """Algorithm 1 knobs of every server's executor (``hetsched.slim.executor.greedy``'s config)."""
    top_k: int = Field(5, ge=1)
    """Scores returned per image (capped at the number of classes)."""
    admission: AdmissionConfig = Field(default_factory=AdmissionConfig)
    telemetry_interval_s: float = Field(0.2, gt=0)
    """How often the front polls each actor's telemetry (power, utilisation, VRAM, energy)."""
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    """HTTP port (0: any free port, for tests that read it back from the server)."""
    token: str | None = None
    """Bearer token required on every path but the health probes; None: no authentication."""
    http: HttpConfig = Field(default_factory=HttpConfig)
    model_name: str = Field("slimresnet", pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    """The model's name in the Open Inference Protocol routes (``/v2/models/{name}``)."""

    @field_validator("servers")
    @classmethod
    def _unique_names(cls, servers: tuple[ServerConfig, ...]) -> tuple[ServerConfig, ...]:
        names = [s.name for s in servers]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"server names must be unique; repeated: {duplicates}")
        return servers


LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def exposure_problem(config: ServeConfig) -> str | None:
    """Why serving ``config`` would expose an open API beyond this machine, or None.

    A non-loopback address without a token lets anyone on the network send work (and read
    ``/metrics``); ``hetsched slim serve`` refuses that unless told ``--insecure``.
    """
    if config.host in LOOPBACK_HOSTS or config.token is not None:
        return None
    return (
        f"--host {config.host} is reachable from other machines and no --token is set: anyone"
        " there could use the API"
    )


def default_servers(gpu_count: int) -> tuple[ServerConfig, ...]:
    """One server per GPU, or two CPU servers when there is none (the local default)."""
    if gpu_count > 0:
        return tuple(ServerConfig(name=f"gpu{i}", device="cuda") for i in range(gpu_count))
    return (ServerConfig(name="cpu0"), ServerConfig(name="cpu1"))


def load_serve_config(path: str | Path) -> ServeConfig:
    """Reads and validates ``cluster.yaml``; relative model and router paths are relative to it.

    Raises:
        ConfigError: For a missing file, bad YAML or a bad field (named).
    """
    config = load_config(path, ServeConfig)
    folder = Path(path).parent
    if not config.checkpoint.is_absolute():
        config.checkpoint = folder / config.checkpoint
    router = Path(config.router)
    if router.suffix == ".pt" and not router.is_absolute():
        config.router = str(folder / router)
    return config
