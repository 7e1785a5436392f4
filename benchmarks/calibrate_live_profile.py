"""Calibrates a device profile to the live executor's measured capacity (sim-to-real, issue 19).

``hetsched slim profile`` times bare forward passes; a live server also pays the executor's
per-batch work (one Python event loop, hand-offs, stacking, copies), so the simulator fed with the
bare profile predicted a live CPU server 2.5x (width 1.0) to 6.7x (width 0.25) faster than it ran.
This fits the profile's two free figures, the per-batch overhead (``launch_overhead_s``) and the
achieved share of the peak (``achieved_fraction``), so that the simulated capacity of one server
(:func:`hetsched.slim.sim.capacity.server_capacity_per_s`) equals the live capacity that
``bench_slim_live_capacity.py`` measured with one server at two widths: for each overhead on a
log grid, the fraction that matches the widest width's capacity (bisection; capacity grows with
the fraction), and of those the overhead whose narrowest-width capacity is nearest in log terms.
Everything else of the profile is kept, and ``source`` says it was fitted.

    python benchmarks/calibrate_live_profile.py --profile benchmarks/profiles/cpu-1thread-8px.json \
        --capacity runs/live-capacity-2.json --image-size 8 --num-classes 10 \
        --out runs/profiles/cpu-1thread-8px-live.json
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

from hetsched.core.devices import DeviceSpec, load_device
from hetsched.core.entry import run_reporting_user_errors
from hetsched.core.errors import DataError
from hetsched.slim.executor.config import ExecutorConfig
from hetsched.slim.model.costs import SegmentCostTable
from hetsched.slim.sim.capacity import server_capacity_per_s
from hetsched.slim.sim.scenario import model_costs

OVERHEADS_S = np.geomspace(1e-5, 1e-2, 31)
"""Per-batch overheads tried (10 us to 10 ms)."""
BISECTION_STEPS = 20


def simulated_capacity(
    spec: DeviceSpec, overhead_s: float, fraction: float, width: float, costs: SegmentCostTable
) -> float:
    """Simulated images/s of one server of ``spec`` with the two figures replaced."""
    fitted = spec.model_copy(
        update={"launch_overhead_s": overhead_s, "achieved_fraction": fraction}
    )
    return server_capacity_per_s(fitted, costs, ExecutorConfig(), width)


def matching_fraction(
    spec: DeviceSpec, overhead_s: float, width: float, target: float, costs: SegmentCostTable
) -> float:
    """The achieved fraction at which the simulated capacity at ``width`` is ``target``
    (bisection in log space between 1e-4 and 1)."""
    low, high = math.log(1e-4), 0.0
    for _ in range(BISECTION_STEPS):
        middle = (low + high) / 2
        if simulated_capacity(spec, overhead_s, math.exp(middle), width, costs) < target:
            low = middle
        else:
            high = middle
    return math.exp(high)


def main() -> None:
    """Reads the profile and the one-server live capacities, fits, writes the profile."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", type=Path, required=True)
    parser.add_argument("--capacity", type=Path, required=True, help="bench_slim_live_capacity")
    parser.add_argument(
        "--servers",
        type=int,
        default=1,
        help="fit to each server's share of this many live servers' capacity (the live servers"
        " share one process: two served 321 images/s at width 1.0 where one served 221)",
    )
    parser.add_argument("--image-size", type=int, required=True)
    parser.add_argument("--num-classes", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    spec = load_device(args.profile)
    try:
        live = {
            float(r["width"]): float(r["images_per_s"]) / args.servers
            for r in json.loads(args.capacity.read_text())["rows"]
            if r["servers"] == args.servers
        }
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise DataError(
            f"{args.capacity}: not a bench_slim_live_capacity result ({error})"
        ) from None
    if len(live) < 2:
        raise DataError(f"{args.capacity}: needs {args.servers}-server capacities at two widths")
    wide, narrow = max(live), min(live)
    costs = model_costs(args.num_classes, args.image_size)
    candidates = []
    for overhead_s in OVERHEADS_S:
        fraction = matching_fraction(spec, overhead_s, wide, live[wide], costs)
        narrow_per_s = simulated_capacity(spec, overhead_s, fraction, narrow, costs)
        candidates.append((abs(math.log(narrow_per_s / live[narrow])), overhead_s, fraction))
    _, overhead_s, fraction = min(candidates)
    for width, measured in sorted(live.items()):
        model = simulated_capacity(spec, overhead_s, fraction, width, costs)
        print(f"width {width:g}: live {measured:.0f} images/s, calibrated model {model:.0f}")
    print(f"launch overhead {spec.launch_overhead_s * 1e3:.3f} -> {overhead_s * 1e3:.3f} ms;"
          f" achieved fraction {spec.achieved_fraction:.3f} -> {fraction:.3f}")  # fmt: skip
    fitted = spec.model_copy(
        update={
            "launch_overhead_s": overhead_s,
            "achieved_fraction": fraction,
            "source": f"{spec.source}; per-batch overhead and rate fitted to the live capacity"
            f" of {args.servers} server(s) in {args.capacity.name}",
        }
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"device": fitted.model_dump(mode="json")}, indent=1))
    print(f"written: {args.out}")


if __name__ == "__main__":
    run_reporting_user_errors(main)
