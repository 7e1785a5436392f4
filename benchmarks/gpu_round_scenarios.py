"""Writes the live scenarios of a heterogeneous GPU + CPU pair from capacities measured on it.

Part of ``benchmarks/gpu_round.sh`` (issue 19, item 6, on a lent GPU machine). The simulated
scenarios' rates are for simulated GPUs and the CPU scenarios' (``benchmarks/slim-live/``) for the
2-core sandbox, so the pair's scenarios take their load from ``bench_slim_live_capacity.py`` run
on the same machine a minute earlier:

* ``live-pair-1.5x``: Poisson arrivals at 1.5x the GPU server's capacity alone at width 1.0, so
  the GPU cannot take everything at full width: a router must use the CPU server or narrower
  widths (the scheduling question of a heterogeneous pair);
* ``live-pair-bursty``: on/off bursts (factor 4, 0.1 s on) around a mean of the GPU's capacity.

Each rate is capped at 0.8x the best capacity measured in any cell (pair, narrowest width), so
that some policy can keep the queues bounded; the cap, when it applies, is written into the
scenario's description. Servers are the device profiles measured on the same machine
(``hetsched slim profile``), so the routers' predicted completion times are this machine's.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml

from hetsched.core.entry import run_reporting_user_errors
from hetsched.core.errors import DataError

PAIR_LOAD_FACTOR = 1.5
BURSTY_LOAD_FACTOR = 1.0
CAP_OF_BEST_CAPACITY = 0.8


def capacity_per_s(rows: list[dict], devices: list[str], width: float) -> float:
    """The measured images/s of one (devices, width) cell."""
    for row in rows:
        if row["devices"] == devices and row["width"] == width:
            return float(row["images_per_s"])
    raise DataError(f"capacity file has no cell for devices {devices} at width {width}")


def main() -> None:
    """Reads the capacities, writes the two scenario YAML files."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--capacity", type=Path, required=True, help="bench_slim_live_capacity JSON"
    )
    parser.add_argument("--device", default="cuda", help="the GPU server's device")
    parser.add_argument("--profiles", type=Path, required=True, help="folder of the two profiles")
    parser.add_argument("--images", type=int, default=2000, help="images per run")
    parser.add_argument("--slo-ms", type=float, default=100.0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    try:
        rows = json.loads(args.capacity.read_text())["rows"]
        best_per_s = max(float(row["images_per_s"]) for row in rows)
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise DataError(f"{args.capacity}: not a capacity result ({error})") from None
    gpu_full_per_s = capacity_per_s(rows, [args.device], 1.0)
    servers = [
        str((args.profiles / "dev-gpu-8px.json").resolve()),
        str((args.profiles / "dev-cpu-1thread-8px.json").resolve()),
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    for name, arrival, factor in (
        ("live-pair-1.5x", "poisson", PAIR_LOAD_FACTOR),
        ("live-pair-bursty", "bursty", BURSTY_LOAD_FACTOR),
    ):
        rate_per_s = factor * gpu_full_per_s
        note = f"{factor:g}x the GPU server's measured capacity at width 1.0"
        cap_per_s = CAP_OF_BEST_CAPACITY * best_per_s
        if rate_per_s > cap_per_s:
            rate_per_s, note = cap_per_s, f"{note}, capped at 0.8x the best measured capacity"
        scenario = {
            "description": f"live {args.device} + cpu pair, {arrival} arrivals at {note}",
            "held_out": False,
            "servers": servers,
            "link": "loopback",
            "arrival": arrival,
            "rate_per_s": round(rate_per_s, 1),
            "num_images": args.images,
            "slo_ms": args.slo_ms,
            "executor": {"exact_width": True},  # as every shipped scenario but paper
        }
        if arrival == "bursty":
            scenario |= {"burst_factor": 4.0, "burst_s": 0.1}
        path = args.out / f"{name}.yaml"
        path.write_text(yaml.safe_dump(scenario, sort_keys=False))
        print(f"{path}: {scenario['rate_per_s']} images/s ({note})")


if __name__ == "__main__":
    run_reporting_user_errors(main)
