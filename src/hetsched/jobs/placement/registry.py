"""Placers by name, for ``--placement`` and ``SimulationConfig(placer=...)``.

The registry sits above the placers it names (pack and spread from
:mod:`hetsched.jobs.placement`, the MILP from :mod:`hetsched.jobs.milp`), so neither placer module
needs the other to register itself. The MILP's solvers (scipy, CVXPY, cvxopt) load on its first
solve, not here.
"""

from __future__ import annotations

from hetsched.core.registry import Registry
from hetsched.jobs.placement.milp import MILPPlacer
from hetsched.jobs.placement.placers import PackPlacer, Placer, SpreadPlacer

PLACERS: Registry[type[Placer]] = Registry("placer")
PLACERS.register("pack")(PackPlacer)
PLACERS.register("spread")(SpreadPlacer)
PLACERS.register("milp")(MILPPlacer)
