"""The knobs of Algorithm 1 (Slim Scheduler paper), validated: what one greedy executor is given."""

from __future__ import annotations

from pydantic import Field, field_validator

from hetsched.core.config import StrictModel


class ExecutorConfig(StrictModel, use_attribute_docstrings=True):
    """The knobs of Algorithm 1 (r, B_max, M_max, U_blk, t_idle, Q_th, N_new, W), paper meaning."""

    arrival_rate_per_s: float = Field(400.0, gt=0)
    """r: segment requests per second the server is driven at. The executor reacts to arrivals
    as they come; ``hetsched slim run-server``'s workload generator draws them at this rate."""
    max_batch: int = Field(16, ge=1)
    """B_max: most requests of one key in a batch."""
    vram_cap_bytes: int | None = Field(None, gt=0)
    """M_max: device memory the executor may fill with instances (None: the whole device)."""
    util_block_pct: float = Field(95.0, gt=0, le=100)
    """U_blk: no instance is loaded while the latest utilisation is at or above this."""
    idle_unload_s: float = Field(2.0, gt=0)
    """t_idle: an instance idle this long is offloaded."""
    scale_queue_threshold: int = Field(32, ge=1)
    """Q_th: queue length of the head key at which more instances of it are loaded."""
    scale_max_new: int = Field(2, ge=1)
    """N_new: most instances loaded in one scale-up."""
    widths: tuple[float, ...] = (0.25, 0.5, 0.75, 1.0)
    """W: the slimming set (widths instances and requests may have)."""
    exact_width: bool = False
    """Run a request only on an instance of exactly its requested width. False is the paper's
    FINDFREEBESTFIT (line 11: the smallest free width >= w_req), under which the router's width
    is only a lower bound on what runs."""
    blocked_retry_s: float = Field(0.005, gt=0)
    """When the head cannot run and nothing of this executor is running, look again after this."""
    sample_interval_s: float = Field(0.01, gt=0)
    """Least time between two samples of the telemetry series."""

    @field_validator("widths")
    @classmethod
    def _widths_are_ratios(cls, widths: tuple[float, ...]) -> tuple[float, ...]:
        if not widths or any(not 0 < w <= 1 for w in widths) or len(set(widths)) != len(widths):
            raise ValueError(f"widths must be distinct ratios in (0, 1], got {widths}")
        return tuple(sorted(float(w) for w in widths))
