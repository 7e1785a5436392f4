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

The report holds throughput (answered images per second of wall time) and goodput (those
answered within their deadline), client-side latency p50/p90/p99 of successful requests and of
refusals (429/503), errors by status, accuracy against the labels, and the energy per image from
the server's ``/metrics`` (the energy counters' increase over the run divided by the images
served, with the counters' measurement source). Requests go out through the light raw-socket
client of :mod:`.http_client`, so the generator takes little CPU from a server on the same host.
"""

from __future__ import annotations

import asyncio
import io
import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Literal

import numpy as np
from PIL import Image

from hetsched.core.errors import ConfigError
from hetsched.core.metrics import summarize
from hetsched.core.seeding import make_rng
from hetsched.core.urls import check_http_url
from hetsched.slim.model.data import load_dataset
from hetsched.slim.serving.http_client import HttpClient, ProtocolError, encode_request
from hetsched.slim.sim.workload import arrival_times_s

_ENERGY = re.compile(
    r'^hetsched_slim_server_energy_joules_total\{server="([^"]*)",source="([^"]*)"\} (\S+)$',
    re.MULTILINE,
)
_SERVED = re.compile(r'^hetsched_slim_images_total\{outcome="served"\} (\S+)$', re.MULTILINE)
BOUNDARY = "hetsched-loadgen-boundary"
REFUSALS = ("429", "503")
CONNECTION_ERRORS = (OSError, ProtocolError, asyncio.IncompleteReadError, ValueError)
"""What a failed exchange raises (ValueError: unparseable numbers in a reply head)."""


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
    """Sent as the ``X-Deadline-S`` header (admission reads it before the body)."""
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
    goodput_images_per_s: float
    """Images answered 200 within their deadline (all answered ones without a deadline), per
    second of the run."""
    latency_s: dict[str, float]
    """p50/p90/p99/mean/max of successful requests, client side."""
    refusal_latency_s: dict[str, float] | None
    """The same of 429/503 refusals (how fast overload is answered); None without refusals."""
    admitted_latency_s: dict[str, float] | None
    """The same of every request the server admitted: answered 200, or 504 at its deadline (how
    long an admitted client waits for an answer); None without any."""
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


def multipart_body(files: list[bytes]) -> bytes:
    """A ``multipart/form-data`` body with each PNG in field ``image`` (boundary
    :data:`BOUNDARY`)."""
    parts = [
        (
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="image"; filename="{i}.png"'
            "\r\nContent-Type: image/png\r\n\r\n"
        ).encode()
        + data
        + b"\r\n"
        for i, data in enumerate(files)
    ]
    return b"".join(parts) + f"--{BOUNDARY}--\r\n".encode()


def scrape_energy(text: str) -> tuple[float, float, str]:
    """(joules summed over servers, images served, sources) from a ``/metrics`` page."""
    matches = _ENERGY.findall(text)
    energy_j = sum(float(value) for _, _, value in matches)
    sources = ",".join(sorted({source for _, source, _ in matches})) or "none"
    served = _SERVED.search(text)
    return energy_j, float(served.group(1)) if served else 0.0, sources


def wait_ready(
    url: str, timeout_s: float = 180.0, is_alive: Callable[[], bool] = lambda: True
) -> None:
    """Blocks until ``url``'s ``/readyz`` answers 200 (servers started, models loaded).

    Args:
        is_alive: Returns False once waiting is pointless (e.g. the server process exited).

    Raises:
        ConfigError: If ``url`` is not an http(s) URL with a host (urllib would also open
            ``file:`` and other schemes, which a readiness probe must never do).
        TimeoutError: If the server is not ready within ``timeout_s`` or stopped being alive.
    """
    check_http_url(url, "--url")
    deadline_s = time.monotonic() + timeout_s
    while time.monotonic() < deadline_s and is_alive():
        try:
            with urllib.request.urlopen(f"{url}/readyz", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.25)
    raise TimeoutError(f"{url} did not become ready")


async def run_load(config: LoadgenConfig) -> LoadReport:
    """Runs the load against ``config.url`` and reports.

    Raises:
        ConfigError: For neither or both of rate and concurrency, or a server that cannot be
            reached before the run.
    """
    if (config.rate_per_s is None) == (config.concurrency is None):
        raise ConfigError("give exactly one of --rate (open loop) or --concurrency (closed loop)")
    files, labels = holdout_pngs(config.data)
    try:
        client = HttpClient(config.url, config.max_connections)
    except ValueError as error:
        raise ConfigError(f"--url: {error}") from None
    run = _Run(client, config, files, labels)
    try:
        before = await run.metrics()
        started_s = time.perf_counter()
        if config.rate_per_s is not None:
            mode = f"open loop, {config.pattern} {config.rate_per_s:g} requests/s"
            await run.open_loop(config.rate_per_s)
        else:
            mode = f"closed loop, concurrency {config.concurrency}"
            await run.closed_loop(config.concurrency or 1, started_s + config.duration_s)
        elapsed_s = time.perf_counter() - started_s
        after = await run.metrics()
    finally:
        await client.close()
    served = after[1] - before[1]
    energy = (after[0] - before[0]) / served if served > 0 else None
    admitted = run.latencies_s + run.deadline_latencies_s
    return LoadReport(
        mode=mode,
        duration_s=elapsed_s,
        requests_sent=run.sent,
        requests_ok=len(run.latencies_s),
        images_ok=run.images_ok,
        errors=dict(run.errors),
        throughput_images_per_s=run.images_ok / elapsed_s,
        goodput_images_per_s=run.images_on_time / elapsed_s,
        latency_s=_percentiles(run.latencies_s),
        refusal_latency_s=_percentiles(run.refusal_latencies_s)
        if run.refusal_latencies_s
        else None,
        admitted_latency_s=_percentiles(admitted) if admitted else None,
        accuracy=run.correct / run.images_ok if run.images_ok else None,
        energy_j_per_image=energy,
        energy_source=after[2],
        error_examples=run.error_examples,
    )


def _percentiles(values: list[float]) -> dict[str, float]:
    summary = summarize(values)
    return {
        "p50": summary.p50,
        "p90": summary.p90,
        "p99": summary.p99,
        "mean": summary.mean,
        "max": summary.max,
    }


class _Run:
    """The state of one load run: sends requests and tallies the answers."""

    def __init__(self, client: HttpClient, config: LoadgenConfig, files, labels) -> None:
        self.client, self.config = client, config
        self.files, self.labels = files, labels
        self._rng = make_rng(config.seed)
        self._headers = {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}
        if config.token:
            self._headers["Authorization"] = f"Bearer {config.token}"
        if config.deadline_s is not None:
            self._headers["X-Deadline-S"] = f"{config.deadline_s:g}"
        self.sent = self.images_ok = self.images_on_time = self.correct = 0
        self.latencies_s: list[float] = []
        self.refusal_latencies_s: list[float] = []
        self.deadline_latencies_s: list[float] = []
        """Of 504 replies: admitted, then answered at the deadline."""
        self.errors: Counter[str] = Counter()
        self.error_examples: dict[str, str] = {}

    async def metrics(self) -> tuple[float, float, str]:
        """(energy, images served, sources) from the server's ``/metrics``."""
        headers = {k: v for k, v in self._headers.items() if k == "Authorization"}
        request = encode_request("GET", "/metrics", self.client.authority, headers)
        try:
            reply = await self.client.send(request, 30.0)
        except (TimeoutError, *CONNECTION_ERRORS) as error:
            raise ConfigError(f"cannot reach {self.config.url}: {error!r}") from None
        if reply.status != 200:
            raise ConfigError(
                f"{self.config.url}/metrics answered {reply.status}: {reply.body[:200]!r}"
            )
        return scrape_energy(reply.body.decode())

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
        picks = self._rng.integers(len(self.files), size=self.config.images_per_request)
        body = multipart_body([self.files[i] for i in picks])
        request = encode_request("POST", "/v1/classify", self.client.authority, self._headers, body)
        self.sent += 1
        started_s = time.perf_counter()
        try:
            reply = await self.client.send(request, self.config.timeout_s)
        except TimeoutError:
            self.errors["timeout"] += 1
            return
        except CONNECTION_ERRORS as error:
            self.errors["connection"] += 1
            self.error_examples.setdefault("connection", repr(error))
            return
        elapsed_s = time.perf_counter() - started_s
        if reply.status != 200:
            key = str(reply.status)
            self.errors[key] += 1
            self.error_examples.setdefault(key, reply.body[:300].decode(errors="replace"))
            if key in REFUSALS:
                self.refusal_latencies_s.append(elapsed_s)
            elif key == "504":
                self.deadline_latencies_s.append(elapsed_s)
            return
        self.latencies_s.append(elapsed_s)
        results = json.loads(reply.body)["results"]
        self.images_ok += len(results)
        deadline_s = self.config.deadline_s
        if deadline_s is None or elapsed_s <= deadline_s:
            self.images_on_time += len(results)
        self.correct += sum(
            int(r["label"]) == int(self.labels[i]) for r, i in zip(results, picks, strict=True)
        )
