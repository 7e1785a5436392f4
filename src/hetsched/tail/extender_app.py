"""The extender's HTTP service: ``POST /filter`` and ``POST /prioritize`` on the shared stack.

Built on :func:`hetsched.core.web.create_service_app` (limits, deadlines, token or mutual TLS,
``/healthz``, ``/readyz``, ``/metrics``, JSON errors). Bodies are read within the size limit and
decoded straight into the strict wire types (:mod:`.extender_api`, msgspec: only the fields the
extender reads become objects); a body that is not JSON or not ExtenderArgs gets a 400 naming the
problem. Prioritize replies are encoded with orjson (the stdlib codec costs twice as long); filter
replies with msgspec, which writes the kept Node objects' JSON text as it came.

Besides the shared HTTP metrics, ``/metrics`` counts model fallbacks by reason
(``hetsched_extender_model_fallbacks_total``: missing, invalid, unknown, shape, bad_slo,
prediction_failed), neutral nodes by why (``..._neutral_nodes_total``: stale, unknown_node,
no_capacity, bad_capacity), telemetry refresh failures, skipped series and the age of the last
successful refresh. Reasons are fixed words, never text from the request.
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import msgspec
import orjson
from fastapi import FastAPI, Request
from fastapi.responses import Response
from prometheus_client import Counter, Gauge

from hetsched.core.errors import HetschedError
from hetsched.core.web import (
    ServiceConfig,
    ServiceError,
    create_service_app,
    json_response,
    read_body,
)
from hetsched.tail.catalog import default_catalog, load_catalog
from hetsched.tail.extender import (
    CACHED_ROWS,
    SHARE_WITHIN,
    Extender,
    Outcome,
    warm_up_args,
)
from hetsched.tail.extender_api import (
    ExtenderArgs,
    ExtenderFilterResult,
    HostPriority,
    MalformedArgsError,
    decode_args,
    decode_args_with_items,
    request_schema,
)
from hetsched.tail.regressors import ModelRepository
from hetsched.tail.scoring import DEFAULT_ERROR_BAND, P90Scorer
from hetsched.tail.telemetry import NodeTelemetry, PrometheusNodeSource, TelemetryRefresher

METRICS_PREFIX = "hetsched_extender"


class ExtenderMetrics:
    """The extender's own metrics, on the service's registry."""

    def __init__(self, app: FastAPI) -> None:
        registry = app.state.metrics.registry
        self.model_fallbacks = Counter(
            f"{METRICS_PREFIX}_model_fallbacks",
            "Requests answered with the neutral fallback, by reason.",
            ["reason"],
            registry=registry,
        )
        self.neutral_nodes = Counter(
            f"{METRICS_PREFIX}_neutral_nodes",
            "Nodes scored neutrally (not predicted), by why.",
            ["why"],
            registry=registry,
        )
        self.telemetry_failures = Counter(
            f"{METRICS_PREFIX}_telemetry_refresh_failures",
            "Node telemetry refreshes that failed (old readings kept, ageing).",
            registry=registry,
        )
        self.telemetry_skipped = Counter(
            f"{METRICS_PREFIX}_telemetry_skipped_series",
            "Prometheus series naming no node (neither the node label nor a mapped instance).",
            registry=registry,
        )
        self.telemetry_age = Gauge(
            f"{METRICS_PREFIX}_telemetry_age_seconds",
            "Seconds since the last successful telemetry refresh (-1: none yet).",
            registry=registry,
        )

    def record(self, outcome: Outcome) -> None:
        if outcome.model_fallback is not None:
            self.model_fallbacks.labels(outcome.model_fallback).inc()
        for why, count in outcome.neutral_nodes.items():
            self.neutral_nodes.labels(why).inc(count)


def _bad_request(error: MalformedArgsError) -> ServiceError:
    return ServiceError(400, f"malformed extender request: {error}", "bad_request")


def parse_args_json(body: bytes) -> ExtenderArgs:
    """ExtenderArgs from a body, parsed and validated in one pass (prioritize)."""
    try:
        return decode_args(body)
    except MalformedArgsError as error:
        raise _bad_request(error) from None


def parse_args_with_items(body: bytes) -> tuple[ExtenderArgs, list[msgspec.Raw] | None]:
    """ExtenderArgs and the request's Node objects exactly as sent (filter returns them)."""
    try:
        return decode_args_with_items(body)
    except MalformedArgsError as error:
        raise _bad_request(error) from None


