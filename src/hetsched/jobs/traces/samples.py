"""Sample traces shipped inside the package, addressed as ``sample:NAME`` wherever a command takes
a trace file.

They are small cuts of real public traces (the data card is ``sample_data/README.md`` beside this
module), so that the documented examples run from a clone alone.
"""

from __future__ import annotations

from pathlib import Path

from hetsched.core.errors import HetschedError

SAMPLE_PREFIX = "sample:"
SAMPLE_DIR = Path(__file__).resolve().parent / "sample_data"

#: Sample name -> its trace file, relative to ``SAMPLE_DIR`` (a file the format detection knows).
SAMPLES: dict[str, str] = {
    "alibaba2023": "alibaba2023/openb_pod_list_gpuspec33.csv",
}


def is_sample(trace: str | Path) -> bool:
    """Whether ``trace`` names a sample (``sample:NAME``) rather than a file."""
    return str(trace).startswith(SAMPLE_PREFIX)


def sample_path(name: str) -> Path:
    """The file of the sample called ``name``.

    Raises:
        HetschedError: For an unknown name; the message lists the samples there are.
    """
    if name not in SAMPLES:
        known = ", ".join(SAMPLE_PREFIX + n for n in sorted(SAMPLES))
        raise HetschedError(f"unknown sample trace {SAMPLE_PREFIX}{name}; known: {known}")
    return SAMPLE_DIR / SAMPLES[name]


def resolve_trace(trace: str | Path) -> Path:
    """``trace`` as a file path: a sample's packaged file for ``sample:NAME``, else unchanged."""
    if is_sample(trace):
        return sample_path(str(trace)[len(SAMPLE_PREFIX) :])
    return Path(trace)
