"""hetsched: learned, runtime-aware schedulers for DL work on heterogeneous accelerators."""

__version__ = "0.1.0"
