"""Training dataset: features + P90 target from a CSV or a Prometheus server, aligned by timestamp.

The regressor's inputs (eq. 14) are model size, FLOPs and the node's available capacity (eq. 8);
the target is P90 latency in seconds. Optional smoothing is the log-window mean of eq. 15.

The harness records eq. 8 twice: during the run (columns ``cpu_eff`` / ``freq_eff_ghz``, the
default inputs, as the paper's Prometheus samples beside the running pod) and at arrival
(``*_arrival``, before the pod starts). :func:`with_arrival_features` swaps the latter in, so the
two can be compared on the same points. :func:`repeat_spread` measures how far repeats of one
cell disagree, which bounds the RMSLE any regressor on these features can reach.
"""

from __future__ import annotations

import csv
import math
import statistics
from pathlib import Path

from hetsched.core.errors import DataError

FEATURES = ("size_mb", "flops", "cpu_eff", "freq_eff_ghz")
TARGET = "p90_s"
# Eq. 8 inputs sampled before the pod started, by the feature they stand in for.
ARRIVAL_FEATURES = {"cpu_eff": "cpu_eff_arrival", "freq_eff_ghz": "freq_eff_arrival_ghz"}
# A measurement cell: what the harness was asked to run; repeats of it share these values.
CELL_KEYS = ("model", "node", "torch_threads", "contention_duty")


def log_window_smooth(values: list[float], window: int) -> list[float]:
    """Eq. 15: M_i = (1 / min(w, i)) · Σ_{j=max(1, i−w+1)}^{i} log(S_j + 1) (1-based i).

    The result is in log(1 + S) space; :func:`smooth_target` maps it back with expm1.
    """
    if window < 1:
        raise DataError(f"smoothing window must be >= 1, got {window}")
    logs = [math.log1p(v) for v in values]
    out = []
    for i in range(1, len(values) + 1):
        lo = max(1, i - window + 1)
        out.append(sum(logs[lo - 1 : i]) / min(window, i))
    return out


def smooth_target(rows: list[dict], window: int) -> list[dict]:
    """Applies eq. 15 to the target of each (model, node) series in time order."""
    series: dict[tuple, list[dict]] = {}
    for row in sorted(rows, key=lambda r: r["timestamp_s"]):
        series.setdefault((row["model"], row["node"]), []).append(row)
    out = []
    for group in series.values():
        smoothed = log_window_smooth([r[TARGET] for r in group], window)
        out += [{**r, TARGET: math.expm1(m)} for r, m in zip(group, smoothed, strict=True)]
    return sorted(out, key=lambda r: r["timestamp_s"])


def with_arrival_features(rows: list[dict]) -> list[dict]:
    """Rows whose eq. 8 inputs are the arrival samples instead of the during-run ones."""
    missing = {c for c in ARRIVAL_FEATURES.values() for r in rows if c not in r}
    if missing:
        raise DataError(f"no arrival features in these rows (missing {sorted(missing)})")
    return [{**r, **{f: float(r[c]) for f, c in ARRIVAL_FEATURES.items()}} for r in rows]


def repeat_spread(rows: list[dict], keys: tuple[str, ...] = CELL_KEYS) -> dict:
    """Disagreement of repeated measurements of one cell, in the units of Table III's RMSLE.

    Within each cell of two or more rows, the deviations of log1p(P90 in ms) from the cell mean are
    pooled (ddof 1 per cell). The result estimates the RMSLE that even a regressor knowing each
    cell's true mean P90 would have on a fresh repeat: Table III cannot be expected to go below it
    unless the features explain the repeat-to-repeat differences.

    Returns:
        cells, rows, ``rmsle_floor`` (pooled standard deviation) and ``median_max_over_min`` (the
        median over cells of the largest over the smallest repeat's P90).
    """
    cells: dict[tuple, list[float]] = {}
    for row in rows:
        try:
            key = tuple(str(row[k]) for k in keys)
        except KeyError as error:
            raise DataError(f"rows lack the cell column {error}") from None
        cells.setdefault(key, []).append(float(row[TARGET]) * 1e3)
    repeated = [v for v in cells.values() if len(v) >= 2]
    if not repeated:
        raise DataError("no cell was measured more than once: use --repeats >= 2")
    squares, dof = 0.0, 0
    for values in repeated:
        logs = [math.log1p(v) for v in values]
        mean = sum(logs) / len(logs)
        squares += sum((x - mean) ** 2 for x in logs)
        dof += len(logs) - 1
    return {
        "cells": len(repeated),
        "rows": sum(len(v) for v in repeated),
        "rmsle_floor": math.sqrt(squares / dof),
        "median_max_over_min": statistics.median(max(v) / min(v) for v in repeated),
    }


