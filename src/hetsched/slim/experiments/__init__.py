"""Experiments and reports: the paper's router experiment (Tables III-V), one server under a
workload (run-server), and the metrics tables they print."""
