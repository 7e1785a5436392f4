"""A real HTTP load generator for ``POST /v1/classify``: open-loop rate or closed-loop concurrency.

Requests carry real images: the digits test split (the images the model never trained on),
encoded as PNG files, so the load exercises the whole path a client's would (multipart upload,
decoding, normalisation, four segments over the servers) and the answers can be checked against
the labels.

* Open loop (``rate_per_s``): arrival times drawn up front from a seed with
  :func:`hetsched.slim.sim.workload.arrival_times_s` (Poisson, or bursty on/off at the same mean
  rate); each request is sent at its time whatever the server does, so an overloaded server shows
  as growing latency and 429/503 answers rather than as a slower client (no coordinated omission).
* Closed loop (``concurrency``): N clients each send their next request when the previous one is
  answered, for the duration.

The report holds throughput (answered images per second of wall time), client-side latency
p50/p90/p99 of successful requests, errors by status, accuracy against the labels, and the energy
per image from the server's ``/metrics`` (the energy counters' increase over the run divided by
the images served, with the counters' measurement source).
"""

from __future__ import annotations

import asyncio
import io
import re
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Literal

import numpy as np

from hetsched.core.errors import ConfigError
from hetsched.core.metrics import summarize
from hetsched.core.seeding import make_rng
from hetsched.slim.sim.workload import arrival_times_s

_ENERGY = re.compile(
    r'^hetsched_slim_server_energy_joules_total\{server="([^"]*)",source="([^"]*)"\} (\S+)$',
    re.MULTILINE,
)
_SERVED = re.compile(r'^hetsched_slim_images_total\{outcome="served"\} (\S+)$', re.MULTILINE)


@dataclass(frozen=True)
class LoadgenConfig:
    """One load run."""

    url: str
    """Base URL of the server (``http://127.0.0.1:8000``)."""
    duration_s: float
    rate_per_s: float | None = None
    """Open loop: mean requests per second (with ``pattern``)."""
    pattern: Literal["poisson", "bursty"] = "poisson"
    concurrency: int | None = None
    """Closed loop: clients sending back to back (instead of ``rate_per_s``)."""
    images_per_request: int = 1
    data: str = "digits"
    """Data set whose test split is sent (``digits`` or ``digits:SIZE``)."""
    deadline_s: float | None = None
    token: str | None = None
    seed: int = 0
    timeout_s: float = 60.0
    """Client timeout per request (a request past it counts as an error)."""
    max_connections: int = 4096
    """Open connections at most; keep it above the server's admission limit, or the client
    queues requests itself and hides the server's overload (and its 429s)."""


@dataclass
class LoadReport:
    """What a load run measured."""

    mode: str
    duration_s: float
    requests_sent: int
    requests_ok: int
    images_ok: int
    errors: dict[str, int]
    """Failed requests by HTTP status (or ``timeout`` / ``connection``)."""
    throughput_images_per_s: float
    latency_s: dict[str, float]
    """p50/p90/p99/mean/max of successful requests, client side."""
    accuracy: float | None
    energy_j_per_image: float | None
    energy_source: str
    error_examples: dict[str, str] = field(default_factory=dict)
    """One response body per error status (what the server said)."""

    def as_dict(self) -> dict:
        """Plain values, for JSON."""
        return asdict(self)


def holdout_pngs(data: str, count: int | None = None) -> tuple[list[bytes], np.ndarray]:
    """The test split of ``data`` as PNG files (pixels back in [0, 255]) and their labels."""
    from PIL import Image

    from hetsched.slim.model.data import load_dataset

    dataset = load_dataset(data)
    images = dataset.test_images[:count].numpy()
    mean = np.asarray(dataset.pixel_mean, dtype=np.float32).reshape(1, -1, 1, 1)
    std = np.asarray(dataset.pixel_std, dtype=np.float32).reshape(1, -1, 1, 1)
    pixels = np.clip(np.rint((images * std + mean) * 255.0), 0, 255).astype(np.uint8)
    files = []
    for image in pixels.transpose(0, 2, 3, 1):
        buffer = io.BytesIO()
        Image.fromarray(image, "RGB").save(buffer, format="PNG")
        files.append(buffer.getvalue())
    return files, dataset.test_labels[:count].numpy()


def scrape_energy(text: str) -> tuple[float, float, str]:
    """(joules summed over servers, images served, sources) from a ``/metrics`` page."""
    matches = _ENERGY.findall(text)
    energy_j = sum(float(value) for _, _, value in matches)
    sources = ",".join(sorted({source for _, source, _ in matches})) or "none"
    served = _SERVED.search(text)
    return energy_j, float(served.group(1)) if served else 0.0, sources


def wait_ready(url: str, timeout_s: float = 180.0, is_alive=lambda: True) -> None:
    """Blocks until ``url``'s ``/readyz`` answers 200 (servers started, models loaded).

    Args:
        is_alive: Returns False once waiting is pointless (e.g. the server process exited).

    Raises:
        TimeoutError: If the server is not ready within ``timeout_s`` or stopped being alive.
    """
    import httpx

    deadline_s = time.monotonic() + timeout_s
    while time.monotonic() < deadline_s and is_alive():
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.25)
    raise TimeoutError(f"{url} did not become ready")