def load_csv(path: str | Path) -> list[dict]:
    """Reads a measurement CSV; every feature and the target must be present and numeric."""
    path = Path(path)
    if not path.is_file():
        raise DataError("dataset file not found", path=str(path))
    rows = []
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        missing = {*FEATURES, TARGET, "timestamp_s", "model", "node"} - set(reader.fieldnames or [])
        if missing:
            raise DataError(f"missing columns {sorted(missing)}", path=str(path))
        for line, raw in enumerate(reader, start=2):
            row = dict(raw)
            for key in (*FEATURES, TARGET, "timestamp_s"):
                try:
                    row[key] = float(raw[key])
                except (TypeError, ValueError):
                    raise DataError(
                        f"not a number: {raw[key]!r}", path=str(path), line=line, field=key
                    ) from None
            rows.append(row)
    if not rows:
        raise DataError("dataset has no rows", path=str(path))
    return rows


def _query_range(base_url: str, expr: str, start_s: float, end_s: float, step_s: float) -> list:
    import httpx

    try:
        response = httpx.get(
            f"{base_url}/api/v1/query_range",
            params={"query": expr, "start": start_s, "end": end_s, "step": step_s},
            timeout=10.0,
        )
    except httpx.HTTPError as error:
        raise DataError(f"cannot reach Prometheus at {base_url}: {error}") from error
    body = response.json()
    if body.get("status") != "success":
        raise DataError(f"Prometheus query {expr!r} failed: {body.get('error')}")
    return body["data"]["result"]


def from_prometheus(
    base_url: str, start_s: float, end_s: float, step_s: float = 1.0, window: str = "30s"
) -> list[dict]:
    """Builds rows from the harness's metrics: P90 by ``histogram_quantile`` over the latency
    histogram's bucket rates, joined with the feature gauges at the same (model, node, time)."""
    p90_expr = (
        "histogram_quantile(0.9, sum by (model, node, le) "
        f"(rate(hetsched_inference_latency_seconds_bucket[{window}])))"
    )
    table: dict[tuple, dict] = {}
    for key, expr in [(TARGET, p90_expr)] + [(f, f"hetsched_{f}") for f in FEATURES]:
        for series in _query_range(base_url, expr, start_s, end_s, step_s):
            labels = series["metric"]
            for ts, value in series["values"]:
                value_f = float(value)
                if math.isnan(value_f) or math.isinf(value_f):
                    continue
                row = table.setdefault(
                    (labels["model"], labels["node"], float(ts)),
                    {"model": labels["model"], "node": labels["node"], "timestamp_s": float(ts)},
                )
                row[key] = value_f
    rows = [r for r in table.values() if all(k in r for k in (*FEATURES, TARGET))]
    return sorted(rows, key=lambda r: (r["timestamp_s"], r["model"], r["node"]))


def write_dataset_csv(rows: list[dict], path: str | Path) -> None:
    """Writes the dataset: timestamp_s, model, node, the cell columns every row has (so the repeat
    spread can still be computed from it), features..., target."""
    cell = [k for k in CELL_KEYS if k not in ("model", "node") and all(k in r for r in rows)]
    columns = ["timestamp_s", "model", "node", *cell, *FEATURES, TARGET]
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