def warm_up(extender: Extender) -> None:
    """Answers one prioritize per catalogue model, then hides the process's heap from the
    collector.

    The regressor's first prediction is slow, so it is made here. Afterwards torch, the regressor
    and the catalogue make ~10^5 long-lived objects that every full collection would walk
    (~165 ms); ``gc.freeze`` moves them to the permanent generation, so the collections that
    per-request garbage sets off only see new objects. The freeze is process-wide, which is what
    a server process wants.
    """
    for key in extender.catalog.model_keys():
        extender.prioritize(warm_up_args(key))
    gc.collect()
    gc.freeze()


def create_extender_app(
    extender: Extender,
    config: ServiceConfig,
    telemetry_source: PrometheusNodeSource | None = None,
    refresh_interval_s: float = 15.0,
) -> FastAPI:
    """The extender's FastAPI app; its start-up warms the model and, given a telemetry source,
    starts refreshing ``extender.telemetry`` from it every ``refresh_interval_s``.

    Ready (``/readyz``) once warmed up and, with telemetry, after the first successful refresh.
    """
    if telemetry_source is not None and extender.telemetry is None:
        raise HetschedError("a telemetry source needs the extender's telemetry cache")
    state = {"warm": False}
    refresher: TelemetryRefresher | None = None

    def ready() -> bool:
        telemetry = extender.telemetry
        return state["warm"] and (telemetry is None or telemetry.refreshed_s is not None)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if refresher is not None:
            refresher.start()
        warm_up(extender)
        state["warm"] = True
        try:
            yield
        finally:
            if refresher is not None:
                refresher.stop()

    app = create_service_app(
        "hetsched tail scheduler extender",
        config,
        metrics_prefix=METRICS_PREFIX,
        ready=ready,
        lifespan=lifespan,
    )
    metrics = ExtenderMetrics(app)
    if telemetry_source is not None and extender.telemetry is not None:
        refresher = TelemetryRefresher(
            telemetry_source,
            extender.telemetry,
            refresh_interval_s,
            on_failure=lambda error: metrics.telemetry_failures.inc(),
            on_skipped=metrics.telemetry_skipped.inc,
        )

    def telemetry_age_s() -> float:
        telemetry = extender.telemetry
        if telemetry is None or telemetry.refreshed_s is None:
            return -1.0
        return telemetry.clock() - telemetry.refreshed_s

    metrics.telemetry_age.set_function(telemetry_age_s)
    request_body = {"content": {"application/json": {"schema": request_schema()}}}

    @app.post(
        "/filter",
        response_model=ExtenderFilterResult,
        openapi_extra={"requestBody": request_body},
    )
    async def filter_nodes(request: Request) -> Response:
        args, items = parse_args_with_items(await read_body(request, config))
        result, outcome = extender.filter(args, items)
        metrics.record(outcome)
        return json_response(msgspec.json.encode(result))

    @app.post(
        "/prioritize",
        response_model=list[HostPriority],
        openapi_extra={"requestBody": request_body},
    )
    async def prioritize(request: Request) -> Response:
        args = parse_args_json(await read_body(request, config))
        priorities, outcome = extender.prioritize(args)
        metrics.record(outcome)
        return json_response(orjson.dumps(priorities))

    return app


def build_extender(
    repo: Path,
    catalog_path: Path | None = None,
    error_band: float | None = None,
    telemetry_ttl_s: float | None = None,
) -> Extender:
    """An extender from a model repository's latest version, a catalogue (the built-in one if
    None) and, with a TTL, an empty telemetry cache. The error band defaults to the model's
    held-out RMSLE as the repository recorded it (:data:`DEFAULT_ERROR_BAND` if absent)."""
    fitted, meta = ModelRepository(repo).load()
    catalog = load_catalog(catalog_path) if catalog_path is not None else default_catalog()
    if error_band is None:
        recorded = (meta.get("metrics") or {}).get("rmsle")
        error_band = float(recorded) if recorded else DEFAULT_ERROR_BAND
    telemetry = NodeTelemetry(telemetry_ttl_s) if telemetry_ttl_s is not None else None
    scorer = P90Scorer(
        fitted, error_band=error_band, share_within=SHARE_WITHIN, cached_rows=CACHED_ROWS
    )
    return Extender(scorer, catalog, telemetry)