async def run_load(config: LoadgenConfig) -> LoadReport:
    """Runs the load against ``config.url`` and reports.

    Raises:
        ConfigError: For neither or both of rate and concurrency, or a server that cannot be
            reached before the run.
    """
    import httpx

    if (config.rate_per_s is None) == (config.concurrency is None):
        raise ConfigError("give exactly one of --rate (open loop) or --concurrency (closed loop)")
    files, labels = holdout_pngs(config.data)
    headers = {"Authorization": f"Bearer {config.token}"} if config.token else {}
    limits = httpx.Limits(max_connections=config.max_connections)
    async with httpx.AsyncClient(
        base_url=config.url, headers=headers, timeout=config.timeout_s, limits=limits
    ) as client:
        before = await _metrics(client)
        run = _Run(client, config, files, labels)
        started_s = time.perf_counter()
        if config.rate_per_s is not None:
            mode = f"open loop, {config.pattern} {config.rate_per_s:g} requests/s"
            await run.open_loop(config.rate_per_s)
        else:
            mode = f"closed loop, concurrency {config.concurrency}"
            await run.closed_loop(config.concurrency or 1, started_s + config.duration_s)
        elapsed_s = time.perf_counter() - started_s
        after = await _metrics(client)
    served = after[1] - before[1]
    energy = (after[0] - before[0]) / served if served > 0 else None
    summary = summarize(run.latencies_s)
    return LoadReport(
        mode=mode,
        duration_s=elapsed_s,
        requests_sent=run.sent,
        requests_ok=len(run.latencies_s),
        images_ok=run.images_ok,
        errors=dict(run.errors),
        throughput_images_per_s=run.images_ok / elapsed_s,
        latency_s={
            "p50": summary.p50,
            "p90": summary.p90,
            "p99": summary.p99,
            "mean": summary.mean,
            "max": summary.max,
        },
        accuracy=run.correct / run.images_ok if run.images_ok else None,
        energy_j_per_image=energy,
        energy_source=after[2],
        error_examples=run.error_examples,
    )


async def _metrics(client) -> tuple[float, float, str]:
    import httpx

    try:
        response = await client.get("/metrics")
    except httpx.HTTPError as error:
        raise ConfigError(f"cannot reach {client.base_url}: {error}") from None
    if response.status_code != 200:
        raise ConfigError(
            f"{client.base_url}/metrics answered {response.status_code}: {response.text[:200]}"
        )
    return scrape_energy(response.text)


class _Run:
    """The state of one load run: sends requests and tallies the answers."""

    def __init__(self, client, config: LoadgenConfig, files, labels) -> None:
        self.client, self.config = client, config
        self.files, self.labels = files, labels
        self._rng = make_rng(config.seed)
        self.sent = self.images_ok = self.correct = 0
        self.latencies_s: list[float] = []
        self.errors: Counter[str] = Counter()
        self.error_examples: dict[str, str] = {}

    async def open_loop(self, rate_per_s: float) -> None:
        times_s = arrival_times_s(
            self._rng, rate_per_s, self.config.pattern, duration_s=self.config.duration_s
        )
        start_s = time.perf_counter()
        tasks = []
        for at_s in times_s:
            delay_s = at_s - (time.perf_counter() - start_s)
            if delay_s > 0:
                await asyncio.sleep(delay_s)
            tasks.append(asyncio.create_task(self.one_request()))
        await asyncio.gather(*tasks)

    async def closed_loop(self, concurrency: int, end_s: float) -> None:
        async def client() -> None:
            while time.perf_counter() < end_s:
                await self.one_request()

        await asyncio.gather(*(client() for _ in range(concurrency)))

    async def one_request(self) -> None:
        import httpx

        picks = self._rng.integers(len(self.files), size=self.config.images_per_request)
        files = [("image", (f"{i}.png", self.files[i], "image/png")) for i in picks]
        data = {} if self.config.deadline_s is None else {"deadline_s": self.config.deadline_s}
        self.sent += 1
        started_s = time.perf_counter()
        try:
            response = await self.client.post("/v1/classify", files=files, data=data)
        except httpx.TimeoutException:
            self.errors["timeout"] += 1
            return
        except httpx.TransportError as error:
            self.errors["connection"] += 1
            self.error_examples.setdefault("connection", str(error))
            return
        if response.status_code != 200:
            key = str(response.status_code)
            self.errors[key] += 1
            self.error_examples.setdefault(key, response.text[:300])
            return
        self.latencies_s.append(time.perf_counter() - started_s)
        results = response.json()["results"]
        self.images_ok += len(results)
        self.correct += sum(
            int(r["label"]) == int(self.labels[i]) for r, i in zip(results, picks, strict=True)
        )
