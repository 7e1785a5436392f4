"""The per-node agent: a tiny HTTP service that reports this machine's utilisation for eqs. 6-8.

For clusters without node_exporter: each node runs the agent, and ``GET /`` answers JSON that
:func:`hetsched.tail.node_features.capacity_from_agent_json` turns into a node capacity. It runs on
the shared HTTP stack (:mod:`hetsched.core.web`), so it has the same limits, probes, token and
metrics as the extender.
"""

from __future__ import annotations

import psutil
from fastapi import FastAPI

from hetsched.core.web import ServiceConfig, create_service_app
from hetsched.core.web_server import ServiceServer
from hetsched.tail.proc_contention import read_contention


def agent_payload(name: str, window_s: float = 0.1) -> dict:
    """The node agent's JSON: this machine's per-core busy fractions over ``window_s``, clock, and
    the contention that utilisation cannot show (:mod:`hetsched.tail.proc_contention`: PSI, run
    queue, steal; a feature this kernel lacks is null and listed in ``contention.absent``)."""
    per_cpu = psutil.cpu_percent(interval=window_s, percpu=True)
    freq = psutil.cpu_freq()
    return {
        "name": name,
        "freq_ghz": (freq.max or freq.current) / 1000 if freq else 1.0,
        "per_core_busy": [p / 100 for p in per_cpu],
        "contention": read_contention(len(per_cpu), window_s=window_s).as_dict(),
    }


def create_agent_app(name: str, config: ServiceConfig) -> FastAPI:
    """The per-node agent on the shared HTTP stack: ``GET /`` answers :func:`agent_payload`."""
    app = create_service_app(f"hetsched node agent {name}", config, metrics_prefix="hetsched_agent")

    @app.get("/")
    def utilisation() -> dict:  # sync: psutil samples for 0.1 s, on a worker thread
        return agent_payload(name)

    return app


def serve_agent(name: str, config: ServiceConfig | None = None) -> ServiceServer:
    """Starts the per-node agent on a thread (loopback, a free port unless ``config`` says)."""
    config = config or ServiceConfig()
    server = ServiceServer(create_agent_app(name, config), config)
    server.start()
    return server
